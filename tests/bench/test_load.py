"""kit.bench against a real HTTP server of known timing (tests/live/timed_server.py, its own process):
reasoning streams, jittered and stalled token gaps, a prefix cache, open-loop arrivals, goodput.
The truth is what the server wrote down: the time it flushed each token chunk."""
from __future__ import annotations

import json
import math

import pytest

from kit.bench import LoadResult, load_test, make_prompts, single_stream, stream_request, sweep
from kit.bench._stats import percentile
from kit.errors import BenchError
from tests.live.conftest import truth_requests


def _truth_decode(reqs):
    return [(len(r["sent"]) - 1) / (r["sent"][-1] - r["sent"][0]) for r in reqs]


def test_reasoning_deltas_are_tokens(timed_server):
    for field in ("reasoning_content", "reasoning"):
        url, truth = timed_server(ttft_ms=60, itl_ms=8, reasoning=30, reasoning_field=field)
        res = single_stream(url, chat=True, requests=4, warmup=1, repeats=2, concurrency=(1,), max_tokens=64)
        row = res.summary()[0]
        t = truth_requests(truth)
        # against what the server did (its own record), not its nominal 60 ms: a loaded machine's sleeps overshoot
        true_ttft = 1e3 * percentile([r["sent"][0] for r in t], 50)   # medians: the warm-up request is in the truth
        kit_ttft = 1e3 * percentile([r["ttft"] for r in res.requests], 50)
        assert 60 <= true_ttft and abs(kit_ttft - true_ttft) <= 0.05 * true_ttft + 5, (field, kit_ttft, true_ttft)
        assert math.isclose(row["decode_tok_s"], sum(_truth_decode(t)) / len(t), rel_tol=0.02)
        assert all(r["reasoning_tokens"] == 30 and r["answer_tokens"] == 34 for r in res.requests)
        assert row["reasoning_tokens"] == 30 * row["requests_ok"] and row["answer_tokens"] == 34 * row["requests_ok"]
        one = stream_request(url, model="timed-model", prompt="why", max_tokens=40, chat=True)
        # the answer starts with the 31st token (after 30 reasoning tokens): that long after the first token as the
        # server sent them (the difference leaves out the connection, which a loaded machine makes slow)
        sent = truth_requests(truth)[-1]["sent"]
        want, got = 1e3 * (sent[30] - sent[0]), 1e3 * (one.ttft_answer - one.ttft)
        assert abs(got - want) <= 0.05 * want + 5, (got, want)
        assert sent[30] >= (60 + 30 * 8) / 1e3 and one.ttft < one.ttft_answer


def test_jittered_server_stats_within_tolerance(timed_server, tmp_path):
    url, truth = timed_server(ttft_ms=40, itl_ms=10, jitter=0.35, stall_every=25, stall_ms=40, seed=7)
    res = load_test(url, concurrency=4, requests=32, max_tokens=100, prompt_tokens=64, warmup=0,
                    save=tmp_path / "load.json")
    s = res.summary()[0]
    t = truth_requests(truth)
    assert len(t) == 32 and s["requests_ok"] == 32
    true_tok_s = sum(_truth_decode(t)) / len(t)
    kit_tok_s = 1e3 / s["tpot_ms_mean"]  # mean TPOT -> tok/s of the mean request gap
    true_tpot = sum((r["sent"][-1] - r["sent"][0]) / (len(r["sent"]) - 1) for r in t) / len(t)
    assert math.isclose(s["tpot_ms_mean"], true_tpot * 1e3, rel_tol=0.02), (s["tpot_ms_mean"], true_tpot)
    assert math.isclose(kit_tok_s, 1 / true_tpot, rel_tol=0.02) and true_tok_s > 0
    gaps = [b - a for r in t for a, b in zip(r["sent"], r["sent"][1:])]
    for q in (50, 90, 99):
        assert math.isclose(s[f"itl_ms_p{q}"], percentile(gaps, q) * 1e3, rel_tol=0.10), q
    assert s["itl_ms_p99"] > 40  # the stalls are in the tail, not averaged away
    # against what the server did (its own record), not its nominal 40 ms: a loaded machine's sleeps overshoot
    true_ttft = 1e3 * sum(r["sent"][0] for r in t) / len(t)
    assert 40 <= true_ttft and abs(s["ttft_ms_mean"] - true_ttft) <= 0.1 * true_ttft + 5, (s["ttft_ms_mean"], true_ttft)
    assert s["distinct_prompts"] == 32 and len({r["prompt"] for r in t}) == 32
    back = LoadResult.load(tmp_path / "load.json")
    assert len(back.requests) == 32 and back.summary()[0]["itl_ms_p99"] == s["itl_ms_p99"]
    assert json.loads((tmp_path / "load.json").read_text())["levels"][0]["requests"][0]["itl"]


def test_distinct_prompts_defeat_a_prefix_cache(timed_server):
    url, _ = timed_server(ttft_ms=50, itl_ms=2, prefix_cache=True)
    fresh = load_test(url, concurrency=2, requests=8, max_tokens=8, warmup=2).summary()[0]
    with pytest.warns(UserWarning, match="1 prompts for 9 requests"):  # the repeats are said
        same = load_test(url, concurrency=2, requests=8, max_tokens=8, warmup=1,
                         prompts=["the same prompt"]).summary()[0]
    assert math.isclose(fresh["ttft_ms_p50"], 50, rel_tol=0.10)  # every prompt new: the true TTFT
    assert same["ttft_ms_p50"] < 20 and same["distinct_prompts"] == 1  # 8 requests, one text: flattered
    ids = make_prompts(3, source="random-ids", prompt_tokens=5)
    assert len({p[0] for p in ids}) == 3 and all(len(p) == 5 for p in ids)


def test_open_loop_sweep_goodput_and_plots(timed_server, tmp_path):
    url, truth = timed_server(ttft_ms=20, itl_ms=4)
    res = sweep(url, rates=[8, 25], arrival="constant", requests=20, max_tokens=10, warmup=0,
                slo={"ttft_ms": 500, "tpot_ms": 50})
    rows = res.summary()
    assert [r["level"] for r in rows] == ["8 req/s", "25 req/s"]
    for r, rate in zip(rows, (8, 25)):
        # 20 constant arrivals span 19/rate s, the last one then takes ~56 ms (longer when the loaded client
        # sends late, which it counts: at most a few of 20 here)
        assert 19 / rate <= r["duration_s"] <= 1.3 * (19 / rate + 0.056), r["duration_s"]
        assert r["late_sends"] <= 4 and r["goodput"] == pytest.approx(r["request_throughput"])
    strict = load_test(url, rate=20, arrival="poisson", requests=10, max_tokens=6, warmup=0, slo={"ttft_ms": 5})
    assert strict.summary()[0]["goodput"] == 0 and strict.summary()[0]["slo_met_share"] == 0
    assert res.plot().axes[0].get_xlabel() == "E2E latency p50 (ms)"
    fig = res.plot_cdf("itl_ms")
    assert len(fig.axes[0].get_legend().get_texts()) == 2
    assert "req/s" in res._repr_html_() and "ttft_ms_p99" in res._repr_html_()
    with pytest.raises(BenchError, match="unknown metric"):
        load_test(url, rate=1, requests=1, slo={"latency": 3})
    with pytest.raises(BenchError, match="rate"):
        sweep(url)
    bad = tmp_path / "p.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(BenchError, match="p.jsonl: line 1: not a JSON record"):
        make_prompts(2, source=str(bad))
    good = tmp_path / "d.jsonl"
    good.write_text('{"prompt": "a b"}\n{"conversations": [{"value": "c d"}]}\n')
    with pytest.warns(UserWarning, match="2 prompts for 3 requests"):
        assert make_prompts(3, source=str(good)) == ["a b", "c d", "a b"]


def test_repeats_in_rounds_give_intervals(timed_server):
    url, truth = timed_server(ttft_ms=20, itl_ms=3, jitter=0.2)
    res = sweep(url, concurrencies=[1, 3], requests=6, max_tokens=12, warmup=0, repeats=3)
    one, three = res.summary()
    for row in (one, three):
        assert row["repeats"] == 3 and row["requests_ok"] == 18 and row["distinct_prompts"] == 18
        assert row["output_tok_s_lo"] < row["output_tok_s"] < row["output_tok_s_hi"]
        assert row["itl_ms_p99_lo"] <= row["itl_ms_p99_hi"]
    assert three["output_tok_s"] > 2.4 * one["output_tok_s"]  # 3 streams, no batching cost on this server
    assert sorted({r["repeat"] for r in res.requests}) == [0, 1, 2] and len(res.levels[0]["per_repeat"]) == 3
    assert len({r["prompt"] for r in truth_requests(truth)}) == 36  # every request its own prompt
    assert "3 runs per level" in res.data["covers"]
    assert len(res.plot().axes[0].collections) >= 1  # the error bars
