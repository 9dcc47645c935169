"""``kit bench reconcile`` from what real engines publish, at the finest level each gives, said in the result.

Fixtures (``tests/data/engine_records/``, written by ``make_records.py`` from the engines' documented formats,
each naming its source) plant one split: the client's gap 11 ms, the engine's 10 ms per token (vLLM with
detailed traces: forward 7 ms, model execute 8 ms), 1 ms outside the engine. Real SGLang decode lines
(``../shared/data``) give records per interval."""
from __future__ import annotations

import json
import time

import pytest

import kit
from kit.errors import LogFormatError
from tests.conftest import ROOT

D = ROOT / "tests" / "data" / "engine_records"
CLIENT = D / "client.json"


def _p50(rec) -> dict:
    """Each part around the median: the band of rows around the median client gap (named ``p50`` or
    ``median_band``), or the median itself where the reconciliation compares distributions."""
    t = rec.table.set_index("part")
    return t["median_band" if "median_band" in t else "p50"].to_dict()


def test_vllm_otlp_spans_with_detailed_traces_split_the_token_per_request():
    recs = kit.logs.step_records(D / "vllm_otlp_spans.json")
    assert (recs.engine, recs.level, len(recs.requests)) == ("vllm", "request", 8)
    assert recs.requests["forward"].iloc[0] == pytest.approx(0.007 * 24)
    rec = kit.bench.reconcile(CLIENT, D / "vllm_otlp_spans.json")
    assert not rec.refused and rec.level == "request" and rec.table.attrs["level"] == "request"
    p = _p50(rec)
    assert p["forward"] == pytest.approx(7.0) and p["execute_other"] == pytest.approx(1.0)
    assert p["engine_other"] == pytest.approx(2.0) and p["outside"] == pytest.approx(1.0)
    assert p["residual"] == pytest.approx(0.0, abs=1e-9) and p["client ITL"] == pytest.approx(11.0)
    assert rec.warnings[0].startswith("reconciled per request, not per token")
    assert "8 requests" in repr(rec) and rec.to_dict()["level"] == "request"


def test_vllm_spans_without_detailed_traces_as_json_lines():
    rec = kit.bench.reconcile(CLIENT, D / "vllm_otlp_basic.jsonl")
    p = _p50(rec)
    assert rec.level == "request" and p["engine_decode"] == pytest.approx(10.0) and p["outside"] == pytest.approx(1.0)
    assert "--collect-detailed-traces" in rec.warnings[0]


def test_sglang_request_stats_are_the_finest_level_of_its_log():
    recs = kit.logs.step_records(D / "sglang_request_stats.log")
    assert (recs.engine, recs.level, len(recs.requests)) == ("sglang", "request", 8)
    assert "sglang per interval" in recs.source    # its Decode lines are there too, and coarser
    rec = kit.bench.reconcile(CLIENT, recs)
    p = _p50(rec)
    assert p["engine_forward"] == pytest.approx((30 + 240) / 24)   # forward duration includes the prefill: said
    assert any("includes its prefill" in w for w in rec.warnings)


def test_trtllm_iteration_stats_are_compared_as_distributions():
    recs = kit.logs.step_records(D / "trtllm_iteration_stats.json")
    assert (recs.engine, recs.level, len(recs.intervals)) == ("trtllm", "iteration", 48)
    rec = kit.bench.reconcile(CLIENT, recs)
    assert rec.level == "distribution" and "name no request" in rec.warnings[0]
    p = _p50(rec)
    assert p["engine_period"] == pytest.approx(10.0) and p["outside"] == pytest.approx(1.0)  # the context step left out


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_sglang_decode_lines_reconcile_per_interval(tmp_path, utc):
    """Decode lines on the engine's clock (printed to the second) hold the client's gaps of their interval."""
    t0 = 1_760_000_000
    lines = [f"[{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(t0 + s))} TP0] Decode batch. #running-req: 1, "
             f"#token: {40 * s}, token usage: 0.00, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0, "
             for s in range(0, 7)]
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    recs = kit.logs.step_records(log)
    assert (recs.engine, recs.level) == ("sglang", "interval")
    rec = kit.bench.reconcile(CLIENT, recs)
    assert rec.level == "interval" and len(rec.tokens) >= 3
    p = _p50(rec)
    assert p["engine_period"] == pytest.approx(10.0) and p["outside"] == pytest.approx(1.0)


@pytest.mark.shared_data
def test_real_sglang_decode_lines_give_interval_records(shared_data):
    log = shared_data / "logs" / "sglang_0.5.3post3_eagle3_decode_issue11948.log"
    recs = kit.logs.step_records(log)
    assert recs.level == "interval" and recs.engine == "sglang" and len(recs.intervals) >= 3
    assert (recs.intervals["period"] > 0).all()
    rec = kit.bench.reconcile(CLIENT, recs)   # another run's client: no interval holds its gaps
    assert rec.level == "distribution" and not rec.refused


def test_a_file_no_engine_reads_names_what_each_needs(tmp_path):
    f = tmp_path / "other.json"
    f.write_text('{"resourceSpans": [], "x": 1}')
    with pytest.raises(LogFormatError) as err:
        kit.logs.step_records(f)
    msg = str(err.value)
    assert str(f) in msg and "\n" not in msg
    assert "TINYSERVE_STEP_RECORDS=1" in msg and "--otlp-traces-endpoint" in msg and "/metrics" in msg


def test_hostile_records_are_dropped_and_counted_not_a_traceback(tmp_path):
    span = {"name": "llm_request", "startTimeUnixNano": "x", "attributes": [
        "junk", {"key": "gen_ai.request.id", "value": {"stringValue": "chatcmpl-0000"}},
        {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "many"}}, {"key": ["x"], "value": 3}]}
    f = tmp_path / "spans.json"
    f.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span, {"name": "llm_request"}, 7]}]},
                                               "x", {"scopeSpans": "y"}]}))
    recs = kit.logs.step_records(f)
    assert recs.level == "request" and len(recs.requests) == 1 and "2 llm_request span(s)" in recs.warnings[0]
    rec = kit.bench.reconcile(CLIENT, recs)   # the one request lacks its token count: refused, said
    assert rec.refused and "response id" in rec.refused
    it = tmp_path / "iters.json"
    it.write_text(json.dumps([{"iter": [1], "iterLatencyMS": 3}, {"iter": 2, "iterLatencyMS": "slow",
                                                                   "inflightBatchingStats": "x", "timestamp": 5},
                              {"iter": 3, "iterLatencyMS": 10.0}]))
    recs = kit.logs.step_records(it)
    assert recs.level == "iteration" and len(recs.intervals) == 2
    assert recs.intervals["period"].dropna().tolist() == [0.01]


def test_torn_sglang_request_stats_lines_are_not_a_traceback(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("[2025-10-01 10:00:02 TP0] Req Time Stats(rid=ab, input len=3, output len=5, type=unified): "
                   "queue_duration=1.2.3ms, forward_duration=50.00ms, start_time=1.2.3\n"
                   "[2025-10-01 10:00:02 TP0] Req Time Stats(rid=cd, input len=3, output len=5, type=unified): "
                   "queue_duration=0.50ms, forward_duration=40.00ms, start_time=0.0\n")
    recs = kit.logs.step_records(log)
    r = recs.requests.set_index("id")
    assert r.loc["ab", "forward_total"] == pytest.approx(0.05) and r.loc["cd", "queue"] == pytest.approx(0.0005)
    assert r["arrival"].isna().all()    # start_time=0.0: a perf counter, not a wall clock


def _post(url: str, body: bytes, kind: str) -> int:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": kind})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_kits_otlp_receiver_keeps_what_a_real_exporter_posts(tmp_path):
    """``vllm_otlp_spans.pb``: the body the OpenTelemetry OTLP/HTTP exporter posted (make_otlp_protobuf.py)."""
    pb = (D / "vllm_otlp_spans.pb").read_bytes()
    with kit.bench.otlp_receiver(tmp_path / "spans.jsonl") as rx:
        assert _post(rx.endpoint, pb, "application/x-protobuf") == 200
        assert _post(rx.endpoint, json.dumps({"resourceSpans": []}).encode(), "application/json") == 200
        assert _post(rx.endpoint, b"\x0a\xff\xff", "application/x-protobuf") == 400      # truncated: refused
        assert _post(rx.endpoint.replace("/v1/traces", "/v1/logs"), pb, "application/x-protobuf") == 400
    assert (rx.exports, rx.refused) == (2, 2)
    recs = kit.logs.step_records(tmp_path / "spans.jsonl")
    assert (recs.engine, recs.level, len(recs.requests)) == ("vllm", "request", 8)
    p = _p50(kit.bench.reconcile(CLIENT, recs))
    assert p["forward"] == pytest.approx(7.0) and p["outside"] == pytest.approx(1.0)
    with pytest.raises(LogFormatError, match="not an OTLP trace export"):
        kit.logs.otlp_json(b"\x0f\x01")


def test_vllm_throughput_lines_without_a_year_reconcile_per_interval(tmp_path, utc):
    t0 = 1_760_000_000
    lines = [f"INFO {time.strftime('%m-%d %H:%M:%S', time.gmtime(t0 + s))} [loggers.py:123] Engine 000: Avg prompt "
             "throughput: 0.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
             "GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%" for s in range(0, 7)]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    recs = kit.logs.step_records(log)
    assert (recs.engine, recs.level) == ("vllm", "interval")
    rec = kit.bench.reconcile(CLIENT, recs)
    assert rec.level == "interval" and _p50(rec)["outside"] == pytest.approx(1.0)
