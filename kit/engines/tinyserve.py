"""tinyserve (``python -m tinyserve.launch_server``): the kit's own sample engine (``notebooks/sample/engine``).

It prints SGLang's log lines (read as SGLang by ``kit.logs``), takes SGLang's graph flags and profiler
body, and with ``TINYSERVE_STEP_RECORDS=1`` logs its own per-step and per-request records
(``Step record: {json}`` / ``Request record: {json}``), the finest the reconciliation reads.
"""
from __future__ import annotations

from kit.engines import sglang
from kit.engines._engine import Engine

__all__ = ["ENGINE"]

ENGINE = Engine(
    "tinyserve", "tinyserve", commands=("tinyserve",),
    log_formats=("kit.logs._steps:TINYSERVE",),
    records=(("step", "kit.logs._steps:tinyserve_records", "start tinyserve with TINYSERVE_STEP_RECORDS=1"),),
    launch="python3 -m tinyserve.launch_server --device cpu", bundled="notebooks/sample/engine",
    phases=sglang.ENGINE.phases, port=30000, profile_steps=True, graph_off=sglang.ENGINE.graph_off,
    settings=sglang.ENGINE.settings, priority=30,
    notes="prints SGLang's log lines: its server log is read as SGLang's")
