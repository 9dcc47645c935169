"""The whole secret corpus through every kit output that reads what a user's files hold and prints or
stores it outside the report's redaction: ``kit audit`` (text and ``--json``), ``kit logs parse`` and
``kit logs spec`` (text and ``--json``), the Python objects behind them (``Settings``, ``Audit``, the
NCCL table). Issue 34: ``kit audit --json`` printed SGLang's ``api_key`` raw; an environment capture's
``postgres://u:pw@`` and NCCL's echo of ``NCCL_IB_SECRET_KEY`` came through ``--json`` too."""
from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redact.secret_corpus import CREDENTIALS, _b64, _s

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "logs" / "sglang_0.5.9_eagle.log"
API_KEY = _s(24)
HF = "hf_" + _s(34)
DB = _s(18)


def _forms(needle: str) -> set[str]:
    j = json.dumps(needle)[1:-1]
    return {needle, html.escape(needle), j, j.replace("/", "\\/")}


NEEDLES = [(name, needle) for name, _, needle in CREDENTIALS] + [
    ("SGLang api_key", API_KEY), ("get_server_info api_key", API_KEY[::-1]), ("HF_TOKEN in env", HF),
    ("DATABASE_URL in env", DB)]


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("outputs")
    lines = LOG.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        out.append(line.replace("tp_size=8, ", f"tp_size=8, api_key='{API_KEY}', "))
        if i < len(CREDENTIALS):
            out.append(CREDENTIALS[i][1])
    out += [c[1] for c in CREDENTIALS[len(lines):]]
    (d / "server.log").write_text("\n".join(out) + "\n")
    (d / "server_info.json").write_text(json.dumps({"model_path": "m", "tp_size": 2, "api_key": API_KEY[::-1],
                                                    "attention_backend": "fa3", "admin_api_key": None}))
    (d / "env.txt").write_text(f"HF_TOKEN={HF}\nDATABASE_URL=postgres://bench:{DB}@db:5432/runs\n"
                               f"NCCL_IB_SECRET_KEY={_s(32)}\nAWS_SESSION_TOKEN={_b64(60)}\nNCCL_PROTO=LL\n")
    return d


def _leaks(text: str) -> list[str]:
    return [name for name, needle in NEEDLES if any(f in text for f in _forms(needle))]


@pytest.mark.parametrize("args", [["audit", "{d}", "--json"], ["audit", "{d}"], ["audit", "{d}/server_info.json",
                                  "{d}/env.txt", "--json"],
                                  ["logs", "parse", "{d}/server.log", "--json"], ["logs", "parse", "{d}/server.log"],
                                  ["logs", "spec", "{d}/server.log", "--json"]], ids=" ".join)
def test_cli_outputs_hold_no_secret(planted, args):
    cmd = [sys.executable, "-m", "kit"] + [a.format(d=planted) for a in args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip()
    assert _leaks(res.stdout + res.stderr) == []


def test_python_objects_hold_no_secret(planted):
    from kit.audit import audit
    from kit.logs import read, settings

    a = audit([planted])
    st = settings([planted / "server.log", planted / "server_info.json", planted / "env.txt"])
    assert st.args.get("api_key") == "***REDACTED***" and st.args.get("admin_api_key") is None
    assert st.env["NCCL_PROTO"] == "LL" and st.env["DATABASE_URL"] == "postgres://bench:***REDACTED***@db:5432/runs"
    texts = [repr(a), json.dumps(a.to_dict(), default=str), repr(st), json.dumps(st.to_dict(), default=str)]
    log = read(planted / "server.log")
    texts += [log.nccl.to_csv() if getattr(log, "nccl", None) is not None else "", repr(log)]
    assert _leaks("\n".join(texts)) == []
