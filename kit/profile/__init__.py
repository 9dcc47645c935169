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

Each kernel is linked to its launch (correlation id) and to the CPU ops (innermost and outermost,
with the input shapes of the op call), ``record_function`` ranges and ``nn.Module`` frames enclosing
the launch, once, by the one reader; its category is decided by the user's rules, then
that CPU evidence, then inductor fused-op names, then kernel-name rules, and ``decided_by`` says
which. ``Profile.modules()`` gives kernel time per module class and per layer (with_stack traces).

The package, in the order a trace goes through it (each stage's files are listed in its ``__init__``):

- ``reading/``: files -> raw column tables (Kineto, nsys, validation, the cache, traces read on a host)
- ``steps/``: decode/prefill steps and phases, and the CPU side of each step
- ``attribution/``: the rule tables (``categories.toml``), kernel names normalised, each kernel -> its
  launch -> the CPU frames around it -> its category, module, layer; op sequences, layers by repetition,
  placement by alignment with a reference run
- ``analyses/``: what is computed over a Profile: summary, compare, structural diff, roofline, ranks,
  health, the attribution self-check
- the façade on top: ``_profile.py`` (load, Profile and Summary), ``_load.py`` (the loader: format
  detection per file, every cache decision, parsing in parallel, and ``prefetch``, which starts parsing
  before pandas is imported: forked workers in a fresh process, spawned ones otherwise) and
  ``_assemble.py`` (parsed files -> the profile's tables: ranks, clocks, steps, attribution, categories,
  runtime calls; called by the loader, and by ``load`` and ``ranks`` for host-parsed tables)
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
          "load": "_profile", "Rule": "attribution._categories", "prefetch": "_load", "Prefetch": "_load",
          "Comparison": "analyses._compare", "compare": "analyses._compare", "kernel_family": "attribution._names",
          "roofline": "analyses._roofline", "AttributionCheck": "analyses._check",
          "check_attribution": "analyses._check", "category_colours": "attribution._categories",
          "StructuralDiff": "analyses._structure", "diff_structure": "analyses._structure", "ranks": "analyses._ranks",
          "RankView": "analyses._ranks"}


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
