"""One home per serving engine, found by one registry.

Each engine is one module of this package (or of a directory in ``KIT_ENGINE_PATH``) defining ``ENGINE``, an
:class:`Engine` row: everything the kit knows of that engine, read by the area that needs it (its fields say
which). The CLI's and MCP's engine choices are :func:`names`. A new engine is one new module plus its tests.

    import kit.engines as engines
    engines.names()                  # ['sglang', 'vllm', 'tinyserve', 'trtllm', 'transformers', 'unknown']
    engines.engine("vllm").port      # 8000
    engines.guess("vllm serve m")    # the vllm Engine

Files: ``_engine.py`` (the records: :class:`Engine`, :class:`StepMarker`, :class:`GraphOff`), ``_registry.py``
(discovery, lookup, ``guess``, ``step_markers``), one module per engine, named for it. The package sits low (it
imports ``kit.errors`` only); an engine module may name its parsers by dotted string (``"kit.logs._sglang:FORMAT"``)
so they stay beside the scan that runs them.
"""
from __future__ import annotations

from kit.engines._engine import Engine, GraphOff, StepMarker
from kit.engines._registry import engine, engines, guess, names, refresh, step_markers
from kit.util import publish

__all__ = ["Engine", "GraphOff", "StepMarker", "engine", "engines", "guess", "names", "refresh", "step_markers"]

publish(globals(), __all__)
