"""kit.mcp in process (fast): what each Policy lists, the argument checks, the result envelope (paging,
cap, redaction) and the per-call timeout. The server process itself is tested in test_mcp.py."""
from __future__ import annotations

import threading

import anyio
import pytest
from mcp import Client

from kit.cli import main
from kit.errors import UsageError
from kit.mcp import TOOLS, Policy, Tool, available, build_server
from kit.mcp._policy import environment, host_name, identifier, pattern
from kit.mcp._result import Answer, envelope
from kit.mcp._server import call
from tests.conftest import ROOT, SAMPLE


def _names(policy: Policy) -> set[str]:
    return {t.name for t in available(policy)}


def test_write_and_run_tools_are_listed_only_when_allowed():
    read = {t.name for t in TOOLS if t.mode == "read"}
    assert _names(Policy()) == read
    assert _names(Policy(write=True)) == read | {"ledger_record"}
    assert _names(Policy(run_hosts=("gpu-box",))) == read | {"source_evaluate"}  # report_build runs here: local only
    assert _names(Policy(run_hosts=("local",), write=True)) == {t.name for t in TOOLS}
    schema = next(t for t in TOOLS if t.name == "source_evaluate").schema(Policy(run_hosts=("gpu-box",)))
    assert schema["properties"]["host"]["enum"] == ["gpu-box"] and schema["additionalProperties"] is False
    read_schema = next(t for t in TOOLS if t.name == "source_slice").schema(Policy(run_hosts=("gpu-box",)))
    assert read_schema["properties"]["host"]["enum"] == ["local", "gpu-box"]


def test_in_process_client_lists_and_refuses():
    async def go():
        async with Client(build_server(Policy(roots=(ROOT,)))) as c:
            tools = (await c.list_tools()).tools
            refused = (await c.call_tool("ledger_record", {"ledger": "x", "id": "H1", "verdict": "open",
                                                           "evidence": "e"})).structured_content
            extra = (await c.call_tool("ledger_read", {"ledger": str(SAMPLE), "shell": "rm -rf /"})).structured_content
            resources = (await c.list_resources()).resources
            prompt = await c.get_prompt("investigate_session")
        return tools, refused, extra, resources, prompt

    tools, refused, extra, resources, prompt = anyio.run(go)
    assert all(t.annotations.read_only_hint for t in tools)
    assert refused["refused"] and refused["error"] == "unknown tool 'ledger_record'"
    assert extra["refused"] and "shell" in extra["error"]  # no key outside the schema
    assert {r.uri for r in resources} >= {"kit://session/ledger.json", "kit://session/hypotheses"}
    text = prompt.messages[0].content.text
    assert "H3" in text and "read-only" in text and "ledger_record is not available" in text


def test_trace_tools_take_a_reference_run():
    for name in ("trace_summary", "trace_check"):
        props = next(t for t in TOOLS if t.name == name).schema(Policy())["properties"]
        assert props["reference"]["x-path"] == "traces"


@pytest.mark.parametrize("bad", ["-oProxyCommand=x", "a b", "h;id", "$(id)", "a\nb", "", "x" * 300, "`id`"])
def test_host_names_refused(bad):
    with pytest.raises(UsageError):
        host_name(bad)


def test_paths_stay_in_the_roots(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("x")
    (root / "link").symlink_to(outside / "secret")
    (root / "ok.txt").write_text("x")
    p = Policy(roots=(root,))
    assert p.local_path("ok.txt") == (root / "ok.txt").resolve()
    for bad in ("link", "../outside/secret", str(outside / "secret"), "~/x", "-rf", "a\x00b", "new\nname"):
        with pytest.raises(UsageError):
            p.local_path(bad)
    assert p.local_path("report-2", must_exist=False).name == "report-2"
    for bad in ("$(touch x)", "a;b", "missing/dir/x", "*"):
        with pytest.raises(UsageError, match="plain name|no such|outside"):
            p.local_path(bad, must_exist=False)
    with pytest.raises(UsageError, match="absolute"):
        p.host_path("gpu-box", "relative/path")
    q = Policy(roots=(root,), hosts=("gpu-box",), host_roots=(("gpu-box", "/opt/engines"),))
    assert q.host_path("gpu-box", "/opt/engines/sglang//srt/x.py") == "/opt/engines/sglang/srt/x.py"
    for bad in ("/opt/engines/../../etc/shadow", "/opt/enginesX/a.py", "/etc/shadow"):
        with pytest.raises(UsageError):
            q.host_path("gpu-box", bad)
    with pytest.raises(UsageError, match="host-root"):
        Policy(hosts=("local",), host_roots=(("elsewhere", "/x"),))


def test_patterns_names_and_environment():
    assert pattern("sm100_default_attention_backend=") == "sm100_default_attention_backend="
    for bad in ("-e", "a\nb", "x" * 501):
        with pytest.raises(UsageError):
            pattern(bad)
    assert identifier("sglang.srt.utils") == "sglang.srt.utils"
    with pytest.raises(UsageError):
        identifier("os.system('id')")
    assert environment({"KIT_STANDIN_CAPABILITY": "10.0", "SGLANG_X": ""}) == {"KIT_STANDIN_CAPABILITY": "10.0",
                                                                               "SGLANG_X": ""}
    for bad in ("LD_PRELOAD", "PYTHONSTARTUP", "PATH", "BASH_ENV", "CUDA_HOME", "kit_lower"):
        with pytest.raises(UsageError):
            environment({bad: "x"})


def test_envelope_pages_caps_and_redacts():
    rows = [{"i": i, "text": "y" * 50} for i in range(1000)]
    a = Answer({"rows": rows, "note": "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345"}, table="rows",
               warnings=["password=hunter2hunter2"])
    out = envelope("t", a, offset=10, limit=500, cap=10_000)
    assert out["ok"] and out["page"]["offset"] == 10 and out["page"]["total"] == 1000
    assert 1 <= out["page"]["limit"] < 500 and out["result"]["rows"][0]["i"] == 10  # shrunk to fit
    assert out["page"]["next_offset"] == 10 + out["page"]["limit"]
    assert "hf_abcdef" not in str(out) and "hunter2" not in str(out) and out["redacted"] == 2
    big = envelope("t", Answer({"blob": "z" * 20_000}), offset=0, limit=10, cap=10_000)
    assert not big["ok"] and "over the server's cap" in big["error"]
    with pytest.raises(ValueError):
        envelope("t", Answer({}, trust="fine"), offset=0, limit=1, cap=10_000)


def test_a_call_that_outlives_the_timeout_is_answered():
    release = threading.Event()

    def stuck(policy):
        release.wait(60)
        return Answer({})

    tools = {"stuck": Tool("stuck", stuck, "read", "blocks", {})}
    try:
        out = anyio.run(call, Policy(timeout_s=0.3), tools, "stuck", {})
    finally:
        release.set()
    assert not out["ok"] and "per-call timeout of 0.3 s" in out["error"]


def test_kit_errors_come_back_as_one_line(tmp_path):
    p = Policy(roots=(tmp_path,))
    (tmp_path / "empty.log").write_text("")
    out = anyio.run(call, p, {t.name: t for t in available(p)}, "logs_spec", {"path": str(tmp_path / "empty.log")})
    assert not out["ok"] and "empty.log" in out["error"] and "\n" not in out["error"]


def test_cli_refuses_a_missing_root(capsys, tmp_path):
    assert main(["mcp", "--root", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert "--root" in err and len(err.strip().splitlines()) == 1



def test_bench_records_reads_stored_results_and_printed_output():
    """A stored kit.bench result goes through kit.bench (its summary, with whether validity was checked);
    a benchmark tool's output through kit.logs.parse_bench; each with the artefact's provenance."""
    from kit import bench, logs

    p = Policy(roots=(ROOT,))
    tools = {t.name: t for t in available(p)}
    stored = SAMPLE / "experiments" / "h200_live_server" / "single_stream.json"
    out = anyio.run(call, p, tools, "bench_records", {"path": str(stored)})
    want = bench.BenchResult.load(stored).summary()
    assert out["result"]["kind"] == "single_stream"
    assert [r["decode_tok_s"] for r in out["result"]["rows"]] == pytest.approx([r["decode_tok_s"] for r in want])
    assert out["trust"]["verdict"] == "not assessed" and "validity" in out["trust"]["reasons"][0]
    assert out["provenance"][0]["kind"] == "measured"
    printed = SAMPLE / "bench" / "vllm_tp8_default.json"
    out = anyio.run(call, p, tools, "bench_records", {"path": str(printed)})
    df = logs.parse_bench(str(printed))
    assert out["result"]["kind"] == "benchmark output" and out["page"]["total"] == len(df)
    assert out["result"]["rows"][0]["output_throughput"] == pytest.approx(float(df["output_throughput"].iloc[0]))
    assert out["provenance"][0]["kind"] == "sample"


def test_the_pair_tools_answer_with_trust_and_provenance():
    """trace_diff_structure and bench_reconcile through the in-process client: the known norm pair's
    node, the sample session's reconciliation with its residual as the trust reason, a path outside the
    roots refused."""
    traces = ROOT / "tests" / "data" / "traces"
    rec = SAMPLE / "bench" / "reconcile" / "graph"

    async def go():
        async with Client(build_server(Policy(roots=(ROOT,)))) as c:
            diff = (await c.call_tool("trace_diff_structure", {
                "a": [str(traces / "cpu_norm_fused/trace.json.gz")],
                "b": [str(traces / "cpu_norm_manual/trace.json.gz")], "limit": 100})).structured_content
            itl = (await c.call_tool("bench_reconcile", {"client": str(rec / "c1.json"),
                                                         "engine_log": str(rec / "engine.log")})).structured_content
            out = (await c.call_tool("bench_reconcile", {"client": "/etc/passwd",
                                                         "engine_log": str(rec / "engine.log")})).structured_content
        return diff, itl, out

    diff, itl, out = anyio.run(go)
    nodes = diff["result"]["nodes"]
    norm = [n for n in nodes if n["family"] == "norm" and n["layer_kind"] == "attention+mlp"][0]
    assert norm["b_kernel_us"] > 3 * norm["a_kernel_us"] and diff["provenance"] and diff["trust"]
    assert itl["trust"]["verdict"] == "usable" and "residual" in itl["trust"]["reasons"][0]
    assert [r["part"] for r in itl["result"]["table"]][-1] == "client ITL"
    assert out["refused"] or out.get("error")


def test_the_catalogue_tools_list_and_get_runs_but_take_no_sql(tmp_path, monkeypatch):
    """runs_list and runs_get read the catalogue a summary recorded itself into; a hostile run id is refused
    and no tool takes SQL (DuckDB's SQL could read any file the server can)."""
    import kit

    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "runs"))
    kit.profile.load(ROOT / "tests" / "data" / "traces" / "hf_llama_stack" / "trace.json.gz").summary()
    graph, ref = (str(ROOT / "tests" / "data" / "traces" / n / "trace.json.gz") for n in ("place_llama_graph",
                                                                                         "place_llama_ref"))

    async def go():
        async with Client(build_server(Policy(roots=(ROOT,)))) as c:
            listed = (await c.call_tool("runs_list", {"kind": "summary"})).structured_content
            run_id = listed["result"]["runs"][0]["run_id"]
            one = (await c.call_tool("runs_get", {"run_id": run_id[:12]})).structured_content
            bad = (await c.call_tool("runs_get", {"run_id": "x'; COPY (SELECT 1) TO '/tmp/p"})).structured_content
            diff = (await c.call_tool("trace_diff_structure", {"a": [ref], "b": [graph], "references": [None, ref],
                                                               "limit": 200})).structured_content
            tools = (await c.list_tools()).tools
        return listed, one, bad, diff, tools

    listed, one, bad, diff, tools = anyio.run(go)
    assert len(listed["result"]["runs"]) == 1 and one["result"]["kind"] == "summary"
    assert one["result"]["run_id"] == listed["result"]["runs"][0]["run_id"]
    assert bad["refused"] or bad.get("error")
    kinds = {n["layer_kind"] for n in diff["result"]["nodes"]}
    assert "attention+mlp" in kinds   # the replay's kernels placed in layers by its reference
    assert not any("sql" in str(t.input_schema).lower() for t in tools)
