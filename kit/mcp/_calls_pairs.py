"""Read tools over two things at once: two runs by structure (``trace_diff_structure``) and a client's
records against an engine's (``bench_reconcile``). Same contract as ``_calls``: paths checked by the
Policy, provenance and trust as fields, warnings said."""
from __future__ import annotations

from kit.mcp._calls import _file_provenance, _health_trust, _paths, _profile_provenance
from kit.mcp._policy import Policy
from kit.mcp._result import Answer

_RANK = {"usable": 0, "degraded": 1, "unreliable": 2}


def trace_diff_structure(policy: Policy, a: list[str], b: list[str], phase: str = "decode", basis: str = "kernel",
                         labels: list[str] | None = None, settings: list[str] | None = None) -> Answer:
    """Two runs (two engines) node by node: layer kind x operation family, with the differing settings."""
    from kit import logs, profile

    pa, pb = profile.load(_paths(policy, a)), profile.load(_paths(policy, b))
    la, lb = (labels or ["A", "B"])[:2]
    sets = None
    if settings:
        sa, sb = _paths(policy, settings[:2])
        sets = (logs.settings([sa]), logs.settings([sb]))
    d = profile.diff_structure(pa, pb, phase=phase, basis=basis, labels=(la, lb), settings=sets)
    trust, reasons = "usable", []
    for label, p in ((la, pa), (lb, pb)):
        v, r = _health_trust(p.health(), ("category_shares", "step_time"))
        trust = v if _RANK.get(v, 3) > _RANK.get(trust, 3) else trust
        reasons += [f"{label}: {x}" for x in r]
    prov = _profile_provenance(pa, f"run {la}") + _profile_provenance(pb, f"run {lb}")
    return Answer(d.to_dict(), prov, trust, reasons, list(d.warnings), table="nodes")


def bench_reconcile(policy: Policy, client: str, engine_log: str, trace: str | None = None) -> Answer:
    """Where a client's inter-token latency goes, against the engine's own step and request records."""
    from kit import bench

    c, e = (str(policy.local_path(x)) for x in (client, engine_log))
    t = str(policy.local_path(trace)) if trace else None
    rec = bench.reconcile(c, e, trace=t)
    prov = [_file_provenance("local", c, "client records"), _file_provenance("local", e, "engine records")]
    if rec.refused:
        return Answer(rec.to_dict(), prov, "unreliable", [rec.refused], list(rec.warnings), table="table")
    share = rec.residual_share
    trust = "usable" if share["p50"] <= 0.05 and share["p99"] <= 0.10 else "degraded"
    reasons = [f"residual {100 * share['p50']:.1f}% of the median ITL, {100 * share['p99']:.1f}% in the slowest 1%",
               f"clock offset {rec.offset_ms:+.2f} +/- {rec.offset_bound_ms:.2f} ms"]
    return Answer(rec.to_dict(), prov, trust, reasons, list(rec.warnings), table="table")
