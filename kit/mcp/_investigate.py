"""Two runs investigated (``investigate``, read): the pipeline's steps and the ranked causes (``kit.investigate``).
Read-only: nothing is recorded in a ledger (``kit investigate --ledger`` does that). Each run's files and
folders arrive checked by the server (``x-path: tree``: every entry inside the roots); provenance and
trust as fields, warnings said."""
from __future__ import annotations

from kit.investigation import investigate as run_investigation
from kit.mcp._policy import Policy
from kit.mcp._result import Answer, file_provenance


def investigate(policy: Policy, a: list[str], b: list[str], labels: list[str] | None = None) -> Answer:
    """Why is run B slower than run A: each run a list of files or folders (traces, logs, benchmark results)."""
    inv = run_investigation(a, b, labels=tuple((labels or ["A", "B"])[:2]))
    out = inv.to_dict()
    if inv.invalid:
        trust, reasons = "unreliable", [inv.headline]
    elif any(c.trust == "degraded" for c in inv.ranked):
        trust, reasons = "degraded", [f"{c.what}: trust degraded" for c in inv.ranked if c.trust == "degraded"]
    else:
        trust, reasons = "usable", ["every ranked cause rests on usable figures"]
    files = dict.fromkeys(f for st in out["steps"] if st["name"] == "inputs" for d in st["data"].values()
                          for f in d["files"])
    prov = [file_provenance("local", f, "run input") for f in list(files)[:40]]
    skipped = [f"{s['name']}: {s['status']}: {s['reason']}" for s in out["steps"] if s["status"] != "ran"]
    return Answer(out, prov, trust, reasons, skipped, table="causes")
