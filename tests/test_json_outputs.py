"""Every JSON output of the CLI on the bundled sample session: no figure is NaN, None or infinite, none is
negative where the quantity cannot be, and no unit in a name contradicts its value (issue 46 item 8).

Each command runs in-process through ``kit.cli.main`` (as a user types it) with the run catalogue in a
temporary store; its stdout is parsed with a parser that refuses the ``NaN``/``Infinity`` tokens Python's
``json`` writes. ``null`` is how JSON says a figure is unknown or does not apply (the idle row's share of
kernel time, an untimed replay's step time); strings that read ``nan``/``None`` are not figures."""
from __future__ import annotations

import io
import json
import math
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest

from kit.cli import main
from tests.conftest import SAMPLE

T = SAMPLE / "traces"
LOGS = SAMPLE / "logs"
BENCH = SAMPLE / "bench"
REC = BENCH / "reconcile" / "eager"

COMMANDS = [
    ["profile", "summary", str(T / "tp1_eager" / "rank0.trace.json.gz"), "--json"],
    ["profile", "summary", str(T / "tp1_graph" / "rank0.trace.json.gz"), "--json"],
    ["profile", "summary", str(T / "cmp_sdpa_cudnn" / "rank0.trace.json.gz"), "--json", "--phase", "decode"],
    ["profile", "compare", str(T / "tp1_eager" / "rank0.trace.json.gz"), "--",
     str(T / "tp1_graph" / "rank0.trace.json.gz"), "--json"],
    ["profile", "diff", str(T / "cmp_sdpa_cudnn" / "rank0.trace.json.gz"),
     str(T / "cmp_sdpa_efficient" / "rank0.trace.json.gz"), "--json"],
    ["profile", "ranks", str(T / "tp1_eager" / "rank0.trace.json.gz"), "--json"],
    ["profile", "ranks", str(T / "tp1_eager" / "rank0.trace.json.gz"), "--json", "--phase", "prefill"],
    ["profile", "check", str(T / "tp1_graph" / "rank0.trace.json.gz"), "--json"],
    *[["logs", "parse", str(p), "--json"] for p in sorted(LOGS.glob("*.log"))],
    *[["bench", "parse", str(p), "--json"] for p in sorted(BENCH.glob("*.json*"))],
    ["bench", "reconcile", str(REC / "c1.json"), str(REC / "engine.log"), "--json"],
    ["runs", "list", "--json"],
]

# names of figures that can be negative: differences, changes, offsets, signed shares
SIGNED = re.compile(r"^share$|delta|diff|change|residual|excess|overlap|skew|offset|improve|gain|speedup|signed|slope|"
                    r"^z$|_z$|t_stat|^t$|correlation|corr|score|lag|shift|drift|margin|saved|headroom|unattributed|"
                    r"line|sign|rank|index|step$|^step|layer|id$|_id|ts$|^ts|start|end|time_us$|^at|bias|min", re.I)
NONNEG = re.compile(r"(_us|_ms|_s|_bytes|_tok_s|_tps|throughput|count|calls|launches|steps|requests|tokens|"
                    r"share|fraction|ratio|noise|spread|std|wall|busy|idle|dur|latency|ttft|tpot|itl)$", re.I)


def _strict(text: str):
    def refuse(tok):
        raise ValueError(f"{tok} in JSON output")
    return json.loads(text, parse_constant=refuse)


def _walk(node, path, bad):
    if isinstance(node, dict):
        # a row of a part or node that is signed by definition: kernel time run beside other kernels (overlap),
        # the measured step minus the traced one (unattributed: negative where the profiler inflated the trace)
        signed_row = any(w in str(node.get(k, "")) for k in ("part", "family", "kind", "name")
                         for w in ("overlap", "unattributed"))
        for k, v in node.items():
            _walk(v, f"{path}.{k}", bad)
            key = str(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if NONNEG.search(key) and not SIGNED.search(key) and not signed_row and v < 0:
                    bad.append(f"{path}.{k}: {v} < 0")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk(v, f"{path}[{i}]", bad)
    elif isinstance(node, float) and not math.isfinite(node):
        bad.append(f"{path}: {node}")
    elif isinstance(node, str) and node.strip() in ("nan", "NaN", "None", "NaT", "<NA>"):
        bad.append(f"{path}: {node!r}")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(x.rsplit("/", 1)[-1] for x in a))
def test_every_json_output_of_the_sample_has_no_nan_none_or_impossible_negative(argv, store):
    if argv[:2] == ["runs", "list"]:   # the catalogue holds what the commands before recorded: record a few
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            for a in COMMANDS[:6]:
                main(a)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    assert code == 0, err.getvalue()[-400:]
    doc = _strict(out.getvalue())
    bad: list[str] = []
    _walk(doc, "$", bad)
    assert not bad, bad[:20]


def test_an_untimed_replay_without_annotations_says_its_step_time_is_unknown(tmp_path, store, capsys):
    """compiled_graph's replays untimed (ts = dur = 0) and without step annotations: the wall time is null
    in JSON and 'unknown' in words (the warning printed "nan us")."""
    import gzip

    from tests.profile import derived_traces as D

    path, _ = D.graph_without_timing(tmp_path / "untimed.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "annotation" not in str(e.get("cat"))]
    f = tmp_path / "untimed_noann.json"
    f.write_text(json.dumps(doc))
    assert main(["profile", "summary", str(f), "--json"]) == 0
    got = _strict(capsys.readouterr().out)
    assert got["wall_time_us"] is None and got["kernel_time_us"] is None
    bad: list[str] = []
    _walk(got, "$", bad)
    assert not bad and not any("nan" in w for w in got["warnings"]), (bad, got["warnings"])
    assert any("wall time (the steps' GPU spans) unknown" in w for w in got["warnings"])


def test_text_outputs_print_no_nan(store, capsys):
    """``kit runs list`` printed NaN for runs without a label; ``kit profile ranks`` on a job without steps of
    the phase printed "step nan us"."""
    assert main(["profile", "summary", str(T / "tp1_eager" / "rank0.trace.json.gz")]) == 0
    assert main(["bench", "parse", str(BENCH / "vllm_tp8_default.json")]) == 0
    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    listed = capsys.readouterr().out
    assert "NaN" not in listed and "None" not in listed and "bench" in listed
    trace = SAMPLE.parent.parent / "tests" / "data" / "traces" / "compiled_graph" / "trace.json.gz"
    assert main(["profile", "ranks", str(trace), "--phase", "prefill"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "no prefill step in any rank" in out


def test_the_gates_json_on_the_sample(store, capsys):
    """``kit profile compare --baseline`` (with and without --step-ms) and ``kit bench compare`` on the sample."""
    from kit import runs

    assert main(["profile", "summary", str(T / "tp1_eager" / "rank0.trace.json.gz")]) == 0
    assert main(["runs", "baseline", "eager", runs.runs("summary")["run_id"][0]]) == 0
    assert main(["bench", "parse", str(BENCH / "vllm_tp8_default.json")]) == 0
    assert main(["runs", "baseline", "vllm", runs.runs("bench")["run_id"][0]]) == 0
    graph = str(T / "tp1_graph" / "rank0.trace.json.gz")
    for argv in (["profile", "compare", "--baseline", "eager", graph, "--json"],
                 ["profile", "compare", "--baseline", "eager", graph, "--json", "--step-ms", "4.48", "0.85"],
                 ["bench", "compare", str(BENCH / "vllm_tp8_mtp.json"), "--baseline", "vllm", "--json"]):
        capsys.readouterr()
        assert main(argv) == 0, argv
        bad: list[str] = []
        _walk(_strict(capsys.readouterr().out), "$", bad)
        assert not bad, (argv, bad[:10])
