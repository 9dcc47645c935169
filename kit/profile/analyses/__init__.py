"""Analyses over a Profile (the last stage of ``kit.profile``): each reads the Profile only, never the files
(``Profile.of`` turns trace paths into one, once).

- ``_summary.py``: the summary arithmetic, in named steps: per category, step, rank, evidence, module;
  AllReduce share and exposure; CPU-side collectives
- ``_compare.py``: ``compare(a, b)``: where the step-time difference of two runs goes (categories,
  kernel families, ops/modules from the Profile, GPU idle and launch gaps, noise)
- ``_cpu_compare.py``: compare's cause of GPU idle in both runs, in words, and its profiler/outlier warnings
- ``_structure.py``: ``diff_structure(a, b)``: two runs (two engines, two versions) node by node, layer kind
  x operation family (from ``categories.toml``), wall time per node, noise, fusions as merged nodes, and
  the settings that differ beside them; a side without module frames by its placement, else by its layers
  found by repetition and its blocks by place, said with the share undecided
- ``_roofline.py``: ``roofline(profile, gpu)``: achieved bandwidth and FLOP/s of GEMMs with shapes
- ``_ranks.py``: ``ranks(paths)``: many ranks of one job, each digested as it arrives (remote ranks streamed
  from one command per host, hosts in parallel): per-rank step time, the straggler and where it loses
  time, collective wait skew (``RankView``)
- ``_health.py``: ``Profile.health()``: capture mode and per-metric trust (usable / degraded / unreliable)
- ``_check.py``: ``check_attribution(paths)``: the same trace attributed with and without its Python
  frames, and how much kernel time agrees (``kit profile summary --check-attribution``)
"""
