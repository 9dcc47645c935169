"""The read-only tool functions: each takes the server's Policy and the checked arguments, calls the
kit's public API, and returns an :class:`Answer` with its provenance, trust verdict and warnings.

Nothing here builds a command line: hosts are opened with ``kit.connect``, files read by the kit's
own readers, which quote what they send to a shell.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import inspect
from typing import Any

from kit.mcp._policy import Policy, identifier, pattern
from kit.mcp._result import Answer

_ORDER = {"usable": 0, "degraded": 1, "unreliable": 2}
# the Health metrics each profile tool's numbers rest on (Profile.health(): usable / degraded / unreliable)
_SUMMARY_METRICS = ("category_shares", "step_time", "allreduce_share")
_BY_METRICS = {"category": (), "module": ("module_view",), "layer": ("module_view",), "op": ("op_view",)}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _connect(name: str):
    import kit

    return kit.connect(name)


def _file_provenance(host: str, path: str, role: str) -> dict[str, Any]:
    """Where a file came from: the session manifest's word for a local file, else 'unknown' (a file on a
    host is what it is now; the kit cannot say who wrote it)."""
    if host == "local":
        from kit.provenance import provenance_of

        return {"artefact": path, "role": role, **provenance_of(path).to_dict()}
    return {"artefact": f"{host}:{path}", "role": role, "kind": "unknown",
            "note": f"read from host {host} at {_now()}; who wrote it is not recorded"}


# ------------------------------------------------------------------------------------------ host
def fingerprint(policy: Policy, host: str) -> Answer:
    from kit import env

    with _connect(host) as h:
        fp = env.fingerprint(h, timeout=min(policy.timeout_s, 120))
    missing = dict(fp.missing or {})
    return Answer(fp.to_dict(), [{"artefact": f"host {host}", "role": "fingerprint", "kind": "measured",
                                  "how": "kit.env.fingerprint (one shell round trip, one Python probe)",
                                  "when": _now()}],
                  trust="degraded" if missing else "usable",
                  reasons=[f"{k}: not known ({v})" for k, v in missing.items()] or
                  ["every field answered by the host"])


# ---------------------------------------------------------------------------------------- source
def _source_answer(result: dict, host: str, paths: list[str], table: str | None = None,
                   notes: list[str] | None = None) -> Answer:
    return Answer(result, [_file_provenance(host, p, "source") for p in dict.fromkeys(paths)],
                  trust="not assessed", reasons=["source text as read from the host now; no trust check applies"],
                  warnings=[n for n in notes or [] if n], table=table)


def source_slice(policy: Policy, host: str, path: str, start: int, end: int | None = None) -> Answer:
    from kit import source

    path = policy.host_path(host, path)
    with _connect(host) as h:
        sl = source.slice(h, path, start, end)
    return _source_answer(dataclasses.asdict(sl), host, [path], notes=[sl.note])


def source_grep(policy: Policy, host: str, path: str, pattern_: str, context: int = 0, fixed: bool = False,
                ignore_case: bool = False, glob: str = "*.py") -> Answer:
    from kit import source

    path = policy.host_path(host, path)
    glob = pattern(glob, "glob") if glob else None
    with _connect(host) as h:
        hits = source.grep(h, path, pattern(pattern_), context=min(context, 20), regex=not fixed, glob=glob,
                           ignore_case=ignore_case, timeout=min(policy.timeout_s, 60))
    rows = [dataclasses.asdict(m) for m in hits]
    return _source_answer({"matches": rows, "count": len(rows)}, host, [path], table="matches")


def source_find(policy: Policy, host: str, path: str, symbol: str) -> Answer:
    from kit import source

    path = policy.host_path(host, path)
    with _connect(host) as h:
        found = source.find(h, path, identifier(symbol, "symbol"))
    rows = [s.to_dict() for s in found]
    return _source_answer({"symbols": rows, "count": len(rows)}, host, [path], table="symbols")


def source_definition(policy: Policy, host: str, name: str, near: str) -> Answer:
    """Where ``name``, as used in ``near``, is defined (through that file's imports): the predicate
    behind a default (``is_sm100_supported`` from ``server_args.py``) and its source. Imports inside the
    file's package tree are followed by reading files; a module of another installed package is located
    by the host's Python (``find_spec``, which imports that package's parents, never the tool's text)."""
    from kit import source

    near = policy.host_path(host, near)
    with _connect(host) as h:
        d = source.definition(h, identifier(name), near=near)
        scope = source.enclosing(h, d.path, d.line)
    out = dataclasses.asdict(d)
    out["enclosing"] = scope.qualname if scope is not None else None
    return _source_answer(out, host, [near, d.path])


# ---------------------------------------------------------------------------------------- traces
def _paths(policy: Policy, paths: list[str]) -> list[str]:
    """Trace files: each argument a file, or a directory whose ``rank*`` traces are taken (sorted)."""
    out: list[str] = []
    for p in paths:
        real = policy.local_path(p)
        if real.is_dir():
            found = sorted(x for x in real.iterdir() if x.name.startswith("rank") and x.is_file())
            out += [str(x) for x in found] or [str(real)]
        else:
            out.append(str(real))
    return out


def _load(policy: Policy, paths: list[str], reference: str | None = None):
    from kit import profile

    kwargs = {}
    if reference is not None:  # only offered when kit.profile.load takes it (LOAD_TAKES_REFERENCE)
        kwargs["reference"] = str(policy.local_path(reference))
    return profile.load(_paths(policy, paths), **kwargs)


def load_takes_reference() -> bool:
    """Whether kit.profile.load accepts ``reference=`` (the reference-run argument); the trace tools
    offer the parameter exactly when it does."""
    from kit import profile

    return "reference" in inspect.signature(profile.load).parameters


def _health_trust(health, metrics: tuple[str, ...]) -> tuple[str, list[str]]:
    """The worst status among ``metrics`` of a Profile.health(), and one reason per metric not usable."""
    worst, reasons = "usable", []
    for m in metrics:
        v = health.metrics.get(m)
        if v is None:
            continue
        if _ORDER[v["status"]] > _ORDER[worst]:
            worst = v["status"]
        if v["status"] != "usable":
            reasons.append(f"{m}: {v['status']}: {v['reason']}" + (f" (fix: {v['fix']})" if v.get("fix") else ""))
    return worst, reasons or [f"{', '.join(metrics)}: usable"]


def _profile_provenance(p, role: str) -> list[dict[str, Any]]:
    return [{"artefact": f, "role": role, **p.provenance.to_dict()} for f in p.files]


def trace_summary(policy: Policy, paths: list[str], phase: str = "decode", by: str = "category", top: int = 5,
                  reference: str | None = None) -> Answer:
    p = _load(policy, paths, reference)
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
    return Answer(out, _profile_provenance(p, "trace"), verdict, reasons, list(s.warnings), table="rows")


def trace_check(policy: Policy, paths: list[str], reference: str | None = None) -> Answer:
    p = _load(policy, paths, reference)
    h = p.health()
    verdict, reasons = _health_trust(h, tuple(h.metrics))
    return Answer(h.to_dict(), _profile_provenance(p, "trace"), verdict, reasons, list(h.notes) + list(p.warnings))


def trace_compare(policy: Policy, a: list[str], b: list[str], phase: str = "decode",
                  labels: list[str] | None = None) -> Answer:
    from kit import profile

    pa, pb = profile.load(_paths(policy, a)), profile.load(_paths(policy, b))
    la, lb = (labels or ["A", "B"])[:2]
    c = profile.compare(pa, pb, phase=phase, labels=(la, lb))
    out = c.to_dict()
    trust, reasons = "usable", []
    for label, p in ((la, pa), (lb, pb)):
        v, r = _health_trust(p.health(), ("category_shares", "step_time"))
        trust = v if _ORDER[v] > _ORDER[trust] else trust
        reasons += [f"{label}: {x}" for x in r]
    prov = _profile_provenance(pa, f"run {la}") + _profile_provenance(pb, f"run {lb}")
    return Answer(out, prov, trust, reasons, list(c.warnings), table="families")


# ------------------------------------------------------------------------------------------ logs
def _log_provenance(path: str, role: str = "log") -> list[dict[str, Any]]:
    return [_file_provenance("local", path, role)]


def logs_parse(policy: Policy, path: str, table: str | None = None, engine: str | None = None,
               version: str | None = None) -> Answer:
    from kit import logs

    real = str(policy.local_path(path))
    data = logs.read(real, engine=engine, version=version)
    out = data.to_dict(tables=False)
    if table:
        out["rows"] = data.to_dict(tables=True)["tables"].get(table, [])
    trust = "degraded" if data.warnings else "usable"
    reasons = list(data.warnings) or ["every line parsed or counted as unknown/torn"]
    return Answer(out, _log_provenance(real), trust, reasons, list(data.warnings), table="rows" if table else None)


def logs_spec(policy: Policy, path: str, version: str | None = None, k: int | None = None) -> Answer:
    from kit import logs
    from kit.util import frame_records

    real = str(policy.local_path(path))
    data = logs.read(real, version=version, k=k)
    if not len(data.spec):
        return Answer({"records": [], "summary": None}, _log_provenance(real), "undecided",
                      [f"no speculative-decoding lines (engine {data.engine or 'unknown'}, version "
                       f"{data.version or 'unknown'}); nothing to summarise"], list(data.warnings))
    s = logs.spec_summary(data)
    cols = [c for c in ("line", "time", "mean_acceptance_length", "draft_acceptance_rate", "after_idle")
            if c in data.spec]
    out = {"summary": s.to_dict(), "records": frame_records(data.spec[cols])}
    if not s.comparable:
        trust, reasons = "degraded", [f"definition {s.definition}: not comparable with vLLM V1 or SGLang"]
    elif s.warnings:
        trust, reasons = "degraded", list(s.warnings)
    else:
        trust, reasons = "usable", [f"definition applied: {s.definition}"]
    return Answer(out, _log_provenance(real), trust, reasons, list(s.warnings), table="records")


def logs_settings(policy: Policy, paths: list[str]) -> Answer:
    from kit import logs

    real = [str(policy.local_path(p)) for p in paths]
    st = logs.settings(real)
    out = st.to_dict()
    prov = [x for p in real for x in _log_provenance(p, "settings source")]
    return Answer(out, prov, "not assessed",
                  ["the settings the engine itself reported, each with its file:line; kit audit judges them"],
                  table="evidence")


def audit(policy: Policy, paths: list[str]) -> Answer:
    from kit import audit as kit_audit

    real = [str(policy.local_path(p)) for p in paths]
    a = kit_audit.audit(real)
    out = a.to_dict()
    flagged = [f for f in a.findings if f.severity != "info"]
    high = any(f.severity == "high" for f in flagged)
    trust = "usable" if a.clean else "unreliable" if high else "degraded"
    reasons = list(dict.fromkeys(f"{f.severity}: {f.code}: {f.verdict}" for f in flagged)) or ["no finding flagged"]
    prov = [x for p in real for x in _log_provenance(p, "audited artefact")]
    return Answer(out, prov, trust, reasons, list(a.notes), table="findings")


def bench_records(policy: Policy, path: str) -> Answer:
    """A stored kit.bench result (single_stream, load_test) or benchmark tools' output, one row per run
    or level; which reader applies is decided by the file's keys (``_BENCH_READERS``)."""
    real = str(policy.local_path(path))
    data = _json_object(real)
    reader = next((r for keys, r in _BENCH_READERS if data is not None and keys <= set(data)), _printed_bench)
    return reader(real, data)


def _json_object(path: str) -> dict | None:
    import json

    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return d if isinstance(d, dict) else None


def _stored_bench(kind: str):
    def read(path: str, data: dict) -> Answer:
        from kit import bench

        res = bench.read_result(path)  # the one reader of the kit's results (older single-stream files too)
        rows = res.summary()
        flags = list((data.get("validity") or {}).get("flags") or [])
        failed = sum(int(r.get("requests_failed", 0) or r.get("failed", 0) or 0) for r in rows)
        if flags:
            trust, reasons = "unreliable", flags
        elif "validity" in data:
            trust, reasons = ("degraded", [f"{failed} request(s) failed"]) if failed else ("usable", ["run validity "
                                                                                                 "checked, no flag"])
        else:
            trust, reasons = "not assessed", ["no run validity recorded (kit.audit.check_run decides it)"]
        out = {"kind": kind, "url": data.get("url"), "model": data.get("model"), "rows": rows}
        return Answer(out, _log_provenance(path, f"kit.bench {kind} result"), trust, reasons, flags, table="rows")

    return read


def _printed_bench(path: str, data: dict | None) -> Answer:
    from kit import logs
    from kit.util import frame_records

    df = logs.parse_bench(path)
    warnings = list(df.attrs.get("warnings", []))
    out = {"kind": "benchmark output", "rows": frame_records(df), "columns": list(df.columns)}
    return Answer(out, _log_provenance(path, "benchmark output"), "degraded" if warnings else "not assessed",
                  warnings or ["parsed as printed; run validity is kit audit's (check_run) question"],
                  warnings, table="rows")


# a stored result's keys -> its reader; anything else is benchmark tools' printed or JSON output
_BENCH_READERS = (({"repeats", "requests"}, _stored_bench("single_stream")),
                  ({"levels"}, _stored_bench("load_test")))


# ---------------------------------------------------------------------------------------- ledger
def ledger_path(policy: Policy, ledger: str, *, write: bool = False):
    """The ledger file: a ``ledger.json``, or a session directory's ledger as its notebooks use it (a
    posed, project-written ``ledger.json`` stays as it is: verdicts go to the session's working copy,
    ``.kit/ledger.json``, which reading prefers once it exists; only writing creates it)."""
    real = policy.local_path(ledger, must_exist=False)
    if not real.is_dir():
        return real
    if write:
        from kit import session

        return session.open(real).ledger().path
    work = real / ".kit" / "ledger.json"
    return work if work.is_file() else real / "ledger.json"


def ledger_read(policy: Policy, ledger: str, id: str | None = None) -> Answer:  # noqa: A002 - the tool's word
    from kit.ledger import Ledger

    path = ledger_path(policy, ledger)
    policy.local_path(str(path))
    led = Ledger.open(path)
    rows = [h.to_dict() | {"evidence_kind": h.evidence_kind, "provenance_label": h.provenance_label}
            for h in led if id is None or h.id == id]
    prov = [_file_provenance("local", str(path), "ledger")]
    kinds = {r["evidence_kind"] for r in rows}
    trust = "undecided" if any(r["verdict"] == "open" for r in rows) else "usable"
    reasons = [f"{r['id']}: {r['verdict']} on {r['evidence_kind']} evidence" for r in rows]
    warnings = [f"{r['id']}: evidence is {r['evidence_kind']}, not measured" for r in rows
                if r["verdict"] != "open" and r["evidence_kind"] != "measured"]
    out = {"hypotheses": rows, "counts": led.counts(), "evidence_kinds": sorted(kinds)}
    return Answer(out, prov, trust, reasons, warnings, table="hypotheses")


def session_catalogue(policy: Policy, session: str) -> Answer:
    """The runs of a session: trace scenarios with their files and provenance, and its other folders."""
    from kit import session as kit_session

    s = kit_session.open(policy.local_path(session))
    runs = [{"scenario": name, "files": [str(f) for f in files],
             "provenance": s.provenance(files[0]).to_dict(), "measured": s.measured(name) is not None}
            for name, files in s.scenarios().items()]
    folders = {role: sorted(p.name for p in (s.root / sub).iterdir()) if (s.root / sub).is_dir() else []
               for role, sub in kit_session.LAYOUT.items() if role != "traces"}
    prov = [_file_provenance("local", str(s.root), "session")]
    return Answer({"root": str(s.root), "runs": runs, "folders": folders}, prov, "not assessed",
                  ["a listing; each run's trust is trace_check's answer"], table="runs")
