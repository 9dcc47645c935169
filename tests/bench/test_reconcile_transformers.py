"""The third engine's own run, reconciled from what it publishes: transformers' continuous batching behind
``transformers serve`` on this CPU, benchmarked by the kit at concurrency 1 and 4, its OpenTelemetry spans
collected by the kit's OTLP receiver (``tests/data/engine_records/transformers_cb/``, recorded by
``tools/record_transformers_run.py``; versions in its ``versions.json``). No torch needed: the fixture is read.
The whole live loop is ``tests/live/test_transformers_live.py``."""
from __future__ import annotations

import json

import pytest

import kit
from kit.bench import stream_request
from kit.errors import LogFormatError
from tests.conftest import ROOT

D = ROOT / "tests" / "data" / "engine_records" / "transformers_cb"
CLIENT, SPANS = D / "client.json", D / "spans.jsonl"


def _client() -> dict:
    """The client's requests by response id, both levels (concurrency 1 and 4)."""
    return {r["response_id"]: r for lv in json.loads(CLIENT.read_text())["levels"] for r in lv["requests"]}


def test_the_spans_give_one_record_per_request_with_the_tokens_the_client_counted():
    recs = kit.logs.step_records(SPANS)
    assert (recs.engine, recs.level, len(recs.requests)) == ("transformers", "request", 9)   # 8 and a warm-up
    assert not recs.warnings and "iterations" in recs.source
    client = _client()
    r = recs.requests.set_index("id")
    assert len(client) == 8 and set(client) < set(r.index)
    # tokens counted in the engine's iterations = the tokens the server's usage reported to the client
    assert all(r.loc[i, "output_tokens"] == client[i]["output_tokens"] for i in client)
    assert (r["forward"] > 0).all() and (r["forward"] <= r["execute"]).all() and (r["decode"] > 0).all()
    assert r["arrival"].isna().all()   # created_time is perf_counter(), not the spans' clock: not made up


def test_reconcile_from_the_engine_s_own_run_is_per_request_and_sums_to_the_gap():
    rec = kit.bench.reconcile(CLIENT, SPANS)
    assert not rec.refused and rec.level == "request" and rec.table.attrs["level"] == "request"
    assert rec.warnings[0].startswith("reconciled per request, not per token")
    assert not any("no engine request record" in w or "different number of chunks" in w for w in rec.warnings)
    t = rec.tokens
    assert len(t) == 8
    parts = ["forward", "execute_other", "engine_other", "outside"]
    assert (t[parts].sum(axis=1) - t["gap"]).abs().max() < 1e-9
    # forward and execute over the decode steps, the interval the decode time spans: the loop's own time
    # (scheduling, batch update) around the steps cannot be negative
    assert (t["engine_other"] > 0).all() and (t["execute_other"] > 0).all()
    assert any("over the decode steps only" in w for w in rec.warnings)
    band = rec.table.set_index("part")["median_band"]
    assert band.notna().all()   # 8 requests: the row nearest the median when none lies in p45-p55
    # a CPU forward of a 4-layer model is most of a token; what the engine does not account for is small
    assert band["forward"] > 0.5 * band["client ITL"]
    assert abs(rec.table.set_index("part")["mean"]["outside"]) < 0.1 * rec.table.set_index("part")["mean"]["client ITL"]


def _without(path, gone) -> None:
    """The fixture's export written to ``path`` without the spans ``gone(span)`` names."""
    lines = [json.loads(x) for x in SPANS.read_text().splitlines()]
    for d in lines:
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [s for s in ss["spans"] if not gone(s)]
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))


def test_an_export_cut_before_a_request_completed_drops_and_counts_it(tmp_path):
    benchmarked = sorted(_client())[0]
    cut = tmp_path / "cut.jsonl"
    _without(cut, lambda s: s["name"] == "record_request_completion" and any(
        a["key"] == "args.2" and a["value"].get("stringValue") == benchmarked for a in s["attributes"]))
    recs = kit.logs.step_records(cut)
    assert len(recs.requests) == 8 and "1 request(s) without both" in recs.warnings[0]
    rec = kit.bench.reconcile(CLIENT, cut)
    assert len(rec.tokens) == 7 and any("1 of 8 client requests have no engine request record" in w
                                        for w in rec.warnings)


def test_forward_spans_the_exporter_dropped_are_said(tmp_path):
    """The SDK's batch processor drops spans when its queue is full: an iteration without its model forward
    would make the forward read short, so it is counted and said."""
    first = [json.loads(x) for x in SPANS.read_text().splitlines()]
    one = next(s["spanId"] for d in first for rs in d["resourceSpans"] for ss in rs["scopeSpans"]
               for s in ss["spans"] if s["name"] == "model_forward")
    lossy = tmp_path / "lossy.jsonl"
    _without(lossy, lambda s: s["spanId"] == one)
    recs = kit.logs.step_records(lossy)
    assert any("1 of 73 iterations without their model_forward span" in w and "understated" in w
               for w in recs.warnings)
    assert not kit.logs.step_records(SPANS).warnings


def test_each_engine_reads_only_its_own_spans():
    with pytest.raises(LogFormatError, match="no engine step, request"):
        kit.logs.step_records(SPANS, engine="vllm")
    vllm = ROOT / "tests" / "data" / "engine_records" / "vllm_otlp_spans.json"
    assert kit.logs.step_records(vllm).engine == "vllm"
    with pytest.raises(LogFormatError, match="continuous-batching spans"):
        kit.logs.step_records(vllm, engine="transformers")


def test_a_server_that_ends_on_finish_reason_and_refuses_ignore_eos(timed_server):
    """transformers serve 5.8 ends a stream with its finish_reason chunk (no ``[DONE]``) and answers HTTP 422
    to ``ignore_eos``: the client takes the first as the reply's end and resends without the field; a stream
    cut before its finish_reason is still a failed request."""
    url, _ = timed_server(ttft_ms=5, itl_ms=1, no_done=True, strict_fields=True, cut_after=7, cut_every=2)
    got = [stream_request(url, model="m", prompt="x", max_tokens=12) for _ in range(4)]
    whole = [r for r in got if r.ok]
    assert len(whole) == 2 and all(r.output_tokens == 12 and r.chunks == 12 for r in whole)
    broken = [r for r in got if not r.ok]
    assert len(broken) == 2 and all(r.error.startswith("IncompleteStream: ") and "7 token chunks" in r.error
                                    for r in broken)
