"""Serving logs and benchmark output -> pandas tables, with speculative acceptance normalised.

    import kit
    log = kit.logs.read("sglang_server.log")                # local file
    log = kit.logs.read("/var/log/sglang.log", host=host)   # a file on a Host (kit.connect(...))
    log.engine, log.version          # 'sglang' / 'vllm' / 'unknown'; version from the log or the caller
    log.decode                       # SGLang Decode batch lines: running_req, gen_throughput, accept_len ...
    log.prefill                      # SGLang Prefill batch lines
    log.throughput                   # vLLM periodic throughput lines
    log.spec                         # acceptance records, normalised (see below), both engines
    log.bench                        # benchmark result blocks, one row per run
    log.nccl, log.nccl_info          # NCCL_DEBUG=INFO lines, and what they say (version, env, rings ...)
    log.server_args                  # SGLang startup ServerArgs as a dict ({} if not logged)
    log.unknown_lines, log.torn_lines, log.warnings
    kit.logs.spec_summary(log)       # pooled acceptance over the run -> SpecSummary

Every acceptance record (``log.spec``) carries engine, version, ``k`` (draft tokens per verify
step), ``mean_acceptance_length`` (tokens per verify step **including** the bonus token) and
``draft_acceptance_rate`` (accepted drafts / proposed drafts, **excluding** the bonus, a fraction),
``per_position`` when printed, and ``after_idle`` for the first window after an idle period (tiny
throughput), which summaries exclude. SGLang's ``accept rate`` changed definition in 0.5.11 and vLLM's
``Mean acceptance length`` excluded the bonus token in 0.8.5; ``definition`` says which rule was
applied. Give ``version=``/``k=`` when the log does not say (a warning tells you when it matters).

Specific entry points: :func:`parse_sglang` / :func:`parse_vllm` (a path, text or lines -> LogData),
:func:`parse_bench` (text blocks or JSON/JSONL results -> one row per run), :func:`parse_nccl` and
:func:`nccl_summary`, :func:`parse_server_args` (the ServerArgs repr or dict -> dict),
:func:`spec_summary` (pooled acceptance -> :class:`SpecSummary`, whose ``.speedup(c)`` applies
:mod:`kit.models`). Plots: ``kit.plots`` (acceptance/throughput over time, speed-up curves).

The formats follow the engines' own log lines, version by version, read in one streaming scan (``_scan.py``;
a local file of 64 MiB or more in pieces by one worker process per core, ``KIT_LOG_WORKERS=N`` sets the number,
1 = none: the same rows as one process). Memory holds the tables plus one chunk, never the raw lines.
Unknown lines are counted, torn lines (two writers interleaved on one line) are skipped and
counted. A printed value that cannot be what it measures (a negative length or throughput, an infinite
or 400-digit count, text in a numeric field) is dropped and counted in a warning naming its first line
(``parse_bench`` puts them in ``.attrs["warnings"]``). A file that is empty, binary, a directory, not a log
at all, or a JSON that is not a benchmark result raises :class:`kit.errors.LogFormatError` with one line
naming the file.

Each private module's docstring says what it holds (``_api.py`` the façade; CONTRIBUTING.md maps them).

A new engine's log format is named by its engine module (``kit.engines``); ``_formats.py`` builds the table
from the registry. What an engine module outside the kit needs is public: :class:`LogFormat` (a row: its
parsers return :data:`TAKEN`; its tables are :func:`columns`), and for its records :class:`StepRecords`,
:data:`LEVELS` and :class:`RecordSource` (what its reader is given).
"""
from __future__ import annotations

from kit.logs._api import (
    KINDS,
    LogData,
    SpecSummary,
    nccl_summary,
    parse_bench,
    parse_nccl,
    parse_server_args,
    parse_sglang,
    parse_vllm,
    read,
    read_lines,
    spec_summary,
)
from kit.logs._kit_result import is_kit_result, kit_requests, kit_rows, normalise_kit_result, read_kit_result
from kit.logs._nccl import NCCL_COLUMNS
from kit.logs._otlp import otlp_json
from kit.logs._records import TAKEN, LogFormat, SettingEvidence, Settings, columns
from kit.logs._settings import settings
from kit.logs._sglang import DECODE_COLUMNS, PREFILL_COLUMNS
from kit.logs._steps import LEVELS, RecordSource, StepRecords, step_records
from kit.logs._vllm import THROUGHPUT_COLUMNS
from kit.util import publish

__all__ = ['DECODE_COLUMNS', 'KINDS', 'NCCL_COLUMNS', 'PREFILL_COLUMNS', 'THROUGHPUT_COLUMNS', 'LogData',
           'SettingEvidence', 'Settings', 'SpecSummary', 'is_kit_result', 'kit_requests', 'kit_rows',
           'normalise_kit_result', 'read_kit_result', 'nccl_summary', 'parse_bench', 'parse_nccl',
           'parse_server_args', 'parse_sglang', 'parse_vllm', 'read', 'read_lines', 'settings', 'spec_summary',
           'StepRecords', 'step_records', 'LEVELS', 'LogFormat', 'RecordSource', 'TAKEN', 'columns',
           'otlp_json']

publish(globals(), __all__)
