"""Profiler traces: ``trace_summary``, ``trace_check``, ``trace_compare``, ``trace_diff_structure``; each
result's trust is the worst verdict of the ``Profile.health()`` metrics its numbers rest on."""
from __future__ import annotations

from typing import Any

from kit import logs, profile
from kit.mcp._policy import Policy
from kit.mcp._result import Answer, worse

# the Health metrics each profile tool's numbers rest on (Profile.health(): usable / degraded / unreliable)
_SUMMARY_METRICS = ("category_shares", "step_time", "allreduce_share")
_BY_METRICS = {"category": (), "module": ("module_view",), "layer": ("module_view",), "op": ("op_view",)}


def _health_trust(health, metrics: tuple[str, ...]) -> tuple[str, list[str]]:
    """The worst status among ``metrics`` of a Profile.health(), and one reason per metric not usable."""
    verdict, reasons = "usable", []
    for m in metrics:
        v = health.metrics.get(m)
        if v is None:
            continue
        verdict = worse(verdict, v["status"])
        if v["status"] != "usable":
            reasons.append(f"{m}: {v['status']}: {v['reason']}" + (f" (fix: {v['fix']})" if v.get("fix") else ""))
    return verdict, reasons or [f"{', '.join(metrics)}: usable"]


def _pair(pa, pb, labels: tuple[str, str], result, table: str) -> Answer:
    """A two-run result, trusted as the worse of both runs' category shares and step time."""
    verdict, reasons = "usable", []
    for label, p in zip(labels, (pa, pb)):
        v, r = _health_trust(p.health(), ("category_shares", "step_time"))
        verdict = worse(verdict, v)
        reasons += [f"{label}: {x}" for x in r]
    prov = _provenance(pa, f"run {labels[0]}") + _provenance(pb, f"run {labels[1]}")
    return Answer(result.to_dict(), prov, verdict, reasons, list(result.warnings), table=table)


def _provenance(p, role: str) -> list[dict[str, Any]]:
    return [{"artefact": f, "role": role, **p.provenance.to_dict()} for f in p.files]


def trace_summary(policy: Policy, paths: list[str], phase: str = "decode", by: str = "category", top: int = 5,
                  reference: list[str] | None = None) -> Answer:
    p = profile.Profile.of(paths, reference=reference)
    s = p.summary(phase, top=min(top, 50))
    out = s.to_dict()
    if by in ("module", "layer"):
        out["rows"] = (s.modules if by == "module" else s.layers).to_dict("records")
    else:
        out["rows"] = out.pop("categories")
    out["by"] = by
    health = p.health()
    verdict, reasons = _health_trust(health, _SUMMARY_METRICS + _BY_METRICS[by])
    out["health"] = health.to_dict()["metrics"]
    return Answer(out, _provenance(p, "trace"), verdict, reasons, list(s.warnings), table="rows")


def trace_check(policy: Policy, paths: list[str], reference: list[str] | None = None) -> Answer:
    p = profile.Profile.of(paths, reference=reference)
    h = p.health()
    verdict, reasons = _health_trust(h, tuple(h.metrics))
    return Answer(h.to_dict(), _provenance(p, "trace"), verdict, reasons, list(h.notes) + list(p.warnings))


def trace_compare(policy: Policy, a: list[str], b: list[str], phase: str = "decode",
                  labels: list[str] | None = None) -> Answer:
    pa, pb = profile.Profile.of(a), profile.Profile.of(b)
    la, lb = (labels or ["A", "B"])[:2]
    return _pair(pa, pb, (la, lb), profile.compare(pa, pb, phase=phase, labels=(la, lb)), "families")


def trace_diff_structure(policy: Policy, a: list[str], b: list[str], phase: str = "decode", basis: str = "kernel",
                         labels: list[str] | None = None, settings: list[str] | None = None,
                         references: list[list[str] | None] | None = None) -> Answer:
    """Two runs (two engines) node by node: layer kind x operation family, with the differing settings
    (``settings``: one engine log per run)."""
    refs = (references or [None, None])[:2]
    pa, pb = profile.Profile.of(a, reference=refs[0]), profile.Profile.of(b, reference=refs[1])
    la, lb = (labels or ["A", "B"])[:2]
    sets = (logs.settings([settings[0]]), logs.settings([settings[1]])) if settings else None
    d = profile.diff_structure(pa, pb, phase=phase, basis=basis, labels=(la, lb), settings=sets)
    return _pair(pa, pb, (la, lb), d, "nodes")
