"""The start-up budget: the modules each ``kit`` command imports, against an allow-list.

A command imports what it uses (issue 48): a trace summary never loads the catalogue's detector set
(detect-secrets, and with it ``requests``, ``urllib3``, ``email``), ``asyncio``, ``multiprocessing``, tqdm,
DuckDB or the MCP SDK. Each command runs in a fresh interpreter; with the catalogue on, what it had imported
is read at the moment its answer is out, before it writes its run (the writing comes after, by design), and
the test checks that the run was written. Timings are in ``bench/startup.py`` (a test here would measure the
machine's load, not the kit).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "notebooks" / "sample"
TRACE = SAMPLE / "traces" / "tp1_eager" / "rank0.trace.json.gz"
LOG = SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log"
BENCH = SAMPLE / "bench" / "vllm_tp8_default.json"

# Third-party top-level packages a command may import (the standard library is checked by DENIED below).
BASE = {"kit"}
DATA = BASE | {"numpy", "pandas", "pyarrow", "dateutil", "pytz", "tzdata", "six", "typing_extensions"}
ALLOWED = {
    "help": BASE,
    "profile summary": DATA | {"msgspec", "orjson"},
    "logs parse": DATA | {"orjson", "msgspec"},
    "bench parse": DATA | {"orjson", "msgspec"},
}
# Modules that no command above needs before its answer: the detector set and what it brings, the event
# loop, worker processes, the progress bar, the SQL engine, the MCP SDK.
DENIED = {"detect_secrets", "requests", "urllib3", "charset_normalizer", "idna", "certifi", "email", "asyncio",
          "multiprocessing", "tqdm", "duckdb", "mcp", "http", "ssl", "sqlite3", "matplotlib", "IPython", "jinja2"}
COMMANDS = {
    "help": ["--help"],
    "profile summary": ["profile", "summary", str(TRACE), "--json"],
    "logs parse": ["logs", "parse", str(LOG), "--json"],
    "bench parse": ["bench", "parse", str(BENCH), "--json"],
}
# In a fresh interpreter: the command through kit.cli.main, the modules taken when its answer is out (before
# the runs it recorded are written), then whether a run was written.
_PROBE = """
import json, sys
import kit.cli._main as m
seen = []
write = m._write_runs
def at_answer(*args):
    seen.extend(sorted({k.split(".")[0] for k in sys.modules}))
    write(*args)
m._write_runs = at_answer
try:
    code = m.main(sys.argv[2:])
except SystemExit as e:
    code = e.code
if not seen:
    seen.extend(sorted({k.split(".")[0] for k in sys.modules}))
json.dump({"code": code, "modules": seen}, open(sys.argv[1], "w"))
"""


def _run(tmp_path: Path, argv: list[str], runs: str) -> dict:
    out = tmp_path / "probe.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KIT_CACHE_DIR": str(tmp_path / "cache"),
           "KIT_RUNS": runs, "KIT_RUNS_DIR": str(tmp_path / "runs"), "KIT_PROGRESS": "off"}
    p = subprocess.run([sys.executable, "-c", _PROBE, str(out), *argv], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("runs", ["on", "off"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_imports_only_what_it_uses(tmp_path, command, runs):
    got = _run(tmp_path, COMMANDS[command], runs)
    assert got["code"] in (0, None), got["code"]
    mods = set(got["modules"])
    third_party = {m for m in mods if m not in sys.stdlib_module_names and not m.startswith("_")
                   and m not in ("cython_runtime", "__main__")}
    assert third_party <= ALLOWED[command], f"kit {command} imports {sorted(third_party - ALLOWED[command])}"
    assert not mods & DENIED, f"kit {command} imports {sorted(mods & DENIED)} before its answer"
    if runs == "on" and command != "help":   # the answer first, and the run is still written after it
        assert list((tmp_path / "runs").rglob("*.parquet")), f"kit {command} recorded no run"


def test_the_probe_sees_a_module_the_command_imports(tmp_path):
    """The allow-list can fail: ``kit runs query`` needs DuckDB, and the probe sees it."""
    got = _run(tmp_path, ["runs", "query", "SELECT 1 AS one"], "off")
    assert "duckdb" in got["modules"]
