"""The engine table (private to ``kit.logs``): every log format ``kit.logs`` reads, one row each.

A row is a :class:`kit.logs._records.LogFormat`, defined in the format's own file: its cheap markers and
line parsers, its tables, whether its lines name the engine, its version banner and the settings
evidence its lines carry. The one scan (``_scan.py``) tries the rows' parsers in this order on every
line; ``read`` builds each row's tables and ``settings`` reads the evidence the scan recorded.

A new engine's log format is one new file (its parsers and its ``FORMAT``) plus one row here
(``tests/logs/test_formats.py`` shows it with a toy format).
"""
from __future__ import annotations

from kit.logs import _bench, _common, _nccl, _sglang, _vllm

FORMATS = (
    _sglang.FORMAT,   # Decode/Prefill batch lines, the server_args dump, captured graph sizes, backend
    _vllm.FORMAT,     # throughput and speculative metrics, engine config, version banner, backend
    _nccl.FORMAT,     # NCCL_DEBUG=INFO lines, environment echoes, transports
    _bench.FORMAT,    # benchmark result blocks
    _common.FORMAT,   # custom all-reduce / P2P / slow tokenizer lines, launch notes
)
