"""The session: ``ledger_read``, ``session_catalogue`` and, where the server allows, ``ledger_record`` (write)
and ``report_build`` (run, on this machine). A write goes only into the named session's ledger (its working
copy ``.kit/ledger.json`` for a directory), never to a file of another name."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kit import report
from kit import session as kit_session
from kit.ledger import Ledger
from kit.mcp._policy import Policy, identifier
from kit.mcp._result import Answer, file_provenance


def ledger_path(ledger: str, *, write: bool = False) -> Path:
    """The ledger file: a ``ledger.json``, or a session directory's ledger as its notebooks use it (a
    posed, project-written ``ledger.json`` stays as it is: verdicts go to the session's working copy,
    ``.kit/ledger.json``, which reading prefers once it exists; only writing creates it)."""
    real = Path(ledger)
    if not real.is_dir():
        return real
    if write:
        return kit_session.open(real).ledger().path
    work = real / ".kit" / "ledger.json"
    return work if work.is_file() else real / "ledger.json"


def ledger_read(policy: Policy, ledger: str, id: str | None = None) -> Answer:  # noqa: A002 - the tool's word
    path = ledger_path(ledger)
    led = Ledger.open(path)
    rows = [h.to_dict() | {"evidence_kind": h.evidence_kind, "provenance_label": h.provenance_label}
            for h in led if id is None or h.id == id]
    prov = [file_provenance("local", str(path), "ledger")]
    kinds = {r["evidence_kind"] for r in rows}
    trust = "undecided" if any(r["verdict"] == "open" for r in rows) else "usable"
    reasons = [f"{r['id']}: {r['verdict']} on {r['evidence_kind']} evidence" for r in rows]
    warnings = [f"{r['id']}: evidence is {r['evidence_kind']}, not measured" for r in rows
                if r["verdict"] != "open" and r["evidence_kind"] != "measured"]
    out = {"hypotheses": rows, "counts": led.counts(), "evidence_kinds": sorted(kinds)}
    return Answer(out, prov, trust, reasons, warnings, table="hypotheses")


def session_catalogue(policy: Policy, session: str) -> Answer:
    """The runs of a session: trace scenarios with their files and provenance, and its other folders."""
    s = kit_session.open(session)
    runs = [{"scenario": name, "files": [str(f) for f in files],
             "provenance": s.provenance(files[0]).to_dict(), "measured": s.measured(name) is not None}
            for name, files in s.scenarios().items()]
    folders = {role: sorted(p.name for p in (s.root / sub).iterdir()) if (s.root / sub).is_dir() else []
               for role, sub in kit_session.LAYOUT.items() if role != "traces"}
    prov = [file_provenance("local", str(s.root), "session")]
    return Answer({"root": str(s.root), "runs": runs, "folders": folders}, prov, "not assessed",
                  ["a listing; each run's trust is trace_check's answer"], table="runs")


def ledger_record(policy: Policy, ledger: str, id: str, verdict: str, evidence: str,  # noqa: A002
                  statement: str | None = None, test: str | None = None, numbers: dict | None = None,
                  source: str = "mcp client", caveats: list[str] | None = None,
                  artefacts: list[str] | None = None) -> Answer:
    """Record evidence and a verdict for hypothesis ``id``; ``artefacts`` (local files) become its
    provenance, each with the kind the session's manifest gives it (never assumed measured)."""
    path = ledger_path(ledger, write=True)
    prov = [_ledger_provenance(a) for a in artefacts or []]
    led = Ledger.open(path)
    h = led.record(identifier(id, "hypothesis id"), statement=statement, test=test, evidence=evidence,
                   verdict=verdict, numbers=numbers, source=source, provenance=prov or None, caveats=caveats)
    warnings = [] if h.evidence_kind == "measured" else [f"{h.id}: evidence is {h.evidence_kind}, not measured"]
    return Answer({"hypothesis": h.to_dict(), "ledger": str(path), "evidence_kind": h.evidence_kind},
                  [file_provenance("local", str(path), "ledger")] + prov, "not assessed",
                  ["a verdict as given by the caller; the kit did not compute it"], warnings)


def _ledger_provenance(artefact: str) -> dict[str, str]:
    p = file_provenance("local", artefact, "evidence")
    return {k: str(p[k]) for k in ("artefact", "kind", "role") if p.get(k)} | {"label": p.get("how") or p["kind"]}


def report_build(policy: Policy, session: str, out: str, notebooks: list[str] | None = None) -> Answer:
    """Execute the notebooks on ``session`` in kernels on this machine and write the offline HTML report."""
    policy.host("local", "run")
    root = Path(session)
    rep = report.build(root, Path(out), notebooks=notebooks or None, host="local", progress=None)
    runs: list[dict[str, Any]] = [{"name": r.name, "ok": r.ok, "page": str(r.page),
                                   "error": r.error, "failed_cell": r.failed_cell} for r in rep.runs]
    failed = [r for r in runs if not r["ok"]]
    return Answer({"out": str(rep.out), "index": str(rep.out / "index.html"), "runs": runs, "ok": rep.ok,
                   "seconds": round(rep.seconds, 1)},
                  [file_provenance("local", str(root), "session")],
                  "degraded" if failed else "not assessed",
                  [f"{r['name']}: failed at cell {r['failed_cell']}: {r['error']}" for r in failed]
                  or ["the report narrates the notebooks' own verdicts; see the ledger"], table="runs")
