"""Decode profiles: Kineto / nsys traces -> kernel tables, LLM kernel categories, steps, AllReduce share.

``load(paths)`` reads one trace per rank (PyTorch-profiler chrome traces, ``.json`` or gzip, ``nsys stats``
CSV, ``nsys export`` SQLite) into a :class:`Profile`: each kernel linked to its launch, the CPU ops,
``record_function`` ranges and ``nn.Module`` frames around it, its category (the ordered regex table
``categories.toml``, extended or replaced with ``rules=``; unlike HTA's ``^nccl.*Kernel`` it catches vLLM/SGLang
``cross_device_reduce``, ``multimem_all_reduce`` and flashinfer ``allreduce_fusion``) and ``decided_by``
saying which evidence decided it. ``Profile.summary(phase=...)`` gives the category breakdown with GPU idle
as its own row, per step and rank, exposed communication, the AllReduce spread across ranks, the CPU side
and the warnings for what the trace cannot show; ``compare(a, b)`` splits a step-time difference into
parts that add up to it; ``roofline``, ``ranks``, ``diff_structure``, ``check_attribution`` read a
Profile too. ``prefetch(paths)`` starts parsing in worker processes before pandas is imported.

The package, in the order a trace goes through it (each stage's files are listed in its ``__init__``):
``reading/`` (files -> raw column tables), ``steps/`` (steps, phases, the CPU side of each step),
``attribution/`` (the rule tables, each kernel's category, module, layer; placement by a reference run),
``analyses/`` (what is computed over a Profile); the façade on top: ``_profile.py`` (load, Profile,
Summary), ``_load.py`` (the loader: formats, the cache, parsing in parallel, ``prefetch``) and
``_assemble.py`` (parsed files -> the profile's tables).
"""
from __future__ import annotations

from kit.util import lazy_names

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

__getattr__, __dir__ = lazy_names(globals(), _WHERE)
