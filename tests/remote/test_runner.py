"""The one command runner: a single process-group killer for every host kind and for Job.stop, no
import cycle inside kit.remote even through imports deferred into function bodies, and the kill's
escalation from SIGTERM to SIGKILL on both host kinds."""
from __future__ import annotations

import ast
import random
import time

import pytest

import kit
from kit.errors import CommandTimeout
from kit.remote._runner import kill_group_script
from tests.conftest import ROOT

REMOTE = ROOT / "kit" / "remote"
# Deferred on purpose, so that ``import kit`` does not import paramiko; not part of any cycle.
DEFERRED_OK = {("kit.remote", "kit.remote._ssh"), ("kit.remote._connect", "kit.remote._ssh")}


def _imports(path) -> list[tuple[str, bool]]:
    """(module, deferred) for every import of a kit.remote module in ``path``, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kit.remote"):
            names = [f"{node.module}.{a.name}" for a in node.names if (REMOTE / f"{a.name}.py").exists()]
            for mod in names or [node.module]:
                out.append((mod, id(node) not in top))
        elif isinstance(node, ast.Import):
            out.extend((a.name, id(node) not in top) for a in node.names if a.name.startswith("kit.remote"))
    return out


def test_no_import_cycle_in_kit_remote_not_even_a_deferred_one():
    graph: dict[str, set[str]] = {}
    deferred = set()
    for path in sorted(REMOTE.glob("*.py")):
        name = "kit.remote" if path.stem == "__init__" else f"kit.remote.{path.stem}"
        graph[name] = set()
        for mod, late in _imports(path):
            if mod != name:
                graph[name].add(mod)
                if late:
                    deferred.add((name, mod))
    assert deferred <= DEFERRED_OK, f"imports deferred into functions: {sorted(deferred - DEFERRED_OK)}"
    state: dict[str, int] = {}

    def dfs(u, stack):
        state[u] = 1
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(v):] + [v]))
            if v not in state:
                dfs(v, stack + [v])
        state[u] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m, [m])


def test_one_process_group_killer():
    """Only the runner knows how to kill a process group: LocalHost, SSHHost and Job.stop use it."""
    for path in sorted(REMOTE.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "_runner.py":
            for needle in ("killpg", "kill -TERM", "kill -KILL", "pkill", "signal.SIG"):
                assert needle not in text, f"{path.name} kills processes itself ({needle!r})"
    script = kill_group_script(4242, grace=0.5)
    assert "kill -TERM -- -4242" in script and "pkill -KILL -s 4242" in script


@pytest.fixture(scope="module", params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def host(request, sshd):
    h = kit.connect("local") if request.param == "local" else sshd.connect()
    yield h
    h.close()


def _procs_matching(token: str) -> list[str]:
    out = kit.connect("local").run("ps -eo pid,stat,args").stdout.splitlines()
    return [ln for ln in out if token in ln and " Z" not in ln and "ps -eo" not in ln]


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(host):
    token = f"{random.randint(100000, 999999)}"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout) as err:
        host.run(f"trap '' TERM; echo armed; bash -c \"trap '' TERM; sleep 7{token}\"; sleep 8{token}", timeout=1.0)
    assert time.monotonic() - t0 < 8
    assert err.value.stdout == "armed\n" and "was killed on the host" in str(err.value)
    deadline = time.monotonic() + 3
    while _procs_matching(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs_matching(token) == []
