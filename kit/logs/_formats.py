"""The engine table (private to ``kit.logs``): every log format ``kit.logs`` reads, one
:class:`kit.logs._records.LogFormat` row each, in the order the one scan tries them: the engines' formats from
the registry (``kit.engines``: each engine names its own, as an object or as ``"package.module:ATTR"``), then
those no engine owns (NCCL, benchmark output, lines any engine prints). ``tests/engines/test_toy_engine.py`` adds
one as one file.
"""
from __future__ import annotations

import importlib

import kit.engines
from kit.errors import UsageError
from kit.logs import _bench, _common, _nccl

OWN = (
    _nccl.FORMAT,     # NCCL_DEBUG=INFO lines, environment echoes, transports
    _bench.FORMAT,    # benchmark result blocks
    _common.FORMAT,   # custom all-reduce / P2P / slow tokenizer lines, launch notes
)


def resolve(ref):
    """An engine's reference to a parser or a format: the object itself, or the one named
    ``"package.module:ATTR"`` (imported on first use)."""
    if not isinstance(ref, str):
        return ref
    mod, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"engine registry: {ref!r} names nothing ({exc})") from None


def engine_formats() -> tuple:
    """The log formats of every engine, in registry order (SGLang's lines, then vLLM's, ...)."""
    return tuple(resolve(ref) for e in kit.engines.engines() for ref in e.log_formats)


def formats() -> tuple:
    """The table now: the engines' formats, then the kit's own (a registry refreshed with a new engine shows)."""
    return (*engine_formats(), *OWN)
