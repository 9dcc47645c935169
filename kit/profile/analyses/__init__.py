"""Analyses over a Profile (the last stage of ``kit.profile``): each reads the Profile only, never the files
(``Profile.of`` turns trace paths into one, once).

- ``_summary.py``: the summary arithmetic, in named steps (category, step, rank, evidence, module; AllReduce
  share and exposure; CPU-side collectives)
- ``_compare.py``: ``compare(a, b)``: where the step-time difference of two runs goes, beyond noise
- ``_cpu_compare.py``: compare's cause of GPU idle in both runs, in words, and its profiler/outlier warnings
- ``_structure.py``: ``diff_structure(a, b)``: two runs (two engines, two versions) node by node, layer kind
  x operation family, with the settings that differ
- ``_roofline.py``: ``roofline(profile, gpu)``: achieved bandwidth and FLOP/s of GEMMs with shapes
- ``_ranks.py``: ``ranks(paths)``: many ranks of one job digested as they arrive: the straggler, where it
  loses time, collective wait skew (``RankView``)
- ``_health.py``: ``Profile.health()``: capture mode and per-metric trust (usable / degraded / unreliable)
- ``_check.py``: ``check_attribution(paths)``: how much kernel time agrees with and without Python frames
"""
