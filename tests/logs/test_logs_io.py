"""kit.logs edges: bad input (one clear line naming the file), reading through a Host, the CLI."""
from __future__ import annotations

import json
import shutil

import pytest

import kit
import kit.logs as L
from kit.cli import main as kit_main
from kit.errors import LogFormatError, RemoteFileError
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "logs"


def _one_line_error(path, *, match: str) -> str:
    with pytest.raises(LogFormatError) as exc:
        L.read(path)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg and match in msg, msg
    return msg


def test_binary_file(tmp_path):
    p = tmp_path / "trace.bin"
    p.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    _one_line_error(p, match="binary file")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.log"
    p.write_text("")
    _one_line_error(p, match="empty file")
    p.write_text("\n\n  \n")
    _one_line_error(p, match="empty file")


def test_directory(tmp_path):
    _one_line_error(tmp_path, match="is a directory")


def test_missing_file(tmp_path):
    _one_line_error(tmp_path / "nope.log", match="no such file")


def test_text_that_is_not_a_log(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("shopping list\nmilk, eggs: 12\n")
    _one_line_error(p, match="not a serving log: none of its 2 lines")


def test_json_that_is_not_a_benchmark():
    msg = _one_line_error(DATA / "not_a_benchmark.json", match="not a benchmark result")
    assert "keys: items, name, nested" in msg
    with pytest.raises(LogFormatError, match="not_a_benchmark.json: JSON record 0 is not a benchmark result"):
        L.parse_bench(DATA / "not_a_benchmark.json")


def test_parse_bench_on_a_log_without_results():
    with pytest.raises(LogFormatError, match="sglang_0.4.10_decode.log: no benchmark result found"):
        L.parse_bench(DATA / "sglang_0.4.10_decode.log")


def test_bad_jsonl_line(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text('{"duration": 1.0, "completed": 1, "output_throughput": 5.0}\n{"duration": \n')
    _one_line_error(p, match="line 2 is not valid JSON")


def test_input_is_never_modified(tmp_path):
    p = tmp_path / "a.log"
    shutil.copy(DATA / "vllm_0.34_current.log", p)
    before = p.read_bytes()
    L.read(p)
    assert p.read_bytes() == before


def test_crlf_and_invalid_utf8_are_tolerated(tmp_path):
    p = tmp_path / "crlf.log"
    text = (DATA / "sglang_0.5.9_eagle.log").read_text().replace("\n", "\r\n")
    p.write_bytes(text.encode() + b"[2026-03-14 10:00:15] caf\xe9 \xff\r\n")
    d = L.read(p)
    assert len(d.decode) == 4 and d.decode["queue_req"].tolist() == [0, 0, 0, 0]
    assert d.unknown_lines == 3


def test_chunked_tables_match_unchunked(monkeypatch):
    """Flushing every 2 rows (instead of CHUNK) must not change the tables."""
    import kit.logs._sglang as S
    import kit.logs._table as T

    lines = (DATA / "sglang_0.5.9_eagle.log").read_text().splitlines(True) * 3
    whole = L.read_lines(lines)
    monkeypatch.setattr(T, "CHUNK", 2)
    monkeypatch.setattr(S, "CHUNK", 2)
    chunked = L.read_lines(lines)
    import pandas as pd

    pd.testing.assert_frame_equal(whole.decode, chunked.decode)
    pd.testing.assert_frame_equal(whole.spec, chunked.spec)
    assert list(chunked.decode["line"]) == sorted(chunked.decode["line"])


# --------------------------------------------------------------------------- Host

def test_read_on_local_host_names_the_host():
    with kit.connect("local") as host:
        d = L.read(str(DATA / "vllm_0.10.1.1_ansi.log"), host=host)
        assert d.name == f"local:{DATA / 'vllm_0.10.1.1_ansi.log'}"
        assert len(d.spec) == 3 and d.version == "0.10.1.1"
        with pytest.raises(RemoteFileError):
            L.read(str(DATA / "missing.log"), host=host)
        with pytest.raises(LogFormatError, match="local:.*is a directory"):
            L.read(str(DATA), host=host)


@pytest.mark.ssh
def test_read_over_ssh(sshd):
    with sshd.connect() as host:
        remote = f"{sshd.tmp}/server.log"
        host.put(str(DATA / "sglang_0.5.9_eagle.log"), remote)
        d = L.read(remote, host=host)
    assert d.name.endswith(f":{remote}") and len(d.decode) == 4
    assert d.server_args["tp_size"] == 8


# --------------------------------------------------------------------------- CLI

def test_cli_logs_spec_json_shape(capsys):
    assert kit_main(["logs", "spec", str(DATA / "vllm_0.10.1.1_ansi.log"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"engine", "version", "k", "records", "summary"}
    assert (out["engine"], out["version"], out["k"]) == ("vllm", "0.10.1.1", 2)
    assert [set(r) for r in out["records"]] == [{"line", "time", "mean_acceptance_length", "draft_acceptance_rate",
                                                 "per_position", "after_idle"}] * 3
    rec = dict(out["records"][1])
    assert isinstance(rec.pop("line"), int)
    assert rec == {"time": "08-20 09:00:20", "mean_acceptance_length": 2.2, "draft_acceptance_rate": 0.6,
                   "per_position": [0.8, 0.4], "after_idle": False}
    assert out["records"][0]["draft_acceptance_rate"] is None  # nan% -> null, never NaN in JSON
    assert out["records"][0]["after_idle"] is True  # the window the summary leaves out says so
    assert set(out["summary"]) == {"mean_acceptance_length", "draft_acceptance_rate", "windows", "excluded_windows",
                                   "definition", "comparable"}
    assert out["summary"]["windows"] == 2 and out["summary"]["excluded_windows"] == 1
    assert out["summary"]["draft_acceptance_rate"] == round(320 / 600, 4)  # rounded, not 0.5333333333333333


def test_cli_logs_spec_with_k_and_version(capsys):
    assert kit_main(["logs", "spec", str(DATA / "sglang_0.4.6_decode.log"), "--k", "3", "--version", "0.4.6",
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["engine"], out["version"], out["k"]) == ("sglang", "0.4.6", 3)
    assert out["records"][0]["time"] == "2025-05-14 09:31:41"
    assert out["summary"]["mean_acceptance_length"] == pytest.approx(2.25)


def test_cli_logs_spec_text(capsys):
    assert kit_main(["logs", "spec", str(DATA / "sglang_0.5.9_eagle.log")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SpecSummary(sglang unknown, k=3: mean acceptance length 1.74")
    assert "(after idle, excluded)" in out


def test_cli_logs_parse(capsys):
    assert kit_main(["logs", "parse", str(DATA / "vllm_0.34_current.log")]) == 0
    out = capsys.readouterr().out
    assert "torn=1" in out and "spec        2 rows" in out
    assert kit_main(["logs", "parse", str(DATA / "nccl_env.log"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["counts"] == {"nccl": 15} and len(doc["tables"]["nccl"]) == 15


def test_cli_bench_parse(capsys):
    assert kit_main(["bench", "parse", str(DATA / "vllm_bench_serve.json"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["output_throughput"] == 82.58 and rows[0]["tool"] == "vllm bench serve"
    assert kit_main(["bench", "parse", str(DATA / "sglang_bench_serving_0.5.9.txt")]) == 0
    assert "sglang.bench_serving" in capsys.readouterr().out


def test_cli_bad_input_is_one_line_and_exit_1(capsys, tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"\x00\x01")
    assert kit_main(["logs", "parse", str(p)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"kit: error: {p}: binary file (NUL bytes), not a text log"


def test_block_extraction_matches_line_by_line(tmp_path, monkeypatch):
    """read() pulls known SGLang templates out of text blocks in bulk; the tables, counts and
    warnings must equal the plain line-by-line scan (read_lines), torn lines included."""
    import pandas as pd

    import kit.logs._scan as scan_mod

    lines = []
    for name in ("sglang_0.5.9_eagle.log", "sglang_0.5.4_bracket.log", "sglang_0.4.10_decode.log",
                 "sglang_0.5.12_swa_pd.log", "vllm_0.34_current.log"):
        lines += (DATA / name).read_text().splitlines(True)[1:]
    good = "[2026-03-14 10:00:12.500 DP1 TP3] Decode batch, #running-req: 1, #token: 1170, token usage: 0.01, " \
           "accept len: 1.68, accept rate: 0.42, cuda graph: True, gen throughput (token/s): 63.60, #queue-req: 0\n"
    torn = [good.replace("[2026", "node-1:5016:6000 [1] NCCL INFO x[2026"),       # junk before the header
            good.replace(" DP1 TP3]", " DP1 TP3] junk]"),                          # junk inside the header
            good.replace("#token: 1170", "#token: 11INFO 03-14 10:00:00 junk")]   # junk inside a value
    body = []
    for i in range(300):
        body += lines
        body.append(good.replace("1170", str(1000 + i)))
        if i % 50 == 7:
            body += torn
    path = tmp_path / "big.log"
    path.write_text("".join(body))
    monkeypatch.setattr(scan_mod, "BLOCK_CHARS", 4096)
    taken = []
    import kit.logs._sglang as sglang_mod

    real_extract = sglang_mod.extract_block

    def counting_extract(block, first_line, st):
        out = real_extract(block, first_line, st)
        taken.append(len(out))
        return out

    monkeypatch.setattr(sglang_mod, "extract_block", counting_extract)
    bulk = L.read(path)
    assert sum(taken) > 2500  # most SGLang lines went through the bulk path
    plain = L.read_lines(open(path))
    for kind in ("decode", "prefill", "spec", "throughput", "nccl", "bench"):
        pd.testing.assert_frame_equal(getattr(bulk, kind), getattr(plain, kind))
    assert (bulk.lines, bulk.unknown_lines, bulk.torn_lines) == (plain.lines, plain.unknown_lines, plain.torn_lines)
    assert bulk.torn_lines == 6 * 3 + 300  # 6 x 3 injected + the vLLM sample's own torn line per repeat
    assert bulk.warnings == plain.warnings
    assert len(bulk.decode) == 300 * (4 + 2 + 2 + 2 + 1)


@pytest.mark.ssh
def test_errors_of_a_log_read_on_a_host_name_host_and_path(sshd, tmp_path):
    """Issue 24: errors named the deleted local temp copy; they name ``host:path`` (as do warnings)."""
    bad = {"empty.log": b"", "binary.log": b"\x00\x01binary\x00" * 20, "prose.log": b"hello\nworld\n",
           "bench.json": b'{"a": 1}\n', "deep.json": b"[" * 50_000 + b"]" * 50_000}
    with sshd.connect() as host:
        for name, data in bad.items():
            remote = f"{sshd.tmp}/{name}"
            (tmp_path / name).write_bytes(data)
            host.put(str(tmp_path / name), remote)
            with pytest.raises(LogFormatError) as err:
                L.read(remote, host=host)
            msg = str(err.value)
            assert msg.startswith(f"{host.name}:{remote}: ") and "kit-log-" not in msg and "\n" not in msg, msg
            assert err.value.path == f"{host.name}:{remote}"
        torn = DATA / "sglang_0.5.9_eagle.log"
        remote = f"{sshd.tmp}/torn.log"
        text = torn.read_text().replace("Decode batch", "Decode baXtch [2025-01-01 00:00:00] Decode batch", 1)
        (tmp_path / "torn.log").write_text(text)
        host.put(str(tmp_path / "torn.log"), remote)
        d = L.read(remote, host=host)
    assert d.name == f"{host.name}:{remote}" and all("kit-log-" not in w for w in d.warnings)
