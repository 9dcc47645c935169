"""Issue 45's hostile inputs on the MCP server (round 4), each on the input the issue describes: the
server in process through the SDK's client (fast), and over HTTP as a real process with a second,
unprivileged account on the machine (slow: the server and a throwaway user)."""
from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client

from kit.cli import main
from kit.errors import UsageError
from kit.mcp import Policy, available, build_server
from kit.mcp._result import Answer, envelope
from kit.mcp._server import MAX_STRANDED, call
from tests.conftest import ROOT, SAMPLE

TRACE = ROOT / "tests" / "data" / "traces" / "hf_llama_stack" / "trace.json.gz"


def _calls(policy: Policy, *calls: tuple[str, dict]) -> list[dict]:
    async def go():
        async with Client(build_server(policy)) as c:
            return [(await c.call_tool(name, args)).structured_content for name, args in calls]

    return anyio.run(go)


def _refused(out: dict, *words: str) -> None:
    assert not out["ok"], out
    assert all(w in out["error"] for w in words), out["error"]
    assert "Traceback" not in out["error"] and "\n" not in out["error"]


def _key(path: Path) -> list[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True,
                   capture_output=True, timeout=60)
    return path.read_text().splitlines()


# ------------------------------------------------------------------------------------- item 2
def test_ledger_record_writes_only_into_the_sessions_ledger(tmp_path):
    """``ledger_record`` with a ``.bash_profile`` (or any other new name) as its ledger is refused and
    creates nothing; a session directory's verdict goes to that session's ledger."""
    root = tmp_path / "root"
    session = root / "session"
    session.mkdir(parents=True)
    (session / "ledger.json").write_text((SAMPLE / "ledger.json").read_text())
    policy = Policy(roots=(root,), write=True)
    hostile = {"id": "H9", "verdict": "open", "evidence": "$(touch /tmp/pwned)", "statement": "a hypothesis"}
    profile, other, good = _calls(policy, ("ledger_record", {"ledger": str(root / ".bash_profile"), **hostile}),
                                  ("ledger_record", {"ledger": str(root / "notes.json"), **hostile}),
                                  ("ledger_record", {"ledger": str(session), **hostile}))
    _refused(profile, ".bash_profile")
    _refused(other, "notes.json")
    assert sorted(p.name for p in root.iterdir()) == ["session"]
    from kit import session as kit_session

    assert good["ok"] and good["result"]["ledger"] == str(kit_session.open(session.resolve()).ledger().path)


# ------------------------------------------------------------------------------------- item 3
def test_key_material_is_never_returned_whole_or_line_by_line(tmp_path):
    """A private key inside the root (not under ~/.ssh), read by ``source_slice`` (the armour lines, or
    only the body lines 2-5) and by ``source_grep`` line by line: every result is refused, and no line of
    the key's body is in any answer."""
    root = tmp_path / "root"
    lines = _key(root / "keys" / "deploy_key")
    policy = Policy(roots=(root,))
    key = str(root / "keys" / "deploy_key")
    outs = _calls(policy, ("source_slice", {"host": "local", "path": key, "start": 1}),
                  ("source_slice", {"host": "local", "path": key, "start": 2, "end": 5}),
                  ("source_slice", {"host": "local", "path": key, "start": 3, "end": 3}),
                  ("source_grep", {"host": "local", "path": str(root / "keys"), "pattern": "[A-Za-z]", "glob": "*"}))
    for out in outs:
        _refused(out, "private-key material")
    body = [x for x in lines if not x.startswith("-----")]
    assert not any(b in json.dumps(outs) for b in body)


def test_a_secret_split_across_strings_is_redacted_as_one_text():
    """A password whose name and value arrive as two rows (a table printed one cell per row) is masked:
    the result is redacted as one text, not string by string."""
    rows = [{"line": 1, "text": "admin_password:"}, {"line": 2, "text": "correct-horse-battery-9"},
            {"line": 3, "text": "note: password=correct-horse-battery-9 was rotated"}]
    out = envelope("t", Answer({"rows": rows}, table="rows"), offset=0, limit=10, cap=100_000)
    assert "correct-horse" not in json.dumps(out) and out["redacted"] >= 2


# ------------------------------------------------------------------------------------- item 4
def test_a_root_is_explicit_and_never_home_slash_or_credentials(tmp_path, capsys):
    """Without --root (and without --session) ``kit mcp`` refuses to start; ``/``, the home directory (and
    the directories above it) and credential directories are refused as roots; inside a root, a path
    under a ``.ssh``/``.aws`` directory is refused."""
    assert main(["mcp"]) == 1
    err = capsys.readouterr().err
    assert "--root" in err and len(err.strip().splitlines()) == 1
    home = Path.home()
    for bad in ("/", str(home), str(home.parent), str(home / ".ssh"), str(home / ".aws" / "x")):
        with pytest.raises(UsageError, match="home directory|credentials|/"):
            Policy(roots=(Path(bad),))
    root = tmp_path / "root"
    _key(root / ".ssh" / "id_ed25519")
    (root / ".aws").mkdir()
    (root / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = x\n")
    p = Policy(roots=(root,))
    for bad in (".ssh/id_ed25519", ".aws/credentials"):
        with pytest.raises(UsageError, match="credentials directory"):
            p.local_path(bad)


# ------------------------------------------------------------------------------------- item 5
def test_symlinks_inside_a_directory_argument_and_imports_above_the_root(tmp_path):
    """A directory inside the root holding a symlink out of it (a trace folder's ``rank0``, an audited
    folder's log, a settings log) is refused for every tool that would open it; ``source_definition``
    that follows ``from ....outside import evil`` above the root is refused, and so is an environment value
    a run tool would set naming a file outside; the file out there is never read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text("do-not-read-me\n")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "outside.py").write_text("def evil():\n    return 'do-not-read-me'\n")
    root = tmp_path / "root"
    for d in (root / "pkg" / "sub", root / "traces", root / "logs"):
        d.mkdir(parents=True)
    for f in (root / "__init__.py", root / "pkg" / "__init__.py", root / "pkg" / "sub" / "__init__.py"):
        f.write_text("")
    (root / "pkg" / "sub" / "mod.py").write_text("from ....outside import evil\n\nx = evil()\n")
    (root / "traces" / "rank0.trace.json.gz").symlink_to(outside / "secret.log")
    (root / "logs" / "server.log").symlink_to(outside / "secret.log")
    (root / "own.log").write_text("INFO started\n")
    policy = Policy(roots=(root,))
    outs = _calls(policy, ("trace_summary", {"paths": [str(root / "traces")]}),
                  ("trace_check", {"paths": [str(TRACE)], "reference": str(root / "traces")}),
                  ("audit", {"paths": [str(root / "logs")]}),
                  ("logs_settings", {"paths": [str(root / "logs")]}),
                  ("trace_diff_structure", {"a": [str(TRACE)], "b": [str(TRACE)],
                                            "settings": [str(root / "logs" / "server.log"), str(root / "own.log")]}),
                  ("source_grep", {"host": "local", "path": str(root), "pattern": "do-not", "glob": "*"}),
                  ("source_definition", {"host": "local", "name": "evil",
                                         "near": str(root / "pkg" / "sub" / "mod.py")}))
    run = Policy(roots=(root,), run_hosts=("local",))
    outs += _calls(run, ("source_evaluate", {"host": "local", "name": "x", "near": str(root / "pkg" / "sub" / "mod.py"),
                                            "env": {"KIT_CONFIG": str(outside / "secret.log")}}))
    for out in outs:
        _refused(out, "outside the server's roots")
    assert "do-not-read-me" not in json.dumps(outs)


# ------------------------------------------------------------------------------------- item 6
def test_the_timeout_covers_redaction_and_serialisation_and_threads_are_bounded(tmp_path):
    """A tool returning 8 MB of text under a 2 s timeout is answered (over the cap) within the timeout,
    not after redacting all of it; a FIFO named as a file is refused before anything opens it; calls
    that never return leave at most MAX_STRANDED threads, later ones are refused as busy, and the
    threads end when released."""
    big = "line of text with an hf_" + "x" * 60 + "\n"
    blob = big * (8_000_000 // len(big))

    def large(policy):
        return Answer({"text": blob})

    t0 = time.monotonic()
    out = anyio.run(call, Policy(timeout_s=2), {"large": _tool("large", large)}, "large", {})
    assert time.monotonic() - t0 < 2.5 and not out["ok"] and "over the server's cap" in out["error"]

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    p = Policy(roots=(tmp_path,), timeout_s=1)
    out = anyio.run(call, p, {t.name: t for t in available(p)}, "logs_parse", {"path": str(fifo)})
    _refused(out, "FIFO")

    release = threading.Event()

    def stuck(policy):
        release.wait(120)
        return Answer({})

    before = threading.active_count()
    tools = {"stuck": _tool("stuck", stuck)}
    outs = [anyio.run(call, Policy(timeout_s=0.05), tools, "stuck", {}) for _ in range(3 * MAX_STRANDED)]
    try:
        grown = threading.active_count() - before
        assert grown <= MAX_STRANDED + 1
        assert sum("per-call timeout" in o["error"] for o in outs) == MAX_STRANDED
        assert sum(o["error"].startswith("busy:") for o in outs) == 2 * MAX_STRANDED
    finally:
        release.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and threading.active_count() > before + 1:
        time.sleep(0.05)
    after = anyio.run(call, Policy(timeout_s=5), {"ok": _tool("ok", lambda policy: Answer({"x": 1}))}, "ok", {})
    assert after["ok"]


def _tool(name, func):
    from kit.mcp import Tool

    return Tool(name, func, "read", name, {})


# ------------------------------------------------------------------------------------- item 7
def test_settings_directory_and_runs_outside_the_roots(tmp_path, monkeypatch):
    """``trace_diff_structure`` with a settings directory holding two matching files answers one line
    (not ``too many values to unpack``); a run recorded from inputs outside the roots is neither listed
    by ``runs_list`` nor given by ``runs_get``, while a run of the root's own inputs is."""
    import shutil

    import kit

    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "runs"))
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    for d in (root / "settings", elsewhere):
        d.mkdir(parents=True)
    for n in ("rank0.log", "rank1.log"):
        (root / "settings" / n).write_text("INFO x\n")
    shutil.copy(TRACE, root / "trace.json.gz")
    shutil.copy(TRACE, elsewhere / "trace.json.gz")
    kit.profile.load(root / "trace.json.gz").summary()
    kit.profile.load(elsewhere / "trace.json.gz").summary()
    all_runs = kit.runs.runs("summary")
    assert len(all_runs) == 2
    policy = Policy(roots=(root,))
    diff, listed = _calls(policy, ("trace_diff_structure", {"a": [str(TRACE)], "b": [str(TRACE)],
                                                            "settings": [str(root / "settings"), str(TRACE)]}),
                          ("runs_list", {"kind": "summary"}))
    _refused(diff, "directory")
    assert "unpack" not in diff["error"]
    assert len(listed["result"]["runs"]) == 1 and "outside the server's roots" in listed["warnings"][0]
    shown = listed["result"]["runs"][0]["run_id"]
    hidden = next(r for r in all_runs["run_id"] if r != shown)
    got, refused = _calls(policy, ("runs_get", {"run_id": shown}), ("runs_get", {"run_id": hidden}))
    assert got["ok"] and any(str(root) in i["path"] for i in got["result"]["inputs"])
    _refused(refused, "outside the server's roots")


# ------------------------------------------------------------------------------------- item 1
@pytest.fixture
def other_user():
    """A throwaway unprivileged account on this machine (root only, as CI runs), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("creating a second account needs root")
    name = f"kt45{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True, timeout=30)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=30)


@contextlib.contextmanager
def _http_server(tmp_path: Path, *flags: str):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "kit", "mcp", "--http", "0", *flags], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp) \(bearer token in (\S+)\)", line)
        assert m, f"kit mcp --http printed {line!r}, exit {proc.poll()}"
        yield m.group(1), Path(m.group(2))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_PROBE = """
import json, sys, urllib.request, urllib.error
url, token_file = sys.argv[1], sys.argv[2]
out = {}
try:
    out["token"] = open(token_file).read()
except OSError as e:
    out["token_error"] = type(e).__name__
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "source_slice",
                   "arguments": {"host": "local", "path": sys.argv[3], "start": 1}}}).encode()
req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                             "Accept": "application/json, text/event-stream"})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        out["status"], out["body"] = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    out["status"], out["body"] = e.code, e.read().decode()
print(json.dumps(out))
"""


def _system_python() -> str:
    """A Python the other account may run (this checkout's own may sit in a directory only its owner reads)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(p, os.X_OK) and os.stat(p).st_mode & 0o001:
            return p
    pytest.skip("no world-executable system python3 for the second account")


def test_http_needs_the_servers_token_and_another_user_gets_nothing(tmp_path, other_user):
    """A server started with ``--allow-run local --allow-write`` over HTTP: another local account (a real
    second uid) cannot read the token file (0600 in a 0700 directory) and its requests, without the
    token, are answered 401 before any tool runs (a 0600 file of the server's user is not read); the
    token's holder is served, and a request naming another Host is still refused."""
    import httpx2

    root = tmp_path / "root"
    root.mkdir()
    (root / "secret.txt").write_text("do-not-read-me\n")
    os.chmod(root / "secret.txt", 0o600)
    with _http_server(tmp_path, "--root", str(root), "--allow-run", "local", "--allow-write") as (url, token_file):
        assert token_file.stat().st_mode & 0o777 == 0o600 and token_file.parent.stat().st_mode & 0o777 == 0o700
        token = token_file.read_text().strip()
        ran = subprocess.run([_system_python(), "-I", "-c", _PROBE, url, str(token_file), str(root / "secret.txt")],
                             user=other_user.pw_uid, group=other_user.pw_gid, extra_groups=[], capture_output=True,
                             text=True, timeout=60, cwd="/")
        assert ran.returncode == 0, ran.stderr
        other = json.loads(ran.stdout)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        wrong = httpx2.post(url, headers={**headers, "Authorization": "Bearer " + "x" * len(token)}, content=ping,
                            timeout=30)
        rebound = httpx2.post(url, headers={**headers, "Authorization": f"Bearer {token}", "Host": "evil.example"},
                              content=ping, timeout=30)

        async def main():
            from tests.mcp.test_mcp import _http_client

            async with _http_client(url, token) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                read = await c.call_tool("source_slice", {"host": "local", "path": str(root / "secret.txt"),
                                                          "start": 1})
            return names, read.structured_content

        names, read = anyio.run(main)
    assert other.get("token_error") == "PermissionError" and "token" not in other
    assert other["status"] == 401 and "do-not-read-me" not in other["body"]
    assert wrong.status_code == 401
    assert rebound.status_code in (400, 403, 421)
    assert {"report_build", "ledger_record"} <= names and read["ok"]
    assert not token_file.exists(), "the token's directory is removed when the server ends"


def test_http_sessions_expire_when_idle(tmp_path):
    """Sessions opened and left (issue 45: 5,000 of them held 178 MB for good) are closed once idle:
    with ``--session-idle 1`` each session's id is answered 404 after a look at it finds it idle (looks
    spaced wider than the limit, until all are gone or 90 s), while a new session is served."""
    import httpx2

    root = tmp_path / "root"
    root.mkdir()
    with _http_server(tmp_path, "--root", str(root), "--session-idle", "1") as (url, token_file):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {token_file.read_text().strip()}"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}}
        ids = []
        for _ in range(5):
            r = httpx2.post(url, headers=headers, json=init, timeout=30)
            assert r.status_code == 200, r.text
            ids.append(r.headers["mcp-session-id"])
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        deadline, gone = time.monotonic() + 90, set()
        while time.monotonic() < deadline and len(gone) < len(ids):
            time.sleep(2.5)   # longer than the idle limit between looks: a look is itself activity
            for sid in set(ids) - gone:
                r = httpx2.post(url, headers={**headers, "mcp-session-id": sid}, json=ping, timeout=30)
                if r.status_code == 404:
                    gone.add(sid)
        fresh = httpx2.post(url, headers=headers, json=init, timeout=30)
    assert gone == set(ids)
    assert fresh.status_code == 200
