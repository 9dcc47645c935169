"""Engine records coarser than tinyserve's per-step lines, one reader per format (private to ``kit.logs``).

Each engine names its readers in its module (``kit.engines``); :func:`kit.logs.step_records` offers a file to
them and keeps the finest level found. Every reader returns a :class:`kit.logs._steps.StepRecords`, or None when
the file is not its format. OTLP/JSON comes as an ``ExportTraceServiceRequest`` document, JSON lines of them (a
collector's file exporter) or the kit's own receiver's file.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kit.logs._records import TAKEN, LogFormat, columns
from kit.logs._steps import RecordSource, StepRecords

# OTLP span attribute (vllm/tracing.py SpanAttributes) -> request column (seconds unless said)
SPAN_COLUMNS = {
    "gen_ai.request.id": "id",
    "gen_ai.usage.completion_tokens": "output_tokens",
    "gen_ai.usage.prompt_tokens": "prompt_tokens",
    "gen_ai.latency.time_in_queue": "queue",
    "gen_ai.latency.time_to_first_token": "ttft",
    "gen_ai.latency.e2e": "e2e",
    "gen_ai.latency.time_in_scheduler": "scheduler",
    "gen_ai.latency.time_in_model_forward": "forward",
    "gen_ai.latency.time_in_model_execute": "execute",
    "gen_ai.latency.time_in_model_prefill": "prefill",
    "gen_ai.latency.time_in_model_decode": "decode",
    "gen_ai.latency.time_in_model_inference": "inference",
}
REQUEST_SPAN = "llm_request"


def _attr_value(v: dict):
    for key in ("doubleValue", "intValue", "stringValue", "boolValue"):
        if key in v:
            x = v[key]
            if key == "stringValue":
                return str(x)
            try:
                return float(x)   # int64 values are strings in OTLP/JSON
            except (TypeError, ValueError):
                return None
    return None


def _list(x) -> list[dict]:
    """The dicts of a JSON list (anything else: none)."""
    return [i for i in x if isinstance(i, dict)] if isinstance(x, list) else []


def _spans(doc) -> list[dict]:
    docs = doc if isinstance(doc, list) else [doc]
    out = []
    for d in docs:
        if not isinstance(d, dict):
            continue
        for rs in _list(d.get("resourceSpans")):
            for ss in _list(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")):
                out += _list(ss.get("spans"))
    return out


def _ns(s: dict, key: str) -> float:
    try:
        return int(s[key]) / 1e9
    except (KeyError, TypeError, ValueError):
        return np.nan


def request_spans(src: RecordSource) -> StepRecords | None:
    """vLLM's OpenTelemetry ``llm_request`` spans (``--otlp-traces-endpoint``; forward and execute times with
    ``--collect-detailed-traces``) from an OTLP/JSON export (level ``request``): the attributes of
    :data:`SPAN_COLUMNS`, in seconds; the span's start is the arrival."""
    spans = [s for s in _spans(src.json) if s.get("name") == REQUEST_SPAN]
    if not spans:
        return None
    rows, bad = [], 0
    for s in spans:
        row = {"arrival": np.nan}
        for a in _list(s.get("attributes")):
            col = SPAN_COLUMNS.get(str(a.get("key")))
            if col is not None and isinstance(a.get("value"), dict):
                row[col] = _attr_value(a["value"])
        row["arrival"], row["end"] = _ns(s, "startTimeUnixNano"), _ns(s, "endTimeUnixNano")
        timed = not np.isnan(row["arrival"]) and not np.isnan(row["end"])
        bad += row.get("id") in (None, "") or not timed
        if row.get("id") in (None, ""):
            continue
        rows.append(row)
    warnings = [f"{src.name}: {bad} llm_request span(s) without request id or times"] if bad else []
    reqs = pd.DataFrame(rows)
    for c in set(SPAN_COLUMNS.values()) - {"id"}:
        if c in reqs:
            reqs[c] = pd.to_numeric(reqs[c], errors="coerce")
    detailed = {"forward", "execute"} & set(reqs.columns)
    how = "vLLM OpenTelemetry llm_request spans (OTLP JSON)" + (
        "" if detailed else "; no forward/execute times (start vLLM with --collect-detailed-traces for them)")
    return StepRecords(src.name, pd.DataFrame(), reqs, warnings, "request", "vllm", source=how)


CB_LOOP, CB_STEP, CB_FORWARD = "generation_loop", "_generation_step", "model_forward"
CB_FIRST, CB_DONE = "record_ttft_metric", "record_request_completion"


def _cb_request_id(s: dict):
    """The request id a metrics span was called with: its third positional argument (``self``,
    ``created_time``, ``request_id``) or the keyword."""
    attrs = {a.get("key"): a.get("value") for a in _list(s.get("attributes")) if isinstance(a.get("value"), dict)}
    v = attrs.get("args.2") or attrs.get("kwargs.request_id")
    return _attr_value(v) if v else None


def cb_spans(src: RecordSource) -> StepRecords | None:
    """transformers' continuous-batching spans (5.0 to 5.8: ``transformers.utils.metrics``' ``traced``) from OTLP/JSON
    export (level ``request``): one ``generation_loop`` span per scheduler iteration, its ``_generation_step``
    (the batch's forward, logits and sampling) and ``model_forward``; per request, ``record_ttft_metric`` in the
    iteration of its first token and ``record_request_completion`` in that of its last (request id their third
    argument). Per request: ``output_tokens`` the working iterations from the first token's to the last's (a
    decoding request runs in every iteration of the FIFO scheduler), ``decode`` the time between the two calls,
    ``forward`` / ``execute`` the model forward / generation step summed over those iterations (as vLLM's
    ``time_in_model_forward``), ``decode_forward`` / ``decode_execute`` over those after the first token's.
    Arrival and TTFT stay unknown (``created_time`` is ``time.perf_counter()``, not the spans' wall clock)."""
    spans = [s for s in _spans(src.json) if isinstance(s.get("name"), str)]
    loops = {s.get("spanId"): s for s in spans if s["name"] == CB_LOOP}
    if not loops or not any(s["name"] in (CB_FIRST, CB_DONE) for s in spans):
        return None
    parent = {s.get("spanId"): s.get("parentSpanId") for s in spans}

    def loop_of(s: dict):
        sid, hops = s.get("parentSpanId"), 0
        while sid and sid not in loops and hops < 64:
            sid, hops = parent.get(sid), hops + 1
        return sid if sid in loops else None

    work = {sid: {"start": _ns(s, "startTimeUnixNano"), "forward": 0.0, "execute": 0.0} for sid, s in loops.items()}
    for s in spans:
        if s["name"] == CB_STEP and s.get("parentSpanId") in work:   # the manager's step, not the processor's inside it
            work[s["parentSpanId"]]["execute"] += _ns(s, "endTimeUnixNano") - _ns(s, "startTimeUnixNano")
            work[s["parentSpanId"]]["busy"] = True
        elif s["name"] == CB_FORWARD and loop_of(s) in work:
            work[loop_of(s)]["forward"] += _ns(s, "endTimeUnixNano") - _ns(s, "startTimeUnixNano")
            work[loop_of(s)]["forwards"] = True
    order = sorted((w["start"], sid) for sid, w in work.items() if w.get("busy"))
    lost = sum(not work[sid].get("forwards") for _t, sid in order)
    index = {sid: i for i, (_t, sid) in enumerate(order)}
    events: dict[str, dict] = {}
    for s in spans:
        if s["name"] in (CB_FIRST, CB_DONE) and (rid := _cb_request_id(s)) and loop_of(s) in index:
            events.setdefault(str(rid), {})[s["name"]] = (index[loop_of(s)], _ns(s, "startTimeUnixNano"))
    rows, cut = [], 0
    busy = [work[sid] for _t, sid in order]
    for rid, ev in events.items():
        if CB_FIRST not in ev or CB_DONE not in ev or ev[CB_DONE][0] < ev[CB_FIRST][0]:
            cut += 1
            continue
        (i0, t0), (i1, t1) = ev[CB_FIRST], ev[CB_DONE]
        its = busy[i0:i1 + 1]
        rows.append({"id": rid, "arrival": np.nan, "first_token": t0, "end": t1, "output_tokens": float(len(its)),
                     "decode": t1 - t0, "forward": sum(w["forward"] for w in its),
                     "execute": sum(w["execute"] for w in its),
                     "decode_forward": sum(w["forward"] for w in its[1:]),
                     "decode_execute": sum(w["execute"] for w in its[1:])})
    if not rows:
        return None
    warnings = [f"{src.name}: {cut} request(s) without both their first-token and completion spans in order (cut "
                "off by the export's start or end): left out"] if cut else []
    if lost:   # the SDK's batch processor drops spans when its queue is full: a forward would read short
        warnings.append(f"{src.name}: {lost} of {len(order)} iterations without their model_forward span (spans "
                        "dropped by the exporter: raise OTEL_BSP_MAX_QUEUE_SIZE): forward times understated")
    return StepRecords(src.name, pd.DataFrame(), pd.DataFrame(rows), warnings, "request", "transformers",
                       source=f"transformers continuous-batching OpenTelemetry spans (OTLP JSON): {len(order)} "
                              "iterations; per request: output tokens counted in iterations, model forward and "
                              "generation step summed over them")


_REQ = re.compile(r"Req Time Stats\(rid=([^,\s)]+).*?input len=(\d+), output len=(\d+), type=(\w+)\): (.*)$")
_DUR = re.compile(r"(\w+)_duration=(-?\d+(?:\.\d+)?)ms")
_START = re.compile(r"(?:start_time|entry_time)=(\d+(?:\.\d+)?)\b")


def _req_line(line: str, lineno: int, st) -> int:
    m = _REQ.search(line)
    if m is None:
        return 0
    row = {"line": lineno, "id": m.group(1), "prompt_tokens": int(m.group(2)), "output_tokens": int(m.group(3)),
           "mode": m.group(4)}
    for name, ms in _DUR.findall(m.group(5)):
        row[name] = float(ms) / 1e3
    t = _START.search(m.group(5))
    row["arrival"] = float(t.group(1)) if t and float(t.group(1)) > 1e8 else np.nan   # a wall clock, not 0.0
    st.sglang_requests.add(row)
    return TAKEN


SGLANG_REQUESTS = LogFormat(
    "sglang-request-stats", take=(("Req Time Stats(", _req_line),),
    tables={"sglang_requests": columns()},
    build=lambda st, warnings: {"sglang_requests": st.sglang_requests.frame(("id", "output_tokens"))})


def request_stats(src: RecordSource) -> StepRecords | None:
    """SGLang's ``--enable-request-time-stats-logging`` lines, ``Req Time Stats(rid=R, input len=N, output len=M,
    type=unified): queue_duration=Xms, forward_duration=Yms, start_time=T`` (level ``request``)."""
    log = src.log
    t = log.tables.get("sglang_requests") if log is not None else None
    if t is None or not len(t):
        return None
    reqs = t.drop(columns=["line"], errors="ignore").rename(columns={"forward": "forward_total"})
    return StepRecords(src.name, pd.DataFrame(), reqs.reset_index(drop=True), [], "request", "sglang",
                       source="SGLang Req Time Stats lines (--enable-request-time-stats-logging): queue and "
                              "forward (prefill + decode) per request")


def decode_intervals(src: RecordSource) -> StepRecords | None:
    """SGLang's decode lines or vLLM's throughput lines: one row per logging interval (level ``interval``), the
    time per token of one running request, ``#running-req / gen throughput``."""
    log = src.log
    if log is None:
        return None
    for table, running, tput, engine, what in (
            ("decode", "running_req", "gen_throughput", "sglang", "SGLang Decode batch lines"),
            ("throughput", "running", "generation_throughput", "vllm", "vLLM throughput lines")):
        t = log.tables.get(table)
        if t is None or not len(t) or running not in t or tput not in t:
            continue
        r = pd.to_numeric(t[running], errors="coerce")
        g = pd.to_numeric(t[tput], errors="coerce")
        ok = (r > 0) & (g > 0)
        iv = pd.DataFrame({"time": t["time"] if "time" in t else pd.NaT, "period": (r / g).where(ok),
                           "running": r, "throughput": g, "line": t.get("line")})[ok].reset_index(drop=True)
        if not len(iv):
            continue
        dropped = int((~ok).sum())
        warnings = [f"{src.name}: {dropped} {table} line(s) without running requests or throughput (idle), left out"] \
            if dropped else []
        return StepRecords(src.name, pd.DataFrame(), pd.DataFrame(), warnings, "interval", engine, iv,
                           f"{what}: #running / generation throughput per interval, time to the second")
    return None


def iteration_stats(src: RecordSource) -> StepRecords | None:
    """TensorRT-LLM's ``/metrics`` iteration statistics (level ``iteration``): a JSON list of objects with
    ``iter``, ``iterLatencyMS``, ``numActiveRequests``, ``timestamp`` and ``inflightBatchingStats``, or JSON
    lines of such lists (one per poll)."""
    doc = src.json
    items = doc if isinstance(doc, list) else [doc]
    flat = [x for it in items for x in (it if isinstance(it, list) else [it])]
    stats = [x for x in flat if isinstance(x, dict) and "iterLatencyMS" in x and isinstance(x.get("iter"), int)]
    if not stats:
        return None
    rows, seen = [], set()
    for s in stats:
        if s["iter"] in seen:   # polls overlap: /metrics returns what queued since the last call, a client may repeat
            continue
        seen.add(s["iter"])
        ib = s.get("inflightBatchingStats") if isinstance(s.get("inflightBatchingStats"), dict) else {}
        rows.append({"iter": s["iter"], "time": s.get("timestamp"), "latency": s.get("iterLatencyMS"),
                     "running": s.get("numActiveRequests"), "context": ib.get("numContextRequests"),
                     "generation": ib.get("numGenRequests"),
                     "queue_latency_ms": s.get("newActiveRequestsQueueLatencyMS")})
    iv = pd.DataFrame(rows)
    iv["latency"] = pd.to_numeric(iv["latency"], errors="coerce") / 1e3
    ctx = pd.to_numeric(iv["context"], errors="coerce").fillna(0)
    gen = pd.to_numeric(iv["generation"], errors="coerce")
    # a token of a generation request per iteration; an iteration that also ran a context phase is a mixed one
    iv["period"] = iv["latency"].where(gen.fillna(1) > 0)
    iv["mixed"] = ctx > 0
    iv["time"] = pd.to_datetime(iv["time"].astype("string"), errors="coerce", format="mixed")
    for c in ("running", "context", "generation", "queue_latency_ms"):
        iv[c] = pd.to_numeric(iv[c], errors="coerce")
    return StepRecords(src.name, pd.DataFrame(), pd.DataFrame(), [], "iteration", "trtllm",
                       iv.sort_values("iter").reset_index(drop=True),
                       "TensorRT-LLM /metrics iteration statistics: iterLatencyMS per iteration (no request ids)")
