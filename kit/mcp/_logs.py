"""Serving logs and benchmark output: ``logs_parse``, ``logs_spec``, ``logs_settings``, ``audit``,
``bench_records`` and ``bench_reconcile``; paths arrive checked, each function reads them with the kit's own
readers."""
from __future__ import annotations

import json

from kit import audit as kit_audit
from kit import bench, logs
from kit.mcp._policy import Policy
from kit.mcp._result import Answer, file_provenance
from kit.util import frame_records


def logs_parse(policy: Policy, path: str, table: str | None = None, engine: str | None = None,
               version: str | None = None) -> Answer:
    data = logs.read(path, engine=engine, version=version)
    out = data.to_dict(tables=False)
    if table:
        out["rows"] = data.to_dict(tables=True)["tables"].get(table, [])
    trust = "degraded" if data.warnings else "usable"
    reasons = list(data.warnings) or ["every line parsed or counted as unknown/torn"]
    return Answer(out, [file_provenance("local", path, "log")], trust, reasons, list(data.warnings),
                  table="rows" if table else None)


def logs_spec(policy: Policy, path: str, version: str | None = None, k: int | None = None) -> Answer:
    data = logs.read(path, version=version, k=k)
    if not len(data.spec):
        return Answer({"records": [], "summary": None}, [file_provenance("local", path, "log")], "undecided",
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
    return Answer(out, [file_provenance("local", path, "log")], trust, reasons, list(s.warnings), table="records")


def logs_settings(policy: Policy, paths: list[str]) -> Answer:
    st = logs.settings(paths)
    out = st.to_dict()
    prov = [file_provenance("local", p, "settings source") for p in paths]
    return Answer(out, prov, "not assessed",
                  ["the settings the engine itself reported, each with its file:line; kit audit judges them"],
                  table="evidence")


def audit(policy: Policy, paths: list[str]) -> Answer:
    a = kit_audit.audit(paths)
    out = a.to_dict()
    flagged = [f for f in a.findings if f.severity != "info"]
    high = any(f.severity == "high" for f in flagged)
    trust = "usable" if a.clean else "unreliable" if high else "degraded"
    reasons = list(dict.fromkeys(f"{f.severity}: {f.code}: {f.verdict}" for f in flagged)) or ["no finding flagged"]
    prov = [file_provenance("local", p, "audited artefact") for p in paths]
    return Answer(out, prov, trust, reasons, list(a.notes), table="findings")


def bench_records(policy: Policy, path: str) -> Answer:
    """A stored kit.bench result (single_stream, load_test) or benchmark tools' output, one row per run
    or level; which reader applies is decided by the file's keys (``_BENCH_READERS``)."""
    data = _json_object(path)
    reader = next((r for keys, r in _BENCH_READERS if data is not None and keys <= set(data)), _printed_bench)
    return reader(path, data)


def _json_object(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return d if isinstance(d, dict) else None


def _stored_bench(kind: str):
    def read(path: str, data: dict) -> Answer:
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
        return Answer(out, [file_provenance("local", path, f"kit.bench {kind} result")], trust, reasons, flags,
                      table="rows")

    return read


def _printed_bench(path: str, data: dict | None) -> Answer:
    df = logs.parse_bench(path)
    warnings = list(df.attrs.get("warnings", []))
    out = {"kind": "benchmark output", "rows": frame_records(df), "columns": list(df.columns)}
    return Answer(out, [file_provenance("local", path, "benchmark output")], "degraded" if warnings else "not assessed",
                  warnings or ["parsed as printed; run validity is kit audit's (check_run) question"],
                  warnings, table="rows")


# a stored result's keys -> its reader; anything else is benchmark tools' printed or JSON output
_BENCH_READERS = (({"repeats", "requests"}, _stored_bench("single_stream")),
                  ({"levels"}, _stored_bench("load_test")))


def bench_reconcile(policy: Policy, client: str, engine_log: str, trace: str | None = None) -> Answer:
    """Where a client's inter-token latency goes, against the engine's own step and request records."""
    rec = bench.reconcile(client, engine_log, trace=trace)
    prov = [file_provenance("local", client, "client records"),
            file_provenance("local", engine_log, "engine records")]
    if rec.refused:
        return Answer(rec.to_dict(), prov, "unreliable", [rec.refused], list(rec.warnings), table="table")
    share = rec.residual_share
    said = rec.level == "token" and rec.warnings   # records dropped or flagged at the input step, a clock note
    trust = "usable" if share["median_band"] <= 0.05 and share["slowest_1pct"] <= 0.10 and not said else "degraded"
    reasons = [f"residual {100 * share['median_band']:.1f}% of the median ITL, "
               f"{100 * share['slowest_1pct']:.1f}% in the slowest 1%",
               f"clock offset {rec.offset_ms:+.2f} +/- {rec.offset_bound_ms:.2f} ms", *rec.warnings]
    if rec.level != "token":   # engine records per request / interval / iteration: said, and less sure
        trust = "degraded" if rec.level == "distribution" else trust
        reasons = [rec.warnings[0], *reasons[:1]]
    return Answer(rec.to_dict(), prov, trust, reasons, list(rec.warnings), table="table")
