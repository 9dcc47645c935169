"""``kit mcp`` through the MCP SDK's own client against the real server process: over stdio (the
server a subprocess, as an MCP client starts it) and over streamable HTTP on 127.0.0.1.

The sample investigation runs end to end as an agent would run it; what it returns is checked against
the kit's own functions called here, not against typed figures. Refusals: write and run tools are not
listed (and calls to them are answered as unknown tools) unless the server was started to allow
them, and a corpus of hostile arguments executes nothing (a canary file a shell injection would
create stays absent).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from kit import logs, profile
from kit.ledger import Ledger
from tests.conftest import ROOT, SAMPLE

TRACES = SAMPLE / "traces"
WRITE_OR_RUN = {"ledger_record", "source_evaluate", "report_build"}
ENGINES = ROOT / ".kit-cache" / "engines"


def _params(*flags: str, cache: Path) -> StdioServerParameters:
    env = {"PYTHONPATH": str(ROOT), "KIT_CACHE_DIR": str(cache)}
    return StdioServerParameters(command=sys.executable, args=["-m", "kit", "mcp", *flags], cwd=str(ROOT), env=env)


def _roots(*extra: Path) -> list[str]:
    out = ["--root", str(ROOT)]
    for r in extra:
        out += ["--root", str(r)]
    return out


async def _call(client: Client, name: str, args: dict) -> dict:
    r = await client.call_tool(name, args)
    out = r.structured_content
    assert out is not None and out["tool"] == name
    assert set(out) >= {"ok", "result", "provenance", "trust", "warnings", "page"}
    assert r.is_error is (not out["ok"])
    assert json.loads(r.content[0].text) == out  # the text and the structured result say the same
    return out


def _ok(out: dict) -> dict:
    assert out["ok"], out.get("error")
    assert out["trust"]["verdict"] in ("usable", "degraded", "unreliable", "undecided", "not assessed")
    assert out["trust"]["reasons"], "a trust verdict always says why"
    return out["result"]


def _sglang_tree() -> Path:
    """SGLang 0.5.9's published source, unpacked from the wheel tools/fetch_engines.py downloads."""
    tree = ENGINES / "sglang-0.5.9"
    if not (tree / "sglang").is_dir():
        if not any((ENGINES / "wheels").glob("sglang-0.5.9-*.whl")):
            pytest.skip("SGLang 0.5.9's wheel is not in .kit-cache/engines/wheels (python tools/fetch_engines.py)")
        from tests.source.test_source_real_engines import engine

        tree = engine("sglang", "0.5.9")
    return tree


# --------------------------------------------------------------------------- the sample investigation
def test_sample_investigation_over_stdio_read_only(tmp_path, shared_data):
    """Fingerprint of local, the backend-default predicate on SGLang's source, a trace summary with its
    trust verdict, a two-run comparison, the spec acceptance of a shared log and the ledger's verdicts,
    through a read-only server: no write or run tool is listed, and calling one is refused."""
    tree = _sglang_tree()
    shared_log = shared_data / "logs" / "sglang_0.5.3post3_eagle3_decode_issue11948.log"
    params = _params(*_roots(shared_data, tree.resolve()), cache=tmp_path / "cache")  # the tree may be a link

    async def main() -> dict:
        got = {}
        async with Client(params) as c:
            got["tools"] = {t.name: t for t in (await c.list_tools()).tools}
            got["fp"] = await _call(c, "env_fingerprint", {"host": "local"})
            server_args = str(tree / "sglang" / "srt" / "server_args.py")
            got["pred"] = await _call(c, "source_definition", {"host": "local", "name": "is_sm100_supported",
                                                               "near": server_args})
            got["uses"] = await _call(c, "source_find", {"host": "local", "path": server_args,
                                                         "symbol": "sm100_default_attention_backend"})
            got["summary"] = await _call(c, "trace_summary", {"paths": [str(TRACES / "tp1_eager")],
                                                              "phase": "decode"})
            got["page2"] = await _call(c, "trace_summary", {"paths": [str(TRACES / "tp1_eager")],
                                                            "phase": "decode", "offset": 2, "limit": 3})
            got["cmp"] = await _call(c, "trace_compare", {"a": [str(TRACES / "tp1_eager")],
                                                          "b": [str(TRACES / "tp1_graph")],
                                                          "labels": ["eager", "graph"]})
            got["spec"] = await _call(c, "logs_spec", {"path": str(shared_log)})
            got["ledger"] = await _call(c, "ledger_read", {"ledger": str(SAMPLE)})
            got["write"] = await _call(c, "ledger_record", {"ledger": str(tmp_path), "id": "H1",
                                                            "verdict": "confirmed", "evidence": "x"})
            got["run"] = await _call(c, "source_evaluate", {"host": "local", "name": "is_sm100_supported",
                                                            "near": server_args})
        return got

    got = anyio.run(main)
    assert not WRITE_OR_RUN & set(got["tools"]), "a read-only server lists no write or run tool"
    assert all(t.annotations.read_only_hint for t in got["tools"].values())
    for key in ("write", "run"):
        assert got[key]["ok"] is False and got[key]["refused"] and "unknown tool" in got[key]["error"]

    fp = _ok(got["fp"])
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    assert fp["host"] == "local" and str(fp["cpu_count"]) == nproc  # what the host itself says
    assert got["fp"]["provenance"][0]["kind"] == "measured"
    assert (got["fp"]["trust"]["verdict"] == "usable") is (not fp["missing"])

    pred = _ok(got["pred"])
    assert pred["path"].endswith("sglang/srt/utils/common.py") and pred["kind"] in ("function", "variable")
    assert pred["qualname"] == "is_sm100_supported" and any("is_sm100_supported" in line
                                                             for line in pred["slice"]["lines"])
    uses = _ok(got["uses"])["symbols"]
    assert {s["value"] for s in uses if s["kind"] == "keyword"} >= {'"flashinfer"', '"triton"'}

    p = profile.load(str(TRACES / "tp1_eager" / "rank0.trace.json.gz"))
    s, h = p.summary("decode"), p.health()
    summary = _ok(got["summary"])
    assert summary["kernel_time_us"] == pytest.approx(s.kernel_time_us) and summary["steps"] == s.steps
    assert [r["category"] for r in summary["rows"]] == [r["category"] for r in s.to_dict()["categories"]]
    trust = got["summary"]["trust"]
    assert trust["verdict"] == h.status("step_time") != "usable"  # eager decode: the profiler inflates steps
    assert any(r.startswith("step_time: ") and h.metrics["step_time"]["reason"] in r for r in trust["reasons"])
    assert got["summary"]["provenance"][0]["kind"] == p.provenance.kind == "measured"
    page = got["page2"]["page"]
    assert page["offset"] == 2 and page["total"] == len(summary["rows"]) and len(got["page2"]["result"]["rows"]) <= 3
    assert got["page2"]["result"]["rows"] == summary["rows"][2:5]

    c = profile.compare(p, profile.load(str(TRACES / "tp1_graph" / "rank0.trace.json.gz")), labels=("eager", "graph"))
    cmp = _ok(got["cmp"])
    assert cmp["step_us"] == pytest.approx(list(c.step_us)) and cmp["delta_us"] == pytest.approx(c.delta_us)
    assert cmp["cause"] == c.cause
    assert {x["role"] for x in got["cmp"]["provenance"]} == {"run eager", "run graph"}

    data = logs.read(str(shared_log))
    ss = logs.spec_summary(data)
    spec = _ok(got["spec"])
    assert spec["summary"]["mean_acceptance_length"] == pytest.approx(ss.mean_acceptance_length)
    assert spec["summary"]["definition"] == ss.definition and len(spec["records"]) == len(data.spec)
    assert got["spec"]["provenance"][0]["artefact"] == str(shared_log)

    hyps = _ok(got["ledger"])["hypotheses"]
    assert [x["id"] for x in hyps] == [x.id for x in Ledger.open(SAMPLE / "ledger.json")]
    assert got["ledger"]["trust"]["verdict"] == ("undecided" if any(x["verdict"] == "open" for x in hyps) else "usable")


def _copy_sample(tmp_path: Path) -> Path:
    session = tmp_path / "session"
    shutil.copytree(SAMPLE, session, ignore=shutil.ignore_patterns("experiments", ".kit"))
    return session


def test_write_and_run_tools_only_when_allowed(tmp_path):
    """--allow-write lists ledger_record; --allow-run local lists the run tools for local only. A verdict
    computed from a tool's result is recorded with its artefacts' provenance and read back."""
    session = _copy_sample(tmp_path)
    params = _params(*_roots(tmp_path), "--allow-write", "--allow-run", "local", cache=tmp_path / "cache")
    eager, graph = session / "traces" / "tp1_eager", session / "traces" / "tp1_graph"

    async def main() -> dict:
        got = {}
        async with Client(params) as c:
            got["tools"] = {t.name: t for t in (await c.list_tools()).tools}
            cmp = _ok(await _call(c, "trace_compare", {"a": [str(eager)], "b": [str(graph)]}))
            ratio = cmp["step_us"][0] / cmp["step_us"][1]
            got["ratio"] = ratio
            got["record"] = await _call(c, "ledger_record", {
                "ledger": str(session), "id": "H2", "verdict": "confirmed" if ratio > 2 else "rejected",
                "evidence": f"eager step {ratio:.1f}x the graph-replay step", "numbers": {"step_ratio": ratio},
                "artefacts": [str(eager), str(graph)]})
            got["read"] = await _call(c, "ledger_read", {"ledger": str(session), "id": "H2"})
            got["elsewhere"] = await _call(c, "source_evaluate", {"host": "gpu-box", "name": "x", "near": "/a.py"})
        return got

    got = anyio.run(main)
    assert WRITE_OR_RUN <= set(got["tools"])
    assert got["tools"]["source_evaluate"].input_schema["properties"]["host"]["enum"] == ["local"]
    assert not got["tools"]["ledger_record"].annotations.read_only_hint
    _ok(got["record"])
    h2 = _ok(got["read"])["hypotheses"]
    assert len(h2) == 1 and h2[0]["verdict"] == ("confirmed" if got["ratio"] > 2 else "rejected")
    assert h2[0]["numbers"]["step_ratio"] == pytest.approx(got["ratio"])
    assert {p["kind"] for p in h2[0]["provenance"]} == {"measured"} and h2[0]["evidence_kind"] == "measured"
    on_disk = Path(_ok(got["record"])["ledger"])
    assert on_disk == session / ".kit" / "ledger.json"  # the posed, project-written ledger.json stays as posed
    assert Ledger.open(on_disk)["H2"].verdict == h2[0]["verdict"]
    assert Ledger.open(session / "ledger.json")["H2"].verdict == "open"
    assert got["elsewhere"]["refused"] and "gpu-box" in got["elsewhere"]["error"]


def test_predicate_evaluated_only_with_allow_run(tmp_path):
    """source_evaluate runs the engine's own predicate on local with --allow-run local (the stand-in GPU
    reports capability 10.0, then 12.0), and an environment variable outside the engine switches is refused."""
    tree = _sglang_tree()
    from tests.source.test_source_real_engines import STANDIN

    modules = ",".join((tree / "binary_modules.txt").read_text().split())
    params = _params(*_roots(tree.resolve(), STANDIN), "--allow-run", "local", cache=tmp_path / "cache")
    near = str(tree / "sglang" / "srt" / "server_args.py")

    async def main() -> list[dict]:
        async with Client(params) as c:
            outs = []
            for cap, extra in (("10.0", {}), ("12.0", {}), ("10.0", {"LD_PRELOAD": "/tmp/x.so"})):
                outs.append(await _call(c, "source_evaluate", {
                    "host": "local", "name": "is_sm100_supported", "near": near,
                    "pythonpath": [str(STANDIN), str(tree)],
                    "env": {"KIT_STANDIN_CAPABILITY": cap, "KIT_STANDIN_MODULES": modules, **extra}}))
            return outs

    b200, rtx, hostile = anyio.run(main)
    assert _ok(b200)["value"] is True and _ok(rtx)["value"] is False
    assert b200["provenance"][1]["kind"] == "measured"
    assert hostile["refused"] and "LD_PRELOAD" in hostile["error"]


def test_report_build_through_the_server(tmp_path):
    """report_build (a run tool: notebooks executed here) writes the offline report into a directory
    inside the roots; listed only with --allow-run local."""
    session = _copy_sample(tmp_path)
    out = tmp_path / "report"
    params = _params(*_roots(tmp_path), "--allow-run", "local", "--timeout", "560", cache=tmp_path / "cache")

    async def main() -> dict:
        async with Client(params) as c:
            return await _call(c, "report_build", {"session": str(session), "out": str(out),
                                                   "notebooks": [str(ROOT / "notebooks" / "00_environment.ipynb")]})

    got = anyio.run(main)
    res = _ok(got)
    assert res["ok"] and (out / "index.html").is_file() and len(res["runs"]) == 1
    assert (out / res["runs"][0]["page"]).is_file()


def test_a_call_past_the_timeout_is_answered_and_the_server_goes_on(tmp_path):
    """--timeout 1: a report build (kernels take longer than that to start) is answered with the
    timeout, the next call is served, and the process ends when the client leaves."""
    session = _copy_sample(tmp_path)
    params = _params(*_roots(tmp_path), "--allow-run", "local", "--timeout", "1", cache=tmp_path / "cache")

    async def main() -> tuple[dict, dict]:
        async with Client(params) as c:
            slow = await _call(c, "report_build", {"session": str(session), "out": str(tmp_path / "r"),
                                                   "notebooks": [str(ROOT / "notebooks" / "00_environment.ipynb")]})
            after = await _call(c, "ledger_read", {"ledger": str(session)})
        return slow, after

    slow, after = anyio.run(main)
    assert not slow["ok"] and "per-call timeout of 1 s" in slow["error"]
    assert _ok(after)["hypotheses"]


# ------------------------------------------------------------------------------------------- HTTP
@contextlib.contextmanager
def _http_server(tmp_path: Path, *flags: str):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "kit", "mcp", "--http", "0", *flags], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()  # the server says where it listens once it does
        m = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp) \(bearer token in (\S+)\)", line)
        assert m, f"kit mcp --http printed {line!r}, exit {proc.poll()}"
        yield m.group(1), Path(m.group(2)).read_text().strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_streamable_http_on_loopback(tmp_path):
    """The same tools over streamable HTTP, bound to 127.0.0.1 (this machine's other address gets no
    answer); a request naming another Host (DNS rebinding) is refused by the transport."""
    import httpx2

    with _http_server(tmp_path, *_roots()) as (url, token):
        async def main() -> dict:
            async with _http_client(url, token) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                check = await _call(c, "trace_check", {"paths": [str(TRACES / "tp1_graph")]})
                refused = await _call(c, "source_slice", {"host": "local", "path": "/etc/passwd", "start": 1})
            return {"names": names, "check": check, "refused": refused}

        got = anyio.run(main)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        elsewhere = _reaches(_outward_address(), port)
        rebound = httpx2.post(url, headers={"Host": "evil.example:80", "Content-Type": "application/json",
                                            "Authorization": f"Bearer {token}",
                                            "Accept": "application/json, text/event-stream"},
                              content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', timeout=30)
    assert "trace_check" in got["names"] and not WRITE_OR_RUN & got["names"]
    h = profile.load(str(TRACES / "tp1_graph" / "rank0.trace.json.gz")).health()
    assert _ok(got["check"])["metrics"] == json.loads(json.dumps(h.to_dict()["metrics"]))
    assert got["refused"]["refused"] and "outside the server's roots" in got["refused"]["error"]
    assert rebound.status_code in (400, 403, 421)
    assert elsewhere is not True, "the server answers on an interface other than loopback"


def _http_client(url: str, token: str | None) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60)))


def _outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def _reaches(addr: str | None, port: int) -> bool | None:
    import socket

    if addr is None:
        return None
    try:
        socket.create_connection((addr, port), timeout=5).close()
    except OSError:
        return False
    return True


# ------------------------------------------------------------------------------------ hostile arguments
def _hostile(canary: Path, outside: Path) -> list[str]:
    c = str(canary)
    return [f"$(touch {c})", f"`touch {c}`", f"; touch {c}", f"| touch {c}", f"&& touch {c}", f"x\ntouch {c}",
            f"-oProxyCommand=touch {c}", f"--pre=touch {c}", f"--exec=touch {c}", "-rf", "../../../../etc/passwd",
            "/etc/shadow", str(outside), "~/.ssh/id_rsa", "a\x00b", f"'; touch {c}; '", f"\"; touch {c}; \"",
            f"local; touch {c}", "*", "{a,b}", "", "x" * 5000]


def _fill(schema: dict, value: str, key: str, root: Path) -> dict | None:
    """The tool's required arguments with ``key`` set to the hostile ``value`` (None when ``key`` takes no string).
    What a write tool would write goes under ``root`` (a copy of the sample ledger, a report directory)."""
    props = schema["properties"]
    good = {"host": "local", "path": str(SAMPLE / "logs"), "paths": [str(SAMPLE / "logs")],
            "a": [str(TRACES / "tp1_eager")], "b": [str(TRACES / "tp1_graph")],
            "pattern": "x", "symbol": "x", "name": "x",
            "near": str(SAMPLE / "engine" / "tinyserve" / "srt" / "server_args.py"), "start": 1,
            "ledger": str(root / "ledger.json"), "session": str(SAMPLE), "id": "H9", "verdict": "open", "evidence": "e",
            "out": str(root / "out"),
            "client": str(SAMPLE / "bench" / "reconcile" / "graph" / "c1.json"),
            "engine_log": str(SAMPLE / "bench" / "reconcile" / "graph" / "engine.log"), "run_id": "20261204"}
    args = {k: good[k] for k in schema["required"]}
    p = props[key]
    if p.get("type") == "string":
        args[key] = value
    elif p.get("type") == "array" and p["items"].get("type") == "string":
        args[key] = [value]
    elif p.get("type") == "object":
        args[key] = {value: value}
    else:
        return None
    return args


def _path_typed(prop: dict) -> bool:
    """Whether a schema field names a file or directory: the server marks it (``x-path``), in the field or
    its items; the server resolves exactly these before a tool function runs."""
    return "x-path" in prop or "x-path" in (prop.get("items") or {})


def test_hostile_arguments_execute_nothing(tmp_path):
    """Every string argument of every tool (read, write and run: the server allows all of them here) is
    given shell metacharacters, option-looking values, paths out of the roots, control characters and
    oversized text: each call is refused or answers harmlessly, the canary a shell would create is never
    written, nothing outside the roots is read, and the server keeps answering."""
    canary = tmp_path / "outside" / "CANARY"
    canary.parent.mkdir()
    secret = tmp_path / "outside" / "secret.txt"
    secret.write_text("do-not-read-me\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(secret)  # a symlink in the root pointing out of it
    shutil.copy(SAMPLE / "ledger.json", root / "ledger.json")
    params = _params(*_roots(root), "--allow-write", "--allow-run", "local", cache=tmp_path / "cache")
    values = _hostile(canary, secret) + [str(root / "link")]

    async def main() -> tuple[list[tuple[str, str, dict]], dict, list]:
        results = []
        async with Client(params) as c:
            tools = (await c.list_tools()).tools
            for t in tools:
                for key in t.input_schema["properties"]:
                    for v in values:
                        args = _fill(t.input_schema, v, key, root)
                        if args is not None:
                            results.append((t.name, key, await _call(c, t.name, args)))
            alive = await _call(c, "ledger_read", {"ledger": str(SAMPLE)})
        return results, alive, tools

    results, alive, tools = anyio.run(main)
    assert not canary.exists(), "a hostile argument reached a shell"
    subprocess.run(["sh", "-c", f"echo {values[0]}"], check=True, capture_output=True)  # the canary is live:
    assert canary.exists()                                                                # a shell makes it
    assert len(results) > 300
    leaked = [(n, k) for n, k, r in results if "do-not-read-me" in json.dumps(r)]
    assert leaked == []
    hosts = [r for n, k, r in results if k == "host"]
    assert hosts and not any(r["ok"] for r in hosts)
    path_keys = {(t.name, k) for t in tools for k, p in t.input_schema["properties"].items() if _path_typed(p)}
    assert len(path_keys) >= 30  # every file or directory argument of every tool, read from the schemas
    ok_paths = [(n, k) for n, k, r in results if r["ok"] and (n, k) in path_keys]
    assert ok_paths == []
    assert not any(r["ok"] for n, k, r in results if n == "source_evaluate")
    assert all("Traceback" not in (r.get("error") or "") for _, _, r in results)
    assert not (root / "out").exists() and _ok(alive)["hypotheses"]


def test_secrets_are_redacted_from_results(tmp_path):
    """A log holding a token and a password: the tool result carries the mask, never the values, and
    says how many were masked."""
    root = tmp_path / "root"
    root.mkdir()
    log = root / "server.log"
    token, password = "hf_" + "Zq8" * 12, "s3cr3t-Pa55word-x"
    log.write_text((SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log").read_text()
                   + f"HF_TOKEN={token}\nlaunch --api-key {password}\n")
    params = _params(*_roots(root), cache=tmp_path / "cache")

    async def main() -> dict:
        async with Client(params) as c:
            return await _call(c, "source_grep", {"host": "local", "path": str(log), "pattern": "HF_TOKEN|api-key",
                                                  "glob": ""})

    out = anyio.run(main)
    text = json.dumps(out)
    assert _ok(out)["count"] == 2 and token not in text and password not in text
    assert out["redacted"] >= 2 and "REDACTED" in text


# ------------------------------------------------------------------------------------------ over SSH
@pytest.mark.ssh
def test_source_tools_over_ssh_and_hostile_patterns_there(tmp_path, sshd):
    """A read-only server started with ``--host box`` (an ~/.ssh/config alias of the real sshd fixture,
    strict host keys) and ``--host-root box=DIR`` reads and searches the engine source there, nothing
    outside DIR; hostile patterns, globs and paths go to the host quoted: the canary a shell on the host
    would create is never written, although the login user can write it (proven by a raw command)."""
    tree = sshd.stage(SAMPLE / "engine", "engine")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host box\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.key_path}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {sshd.known_hosts}\n  StrictHostKeyChecking yes\n")
    canary = f"{sshd.tmp}/CANARY"
    params = _params(*_roots(), "--host", "box", "--host-root", f"box={tree}", cache=tmp_path / "cache")
    params.env["HOME"] = str(home)
    server_args = f"{tree}/tinyserve/srt/server_args.py"
    values = [v for v in _hostile(Path(canary), Path("/etc/shadow")) if v]

    async def main() -> dict:
        got = {"hostile": []}
        async with Client(params) as c:
            got["grep"] = await _call(c, "source_grep", {"host": "box", "path": tree, "pattern": "is_sm100_supported"})
            got["pred"] = await _call(c, "source_definition", {"host": "box", "name": "is_sm100_supported",
                                                               "near": server_args})
            got["outside"] = await _call(c, "source_slice", {"host": "box", "path": "/etc/hostname", "start": 1})
            for v in values:
                for args in ({"path": tree, "pattern": v}, {"path": tree, "pattern": "x", "glob": v},
                             {"path": v, "pattern": "x"}):
                    got["hostile"].append(await _call(c, "source_grep", {"host": "box", **args}))
                got["hostile"].append(await _call(c, "source_slice", {"host": "box", "path": v, "start": 1}))
        return got

    got = anyio.run(main)
    assert _ok(got["grep"])["count"] >= 2 and all(m["host"] == "box" for m in got["grep"]["result"]["matches"])
    assert got["grep"]["provenance"][0]["artefact"].startswith("box:")
    assert _ok(got["pred"])["path"] == f"{tree}/tinyserve/srt/utils/common.py"
    assert not any(r["ok"] and r["result"].get("lines") for r in got["hostile"])  # no file read by a hostile path
    assert got["outside"]["refused"] and "outside the server's roots there" in got["outside"]["error"]
    with sshd.connect() as h:
        assert h.run(f"test -e {canary}").exit_code != 0, "a hostile argument reached the host's shell"
        h.run(f"echo {values[0]}")  # the canary is live: the login user's shell makes it
        assert h.run(f"test -e {canary}").exit_code == 0
