"""One home per serving engine, found by one registry.

Each engine is one module of this package (``sglang``, ``vllm``, ``trtllm``, ``transformers``, ``tinyserve``,
``unknown``) defining ``ENGINE``, an :class:`Engine`: its log formats and speculative reader (read by
``kit.logs``), its trace step markers (``kit.profile``), its own step/request/interval records for the ITL
reconciliation (``kit.logs.engine_records`` -> ``kit.bench.reconcile``), its launch phases, default port,
profiler and graph-off mode (``kit.live``), its version probe (``kit.env``) and the command-line flags its
effective settings come from (``kit.logs.settings``). The CLI's and MCP's engine choices are
:func:`names`. A new engine is one new module (here, or in a directory of ``KIT_ENGINE_PATH``) plus its tests.

    import kit.engines as engines
    engines.names()                  # ['sglang', 'vllm', 'tinyserve', 'trtllm', 'transformers', 'unknown']
    engines.engine("vllm").port      # 8000
    engines.guess("vllm serve m")    # the vllm Engine
    engines.step_markers()           # [(engine, StepMarker), ...]

Files:

- ``_engine.py``: the records: :class:`Engine` (a row), :class:`StepMarker`, :class:`GraphOff`
- ``_registry.py``: discovery (this package's modules, ``KIT_ENGINE_PATH``), lookup, ``guess``, ``step_markers``
- one module per engine, named for it

The package sits low (it imports ``kit.errors`` only), so every area can read it; an engine module may name
its parsers by dotted string (``"kit.logs._sglang:FORMAT"``) so they stay beside the scan that runs them.
"""
from __future__ import annotations

from kit.engines._engine import Engine, GraphOff, StepMarker
from kit.engines._registry import engine, engines, guess, names, refresh, step_markers
from kit.util import publish

__all__ = ["Engine", "GraphOff", "StepMarker", "engine", "engines", "guess", "names", "refresh", "step_markers"]

publish(globals(), __all__)
