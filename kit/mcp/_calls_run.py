"""The tools that change something or run code, listed only when the server was started to allow them.

``ledger_record`` writes a verdict (``--allow-write``); ``source_evaluate`` imports an engine file and
calls a predicate with the host's Python, and ``report_build`` executes the notebooks in kernels on
this machine (``--allow-run HOST``: only for the hosts named). Neither takes a command: the code run
is the engine's published file or the project's notebooks, with arguments checked by the Policy.
"""
from __future__ import annotations

import os
from typing import Any

from kit.mcp._calls import _connect, _file_provenance, _now, ledger_path
from kit.mcp._policy import Policy, environment, identifier
from kit.mcp._result import Answer


def ledger_record(policy: Policy, ledger: str, id: str, verdict: str, evidence: str,  # noqa: A002
                  statement: str | None = None, test: str | None = None, numbers: dict | None = None,
                  source: str = "mcp client", caveats: list[str] | None = None,
                  artefacts: list[str] | None = None) -> Answer:
    """Record evidence and a verdict for hypothesis ``id``; ``artefacts`` (local files) become its
    provenance, each with the kind the session's manifest gives it (never assumed measured)."""
    from kit.ledger import Ledger

    path = ledger_path(policy, ledger, write=True)
    policy.local_path(str(path), must_exist=False)
    prov = [_ledger_provenance(policy, a) for a in artefacts or []]
    led = Ledger.open(path) if path.exists() else Ledger(path)
    h = led.record(identifier(id, "hypothesis id"), statement=statement, test=test, evidence=evidence,
                   verdict=verdict, numbers=numbers, source=source, provenance=prov or None, caveats=caveats)
    warnings = [] if h.evidence_kind == "measured" else [f"{h.id}: evidence is {h.evidence_kind}, not measured"]
    return Answer({"hypothesis": h.to_dict(), "ledger": str(path), "evidence_kind": h.evidence_kind},
                  [_file_provenance("local", str(path), "ledger")] + prov, "not assessed",
                  ["a verdict as given by the caller; the kit did not compute it"], warnings)


def _ledger_provenance(policy: Policy, artefact: str) -> dict[str, str]:
    p = _file_provenance("local", str(policy.local_path(artefact)), "evidence")
    return {k: str(p[k]) for k in ("artefact", "kind", "role") if p.get(k)} | {"label": p.get("how") or p["kind"]}


def source_evaluate(policy: Policy, host: str, name: str, near: str, pythonpath: list[str] | None = None,
                    env: dict | None = None) -> Answer:
    """Follow ``name`` from ``near`` to its definition and call it with the host's Python (a predicate
    such as ``is_sm100_supported``): the engine's own code answers, on that host's GPU."""
    from kit import source

    policy.host(host, "run")
    near = policy.host_path(host, near)
    variables = environment(env)
    if pythonpath:
        variables["PYTHONPATH"] = os.pathsep.join(policy.host_path(host, p) for p in pythonpath)
    with _connect(host) as h:
        d = source.definition(h, identifier(name), near=near, env=variables or None)
        value = source.evaluate(h, d, env=variables or None, timeout=min(policy.timeout_s, 120))
    out = {"name": name, "qualname": d.qualname, "path": d.path, "line": d.line, "value": value,
           "environment": sorted(variables)}
    prov = [_file_provenance(host, d.path, "source"),
            {"artefact": f"host {host}", "role": "evaluated", "kind": "measured",
             "how": "kit.source.evaluate (the file imported as its module, the definition called)", "when": _now()}]
    return Answer(out, prov, "usable", [f"the host's Python answered {value!r}"])


def report_build(policy: Policy, session: str, out: str, notebooks: list[str] | None = None) -> Answer:
    """Execute the notebooks on ``session`` in kernels on this machine and write the offline HTML report."""
    from kit import report

    policy.host("local", "run")
    root = policy.local_path(session)
    target = policy.local_path(out, must_exist=False)
    nbs = [str(policy.local_path(n)) for n in notebooks] if notebooks else None
    rep = report.build(root, target, notebooks=nbs, host="local", progress=None)
    runs: list[dict[str, Any]] = [{"name": r.name, "ok": r.ok, "page": str(r.page),
                                   "error": r.error, "failed_cell": r.failed_cell} for r in rep.runs]
    failed = [r for r in runs if not r["ok"]]
    return Answer({"out": str(rep.out), "index": str(rep.out / "index.html"), "runs": runs, "ok": rep.ok,
                   "seconds": round(rep.seconds, 1)},
                  [_file_provenance("local", str(root), "session")],
                  "degraded" if failed else "not assessed",
                  [f"{r['name']}: failed at cell {r['failed_cell']}: {r['error']}" for r in failed]
                  or ["the report narrates the notebooks' own verdicts; see the ledger"], table="runs")
