"""Read tools over two things at once: two runs by structure (``trace_diff_structure``) and a client's
records against an engine's (``bench_reconcile``). Same contract as ``_calls``: paths checked by the
Policy, provenance and trust as fields, warnings said."""
from __future__ import annotations

from kit.mcp._calls import _file_provenance, _health_trust, _paths, _profile_provenance
from kit.mcp._policy import Policy
from kit.mcp._result import Answer

_RANK = {"usable": 0, "degraded": 1, "unreliable": 2}


def trace_diff_structure(policy: Policy, a: list[str], b: list[str], phase: str = "decode", basis: str = "kernel",
                         labels: list[str] | None = None, settings: list[str] | None = None,
                         references: list[str] | None = None) -> Answer:
    """Two runs (two engines) node by node: layer kind x operation family, with the differing settings."""
    from kit import logs, profile

    refs = [(_paths(policy, [r])[0] if r else None) for r in (references or [None, None])[:2]]
    pa, pb = (profile.load(_paths(policy, x), reference=r) if r else profile.load(_paths(policy, x))
              for x, r in zip((a, b), refs))
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
    trust = "usable" if share["median_band"] <= 0.05 and share["slowest_1pct"] <= 0.10 else "degraded"
    reasons = [f"residual {100 * share['median_band']:.1f}% of the median ITL, "
               f"{100 * share['slowest_1pct']:.1f}% in the slowest 1%",
               f"clock offset {rec.offset_ms:+.2f} +/- {rec.offset_bound_ms:.2f} ms"]
    if rec.level != "token":   # engine records per request / interval / iteration: said, and less sure
        trust = "degraded" if rec.level == "distribution" else trust
        reasons = [rec.warnings[0], *reasons[:1]]
    return Answer(rec.to_dict(), prov, trust, reasons, list(rec.warnings), table="table")


def runs_list(policy: Policy, kind: str | None = None, limit: int = 50) -> Answer:
    """The run catalogue's latest runs (``kit.runs.runs``): no SQL from the agent (DuckDB's SQL can read
    any file the server can), only a kind and a count."""
    from kit import runs
    from kit.util import frame_records

    df = runs.runs(kind, limit=max(1, min(int(limit), 1000)))
    prov = [{"kind": "catalogue", "source": str(runs.store_dir() or "recording off")}]
    return Answer({"runs": frame_records(df)}, prov, "not assessed",
                  ["a catalogue row records what a run computed; each run's own trust is in its facts"], [],
                  table="runs")


def runs_get(policy: Policy, run_id: str) -> Answer:
    """One recorded run: who, when, inputs by hash, settings, figures, facts, warnings."""
    import re

    from kit import runs
    from kit.errors import UsageError

    if not isinstance(run_id, str) or not re.fullmatch(r"[0-9A-Za-z-]{4,40}", run_id):
        raise UsageError(f"run id {run_id!r}: not a catalogue run id (e.g. 20261204T203000-1a2b3c4d or a prefix)")
    r = runs.get(run_id)
    prov = [{"kind": "catalogue", "source": str(r.get("path") or runs.store_dir())}]
    return Answer(r, prov, "not assessed", ["as recorded; the inputs' hashes say whether they changed since"],
                  list(r.get("warnings") or []))
