"""Decode profiles: Kineto / nsys traces -> kernel tables, LLM kernel categories, steps, AllReduce share.

``compare(a, b, phase="decode")`` splits the step-time difference of two runs into parts that add up
to it (:class:`Comparison`); ``roofline(profile, gpu)`` gives decode GEMMs' achieved bandwidth
against the GPU's peak where the trace recorded shapes.

``load(paths)`` reads one trace per rank (PyTorch-profiler chrome traces, ``.json`` or gzip,
``nsys stats`` CSV, ``nsys export`` SQLite) into a :class:`Profile`; ``Profile.summary(phase=...)``
gives the category breakdown with GPU idle as its own row, per step, per rank, exposed versus total
communication, the spread of AllReduce time across ranks and the top kernels per category, plus
warnings for everything the trace cannot show (zero-duration graph kernels, truncation, missing GPU
events, ranks on different clock bases, values dropped as outside any physical range).
``Profile.runtime`` keeps the CUDA runtime/driver calls (launches, graph launches, copies,
synchronisation) and the CPU ops that wait for the GPU, with thread, time and correlation id.
``prefetch(paths)`` starts parsing in worker processes before pandas is imported (hand the
:class:`Prefetch` to ``load(paths, prefetched=...)``; ``kit profile summary`` does).

Categories come from an ordered regex table shipped as ``kit/profile/categories.toml`` (extend or override
with ``rules=``). Unlike HTA, whose communication class is ``^nccl.*Kernel``, the table catches
vLLM/SGLang ``cross_device_reduce``, PyTorch ``multimem_all_reduce`` and flashinfer
``allreduce_fusion`` kernels.

Files:

Each kernel is linked to its launch (correlation id) and to the CPU ops (innermost and outermost,
with the input shapes of the op call), ``record_function`` ranges and ``nn.Module`` frames enclosing
the launch, once, by the one reader; its category is decided by the user's rules, then
that CPU evidence, then inductor fused-op names, then kernel-name rules, and ``decided_by`` says
which. ``Profile.modules()`` gives kernel time per module class and per layer (with_stack traces).

- ``_profile.py``: load, Profile and Summary: the public façade
- ``_load.py``: the loader: format detection per file, every cache decision, parsing in parallel
  (and ``prefetch``, which starts parsing before pandas is imported: forked workers in a fresh
  process, spawned ones otherwise), then ``_assemble``
- ``_assemble.py``: parsed files -> the profile's tables: ranks, clocks, steps, attribution,
  categories, runtime calls (called directly by the loader, and by ``load`` for host-parsed tables)
- ``_read.py``: one file -> raw column tables with the reader its format calls for (stdlib only)
- ``_io.py``: bytes in: gzip, magic-byte sniffing, ``detect`` (the format decision)
- ``_kineto.py``: Kineto/torch-profiler chrome-trace JSON -> kernel, annotation, runtime-call and CPU-frame
  tables, streamed a few MB at a time; typed decoding of the used fields (msgspec), orjson/json fallback
- ``_nsys.py``: nsys stats CSV and nsys SQLite -> kernel tables
- ``_validate.py``: broken input repaired or dropped and counted (NaN, text numbers, missing ts,
  negative or out-of-range times and durations, kernels without ``cat``, duplicates, too-deep events),
  applied where raw tables become frames
- ``_cache.py``: the cache (Arrow IPC files) of assembled profiles, keyed by the files' identities and the rules;
  this user's own 0700 directory only, every entry sealed with a keyed digest
  (used by ``_load`` only)
- ``_categories.py``: the rule tables (categories.toml: kernel names, CPU frames, fused names)
- ``_attribution.py``: kernel -> launch -> enclosing frames -> category, ``decided_by``, modules
- ``_columns.py``: text columns (categoricals) read once per distinct value, not ``astype(str)`` per row
- ``_sequences.py``: unfused op sequences (RMSNorm, rotate_half, cache cat, MoE router + experts) from
  the CPU op tree, for traces without module frames
- ``_check.py``: ``check_attribution(paths)``: the same trace attributed with and without its Python
  frames, and how much kernel time agrees (``kit profile summary --check-attribution``)
- ``_windows.py``: decode/prefill steps and phases: the engines' markers, else any loop's repeated range,
  ``ProfilerStep#N``, graph launches, the model's forwards (``load(step_marker=)`` names the range)
- ``_cpu.py``: the CPU side of each step (launches, graph launches, memcpy/memset, syncs, CPU time vs
  GPU busy, GPU-idle gaps with their cause) and the GPU-/launch-/host-bound verdict
- ``_cpu_compare.py``: compare's cause of GPU idle in both runs, in words, and its profiler/outlier warnings
- ``_arrays.py``: array helpers over table columns (codes per distinct value, NaN means, stable order)
- ``_summary.py``: the summary arithmetic: per category, step, rank, evidence, module; AllReduce share
  and exposure; CPU-side collectives
- ``_remote.py``: traces read where they lie: the reader shipped to the host as a zipapp, tables
  pulled back (never imports the façade)
- ``_compare.py``: ``compare(a, b)``: where the step-time difference of two runs goes (categories,
  kernel families, ops/modules from the Profile, GPU idle and launch gaps, noise)
- ``_structure.py``: ``diff_structure(a, b)``: two runs (two engines, two versions) node by node, layer kind x
  operation family (qkv/o projection, attention, norm, gate/up, down, router, experts, all-reduce ...), wall
  time per node, noise, fusions as merged nodes, and the settings that differ beside them
- ``_roofline.py``: ``roofline(profile, gpu)``: achieved bandwidth and FLOP/s of GEMMs with shapes
  (the ``input_dims`` the reader kept for each kernel's launching op)
- ``_ranks.py``: ``ranks(paths)``: many ranks of one job, each digested as it arrives (remote ranks streamed
  from one command per host, hosts in parallel): per-rank step time, the straggler and where it loses
  time, collective wait skew (``RankView``)
- ``_health.py``: ``Profile.health()``: capture mode and per-metric trust (usable / degraded / unreliable)
- ``_place.py``: ``load(trace, reference=REF)``: graph-replayed kernels and kernels of traces without
  stack take their counterpart's layer, module, op and category by aligning each step's kernel sequence
  with the reference's; scores per step and layer, unplaced share with its reason, refusal of another program
- ``_layers.py``: ``Profile.find_layers()``: layer boundaries from the repetition of the kernel sequence
"""
from __future__ import annotations

import importlib

from kit.util import publish

__all__ = ["AttributionCheck", "Comparison", "PHASES", "Prefetch", "Profile", "RankView", "StructuralDiff", "Summary",
           "category_colours", "check_attribution", "compare", "default_rules", "diff_structure", "load", "prefetch",
           "ranks", "roofline"]

# Loaded on first use: ``kit profile summary`` starts parsing big traces in worker processes
# (``prefetch``) before pandas is imported, so the two overlap.
_WHERE = {"PHASES": "_profile", "Profile": "_profile", "Summary": "_profile", "default_rules": "_profile",
          "load": "_profile", "Rule": "_categories", "prefetch": "_load", "Prefetch": "_load", "Comparison": "_compare",
          "compare": "_compare", "kernel_family": "_compare", "roofline": "_roofline",
          "AttributionCheck": "_check", "check_attribution": "_check", "category_colours": "_categories",
          "StructuralDiff": "_structure", "diff_structure": "_structure", "ranks": "_ranks", "RankView": "_ranks"}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'kit.profile' has no attribute {name!r}")
    module = importlib.import_module(f"kit.profile.{_WHERE[name]}")
    names = [n for n, m in _WHERE.items() if m == _WHERE[name]]
    ns = {"__name__": __name__, **{n: getattr(module, n) for n in names}}
    publish(ns, names)
    globals().update({n: ns[n] for n in names})
    return ns[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
