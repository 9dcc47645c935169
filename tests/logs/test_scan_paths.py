"""The scan's three paths give the same rows on every real log in ../shared/data/logs (third-party data,
never copied): the plain line-by-line scan (``read_lines``), the block scan with its bulk extraction of
known SGLang templates (``read``), and the parallel scan over byte ranges (``kit/logs/_parallel.py``).
Each file alone, and all of them one after the other, repeated until the bulk path and several pieces are
exercised."""
from __future__ import annotations

import re

import pandas as pd
import pytest

import kit.logs as L
from kit.errors import LogFormatError
from kit.logs import _parallel, _scan

pytestmark = pytest.mark.shared_data


def _same(a: L.LogData, b: L.LogData) -> None:
    assert list(a.tables) == list(b.tables)
    for kind in a.tables:
        pd.testing.assert_frame_equal(a.tables[kind], b.tables[kind], obj=f"{a.name} {kind}")
    assert (a.engine, a.version, a.k, a.sglang_formats) == (b.engine, b.version, b.k, b.sglang_formats)
    assert (a.lines, a.unknown_lines, a.torn_lines) == (b.lines, b.unknown_lines, b.torn_lines)
    assert a.warnings == b.warnings and a.server_args == b.server_args
    assert a.said == b.said and a.transports == b.transports


def _logs(shared_data):
    return sorted((shared_data / "logs").glob("*.log"))


def test_each_real_log_reads_the_same_line_by_line_and_in_blocks(shared_data, monkeypatch):
    monkeypatch.setattr(_scan, "FIRST_BLOCK_CHARS", 256)  # small files: several blocks each
    monkeypatch.setattr(_scan, "BLOCK_CHARS", 512)
    checked = 0
    for path in _logs(shared_data):
        try:
            plain = L.read_lines(open(path, encoding="utf-8", errors="replace"), name=str(path))
        except LogFormatError as exc:  # not a serving log (a topology capture): both paths say the same
            with pytest.raises(LogFormatError, match=re.escape(str(exc).split(": ", 1)[1])):
                L.read(path)
            continue
        _same(L.read(path), plain)
        checked += 1
    assert checked >= 15


def test_all_real_logs_concatenated_read_the_same_by_every_path(shared_data, tmp_path, monkeypatch):
    text = "".join(p.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n" for p in _logs(shared_data))
    path = tmp_path / "all.log"
    path.write_text(text * 200)
    monkeypatch.setenv("KIT_LOG_WORKERS", "1")
    plain = L.read_lines(open(path, encoding="utf-8", errors="replace"), name=str(path))
    serial = L.read(path)
    _same(serial, plain)
    monkeypatch.setenv("KIT_LOG_WORKERS", "2")
    monkeypatch.setattr(_parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(_parallel, "PIECE", len(text) * 37)
    assert len(_parallel.plan(str(path), path.stat().st_size)) >= 3
    _same(L.read(path), serial)
    assert len(serial.decode) and len(serial.nccl) and len(serial.bench) and len(serial.throughput)
