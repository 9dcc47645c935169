"""Decode profiles: Kineto / nsys traces -> kernel tables, LLM kernel categories, steps, AllReduce share.

``load(paths)`` reads one trace per rank (PyTorch-profiler chrome traces, ``.json`` or gzip,
``nsys stats`` CSV, ``nsys export`` SQLite) into a :class:`Profile`; ``Profile.summary(phase=...)``
gives the category breakdown with GPU idle as its own row, per step, per rank, exposed versus total
communication, the spread of AllReduce time across ranks and the top kernels per category, plus
warnings for everything the trace cannot show (zero-duration graph kernels, truncation, missing GPU
events, ranks on different clock bases).

Categories come from an ordered regex table shipped as ``kit/profile/categories.toml`` (extend or override
with ``rules=``). Unlike HTA, whose communication class is ``^nccl.*Kernel``, the table catches
vLLM/SGLang ``cross_device_reduce``, PyTorch ``multimem_all_reduce`` and flashinfer
``allreduce_fusion`` kernels (see ``../shared/reference/traces.md``).

Files:

- ``_profile.py``: load, Profile and Summary: the public façade
- ``_load.py``: one file per rank: format detection, cache, parse, in parallel
- ``_read.py``: reading one file into raw tables (Kineto or nsys)
- ``_io.py``: bytes in: gzip, magic-byte sniffing
- ``_kineto.py``: Kineto/torch-profiler chrome-trace JSON -> kernel and annotation tables
- ``_nsys.py``: nsys stats CSV and nsys SQLite -> kernel tables
- ``_cache.py``: the parquet cache of parsed tables, keyed by file identity
- ``_categories.py``: the category rule table (categories.toml) and kernel -> category
- ``_windows.py``: decode/prefill steps and phases from annotations
- ``_summary.py``: the summary arithmetic: per category, step, rank; AllReduce share and exposure
"""
from __future__ import annotations

from kit.profile._profile import (  # noqa: F401
    PHASES,
    Profile,
    Rule,  # noqa: F401  (public, not in __all__)
    Summary,
    default_rules,
    load,
)
from kit.util import publish

__all__ = ['PHASES', 'Profile', 'Summary', 'default_rules', 'load']

publish(globals(), __all__)
