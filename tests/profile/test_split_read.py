"""A big plain-JSON Kineto trace is read in parts, one forked process per core (issue 48: the cold summary of
the 228 MB trace against a bare orjson parse): cut at event boundaries, each part read like a whole file, the
parts merged into the same tables, rows, order, counts and warnings as one read of the file. A cut that falls
inside a value costs a read of the whole file, never a wrong table."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kit.profile import _load
from kit.profile.reading import _io
from kit.profile.reading._read import merge, read_raw
from tests.conftest import TEST_DATA

TRACES = TEST_DATA / "traces"
# a trace with module frames, one with graph replays, one with CPU ops and collectives, one with repairs
NAMES = ["hf_llama_stack", "hf_graph_replay", "cpu_eager", "hf_mixtral_stack"]
TABLES = ("kernels", "annotations", "launches", "frames", "comms")


def _plain(src: Path, tmp_path: Path) -> Path:
    out = tmp_path / (src.parent.name + ".json")
    out.write_bytes(gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes())
    return out


def _same(a: dict, b: dict) -> None:
    for t in TABLES:
        assert {c: list(v) for c, v in a[t].items()} == {c: list(v) for c, v in b[t].items()}, t
    for k in ("meta", "warnings", "events", "bytes", "truncated"):
        assert a[k] == b[k], k


@pytest.fixture
def no_minimum(monkeypatch):
    monkeypatch.setattr(_io, "SPLIT_MIN_BYTES", 0)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_parts_merge_into_the_whole_files_tables(tmp_path, no_minimum, name, parts):
    path = _plain(TRACES / name / "trace.json.gz", tmp_path)
    cuts = _io.split(str(path), parts)
    assert cuts is not None and len(cuts) == parts and cuts[-1][2] == path.stat().st_size
    merged = merge(str(path), [read_raw(str(path), "kineto", c) for c in cuts])
    _same(merged, read_raw(str(path), "kineto"))


def test_the_forked_parts_give_the_whole_files_tables(tmp_path, no_minimum):
    path = _plain(TRACES / "hf_llama_stack" / "trace.json.gz", tmp_path)
    job = _load._forked(str(path), "kineto", 2)
    assert isinstance(job, _load.SplitParse)
    _same(job.result(), read_raw(str(path), "kineto"))


def test_a_cut_inside_a_value_reads_the_file_whole(tmp_path, no_minimum):
    """The event boundary found near the middle is text inside an event's name: the parts do not parse as
    cut, and the file is read whole (the same tables as one read)."""
    pad = "x" * 30000   # the file's middle lies inside it: the first boundary after it is the name's
    events = [f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i * 10}, "dur": 5, '
              f'"args": {{"stream": 7, "correlation": {i}, "device": 0}}}}' for i in range(200)]
    trap = f'{{"ph": "X", "cat": "kernel", "name": "{pad}}}, {{tail", "pid": 0, "tid": 7, "ts": 5000, "dur": 5}}'
    text = '{"traceEvents": [' + ", ".join(events[:100]) + ", " + trap + ", " + ", ".join(events[100:]) + "]}"
    path = tmp_path / "trap.json"
    path.write_text(text)
    cut = _io.split(str(path), 2)
    start = text.index(trap)
    assert cut is not None and start < cut[0][2] < start + len(trap), "the cut falls inside the long name"
    assert merge(str(path), [read_raw(str(path), "kineto", c) for c in cut]) is None
    whole = read_raw(str(path), "kineto")
    assert len(whole["kernels"]["name"]) == 201
    _same(_load.SplitParse(str(path), "kineto", cut).result(), whole)


def test_small_gzip_and_one_part_files_are_not_cut(tmp_path):
    gz = TRACES / "hf_llama_stack" / "trace.json.gz"
    assert _io.split(str(gz), 2) is None
    assert _io.split(str(_plain(gz, tmp_path)), 2) is None   # below SPLIT_MIN_BYTES


@pytest.mark.shared_data
def test_the_57_mb_trace_read_in_parts_is_the_same(shared_data, tmp_path, no_minimum):
    src = shared_data / "traces" / "tracelens" / "inference" / "xdit_sd_3.5" / "profile_trace_rank_0.json.gz"
    if not src.exists():
        pytest.skip(f"{src} not found")
    path = _plain(src, tmp_path)
    cuts = _io.split(str(path), 2)
    _same(merge(str(path), [read_raw(str(path), "kineto", c) for c in cuts]), read_raw(str(path), "kineto"))


def test_repair_counts_of_the_parts_add_up_to_one_warning_each(tmp_path, no_minimum):
    """Events repaired or dropped in both parts (text timestamps, kernels without ``cat``, phases other than
    X) are counted over the whole file: one warning each, with the file's total, as one read says."""
    evs = []
    for i in range(400):
        if i % 10 == 3:
            evs.append(f'{{"ph": "X", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i * 10}, "dur": 5, '
                       f'"args": {{"stream": 7, "correlation": {i}}}}}')
        elif i % 10 == 6:
            evs.append(f'{{"ph": "B", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i * 10}}}')
        elif i % 10 == 8:
            evs.append(f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": "{i * 10}", '
                       f'"dur": 5, "args": {{"stream": 7, "correlation": {i}}}}}')
        else:
            evs.append(f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i * 10}, '
                       f'"dur": 5, "args": {{"stream": 7, "correlation": {i}}}}}')
    path = tmp_path / "repairs.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + ",\n".join(evs) + '], "baseTimeNanoseconds": 7}')
    cuts = _io.split(str(path), 2)
    whole = read_raw(str(path), "kineto")
    assert len(whole["warnings"]) >= 3 and whole["meta"]["baseTimeNanoseconds"] == 7
    _same(merge(str(path), [read_raw(str(path), "kineto", c) for c in cuts]), whole)
