"""Writes the engine-record fixtures of this folder from the engines' documented formats, with planted times.

Run from the repository root: ``python tests/data/engine_records/make_records.py``. Each file names its source
in its first line or first element; the numbers are planted (not measured) so that the tests can read them
back: every request streams 24 tokens, one per chunk; the client sees a gap of 11 ms, of which the engine
spends 10 ms per token (vLLM, detailed traces: forward 7 ms, model execute 8 ms per step); the rest (1 ms)
is outside the engine.

- ``client.json``: the kit's client records (``kit.bench`` result: ``requests`` with ``response_id``, ``start``,
  ``ttft``, ``itl``) of 8 requests.
- ``vllm_otlp_spans.json``: one OTLP/JSON ``ExportTraceServiceRequest`` (the OpenTelemetry protocol's JSON
  encoding: ``resourceSpans`` -> ``scopeSpans`` -> ``spans``, times as ``startTimeUnixNano`` strings,
  attributes as ``{key, value: {doubleValue | intValue (a string) | stringValue}}``) holding vLLM's
  ``llm_request`` spans with the attribute names of ``vllm/tracing.py`` ``SpanAttributes``
  (``gen_ai.request.id``, ``gen_ai.usage.completion_tokens``, ``gen_ai.latency.time_in_queue``,
  ``time_to_first_token``, ``e2e``, ``time_in_model_prefill``/``_decode``/``_inference``, and with
  ``--collect-detailed-traces`` ``time_in_scheduler``, ``time_in_model_forward``, ``time_in_model_execute``;
  seconds; vLLM's v0 engine converts the forward time from ms). Request ids: the response ids.
- ``vllm_otlp_basic.jsonl``: the same spans without the detailed attributes, as JSON lines (one export request
  per line, as the OpenTelemetry collector's file exporter writes).
- ``sglang_request_stats.log``: SGLang server log lines of ``--enable-request-time-stats-logging``
  (``Req Time Stats(rid=..., input len=..., output len=..., type=unified): queue_duration=...ms,
  forward_duration=...ms, start_time=...``, ``srt/managers/schedule_batch.py`` ``log_time_stats`` and
  ``TimeStats.convert_to_duration``), after two ``Decode batch`` lines (the log's coarser level).
- ``vllm_otlp_spans.pb`` is written by ``make_otlp_protobuf.py``: the same spans as the real OpenTelemetry
  OTLP/HTTP exporter posts them in protobuf.
- ``trtllm_iteration_stats.json``: TensorRT-LLM ``/metrics`` iteration statistics (``trtllm-serve`` docs,
  "Metrics Endpoint"; field names of ``IterationStats.to_json_str``: ``iter``, ``iterLatencyMS``,
  ``newActiveRequestsQueueLatencyMS``, ``numActiveRequests``, ``numQueuedRequests``, ``numCompletedRequests``,
  ``timestamp``, ``inflightBatchingStats`` with ``numContextRequests``, ``numGenRequests``, ``numCtxTokens``):
  one context iteration then generation iterations of 10 ms.
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
N, TOKENS, T0 = 8, 24, 1_760_000_000.0
GAP, ENGINE_TOKEN, FORWARD, EXECUTE, QUEUE, PREFILL = 0.011, 0.010, 0.007, 0.008, 0.002, 0.030
VLLM_SOURCE = ("format-written from vllm/tracing.py SpanAttributes and the OTLP/JSON encoding of "
               "ExportTraceServiceRequest; planted times (tests/data/engine_records/make_records.py)")


def _client() -> list[dict]:
    out = []
    for i in range(N):
        start = T0 + 0.5 * i
        ttft = QUEUE + PREFILL + 0.001
        out.append({"ok": True, "response_id": f"chatcmpl-{i:04x}", "start": start, "ttft": ttft,
                    "itl": [GAP] * (TOKENS - 1), "output_tokens": TOKENS, "chunks": TOKENS})
    return out


def _attr(key: str, v) -> dict:
    if isinstance(v, str):
        return {"key": key, "value": {"stringValue": v}}
    if isinstance(v, int):
        return {"key": key, "value": {"intValue": str(v)}}
    return {"key": key, "value": {"doubleValue": v}}


def _span(r: dict, detailed: bool) -> dict:
    arrival = r["start"] + 0.0002
    decode = ENGINE_TOKEN * (TOKENS - 1)
    ttft = QUEUE + PREFILL
    attrs = [_attr("gen_ai.request.id", r["response_id"]), _attr("gen_ai.usage.prompt_tokens", 32),
             _attr("gen_ai.usage.completion_tokens", TOKENS), _attr("gen_ai.latency.time_in_queue", QUEUE),
             _attr("gen_ai.latency.time_to_first_token", ttft), _attr("gen_ai.latency.e2e", ttft + decode),
             _attr("gen_ai.latency.time_in_model_prefill", PREFILL),
             _attr("gen_ai.latency.time_in_model_decode", decode),
             _attr("gen_ai.latency.time_in_model_inference", PREFILL + decode)]
    if detailed:
        attrs += [_attr("gen_ai.latency.time_in_scheduler", 0.0004 * TOKENS),
                  _attr("gen_ai.latency.time_in_model_forward", FORWARD * TOKENS),
                  _attr("gen_ai.latency.time_in_model_execute", EXECUTE * TOKENS)]
    return {"traceId": f"{r['start']:032.0f}"[-32:], "spanId": r["response_id"][-4:].rjust(16, "0"),
            "name": "llm_request", "kind": "SPAN_KIND_SERVER",
            "startTimeUnixNano": str(int(arrival * 1e9)), "endTimeUnixNano": str(int((arrival + ttft + decode) * 1e9)),
            "attributes": attrs}


def _export(spans: list[dict]) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "vllm")]},
                               "scopeSpans": [{"scope": {"name": "vllm.llm_engine"}, "spans": spans}]}]}


def main() -> None:
    client = _client()
    (HERE / "client.json").write_text(json.dumps({"source": "planted client records (make_records.py)",
                                                  "requests": client}, indent=1) + "\n")
    doc = {"_source": VLLM_SOURCE, **_export([_span(r, True) for r in client])}
    (HERE / "vllm_otlp_spans.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [json.dumps({"_source": VLLM_SOURCE + "; without --collect-detailed-traces, JSON lines"})]
    lines += [json.dumps(_export([_span(r, False) for r in client[i:i + 4]])) for i in (0, 4)]
    (HERE / "vllm_otlp_basic.jsonl").write_text("\n".join(lines) + "\n")
    log = ["# source: format-written from SGLang srt/managers/schedule_batch.py log_time_stats and "
           "TimeStats.convert_to_duration (unified mode); planted times (make_records.py)",
           "[2025-10-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 60, token usage: 0.00, cuda graph: True, "
           "gen throughput (token/s): 98.00, #queue-req: 0, ",
           "[2025-10-01 10:00:01 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.00, cuda graph: True, "
           "gen throughput (token/s): 99.00, #queue-req: 0, "]
    for r in client:
        rid = r["response_id"].removeprefix("chatcmpl-")
        fwd_ms = 1e3 * (PREFILL + ENGINE_TOKEN * TOKENS)
        log.append(f"[2025-10-01 10:00:02 TP0] Req Time Stats(rid={rid}, input len=32, output len={TOKENS}, "
                   f"type=unified): queue_duration={1e3 * QUEUE:.2f}ms, forward_duration={fwd_ms:.2f}ms, "
                   f"start_time={r['start'] + 0.0002:.3f}")
    (HERE / "sglang_request_stats.log").write_text("\n".join(log) + "\n")
    iters = [{"_source": "format-written from TensorRT-LLM trtllm-serve /metrics (IterationStats JSON); planted"}]
    for i in range(1, 1 + TOKENS * 2):
        ctx = 1 if i == 1 else 0
        iters.append({"timestamp": "10-01-2025 10:00:02", "iter": i,
                      "iterLatencyMS": 1e3 * (PREFILL if ctx else ENGINE_TOKEN),
                      "newActiveRequestsQueueLatencyMS": 0.0007, "numActiveRequests": 1, "numQueuedRequests": 0,
                      "numCompletedRequests": 0, "maxNumActiveRequests": 64, "gpuMemUsage": 56401920000,
                      "inflightBatchingStats": {"numScheduledRequests": 1, "numContextRequests": ctx,
                                                "numGenRequests": 1 - ctx, "numPausedRequests": 0,
                                                "numCtxTokens": 32 * ctx, "microBatchId": 0,
                                                "avgNumDecodedTokensPerIter": 1.0}})
    (HERE / "trtllm_iteration_stats.json").write_text(json.dumps(iters, indent=1) + "\n")


if __name__ == "__main__":
    main()
