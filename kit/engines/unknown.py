"""An engine the kit was not told of (its log names no engine, its command no known word).

Its load phases are SGLang's words, the most common; no log format, step marker, records or graph-off
mode of its own: ``kit.profile`` finds its steps by the generic rule, ``reference_command`` refuses it.
"""
from __future__ import annotations

from kit.engines import sglang
from kit.engines._engine import Engine

__all__ = ["ENGINE"]

ENGINE = Engine("unknown", "an unknown engine", phases=sglang.ENGINE.phases, port=30000, priority=1000)
