"""kit.bench: the statistics against known values, and single_stream against a real tinyserve server
whose per-token time is known (5 ms at batch 1)."""
from __future__ import annotations

import math

import pytest

import kit
from kit.bench import BenchResult, LoadResult, mean_ci, single_stream, stream_request, welch
from kit.errors import BenchError
from tests.live.conftest import free_port


def test_statistics_match_tables():
    m, lo, hi = mean_ci([-10.0, -12.0, -14.0])        # not all positive: the plain Student-t interval
    assert m == -12.0 and math.isclose(hi - m, 4.302653 * 2 / math.sqrt(3), rel_tol=1e-5)  # t(0.975, 2)
    # positive: the t interval of the logs, back-transformed (exp(mean(log) +- t * sd(log) / sqrt(n)))
    logs = [math.log(x) for x in (10.0, 12.0, 14.0)]
    lm, sd = sum(logs) / 3, math.sqrt(sum((x - sum(logs) / 3) ** 2 for x in logs) / 2)
    m, lo, hi = mean_ci([10.0, 12.0, 14.0])
    assert m == 12.0 and math.isclose(hi, math.exp(lm + 4.302653 * sd / math.sqrt(3)), rel_tol=1e-5)
    assert math.isnan(mean_ci([5.0])[1])
    t, p = welch([1, 2, 3], [4, 5, 6.5])  # scipy.stats.ttest_ind(..., equal_var=False): t=3.4125, p=0.02915
    assert math.isclose(t, 3.4125007, rel_tol=1e-6) and math.isclose(p, 0.0291453, rel_tol=1e-4)
    assert math.isnan(welch([1], [2, 3])[1])


def test_intervals_of_positive_quantities_never_go_below_zero():
    """A TTFT of 7.4 ms from 2 repeats was printed as [-5.1, 19.9]: two repeats give no interval now, and a
    skewed positive sample's interval stays above zero."""
    from kit.bench._result import _ci

    m, lo, hi = mean_ci([6.42, 8.38])
    assert math.isclose(m, 7.4) and math.isnan(lo) and math.isnan(hi)
    row = {"ttft_ms": m, "ttft_ms_lo": lo, "ttft_ms_hi": hi}
    assert _ci(row, "ttft_ms", 1) == "7.4 (too few repeats for an interval: fewer than 3)"
    for sample in ([1.0, 2.0, 19.0], [0.5, 0.6, 9.0, 0.4], [7.0, 7.1, 30.0]):
        m, lo, hi = mean_ci(sample)
        assert 0 < lo <= m <= hi, (sample, lo, m, hi)


def test_single_stream_measures_the_known_latency(tmp_path):
    cmd = "python3 -m tinyserve.launch_server --device cpu --token-ms 5 --load-seconds 0.1"
    from tests.live.conftest import ENGINE

    with kit.server("local", cmd, env={"PYTHONPATH": str(ENGINE)}, port=free_port(), session=tmp_path,
                    progress=False) as s:
        res = single_stream(s.url, requests=3, warmup=1, repeats=2, concurrency=(1, 3), max_tokens=40,
                            save=tmp_path / "b.json")
        chat = stream_request(s.url, model="", prompt="hi there", max_tokens=6, chat=True)
    rows = {r["concurrency"]: r for r in res.summary()}
    one, three = rows[1], rows[3]
    assert one["requests_ok"] == 6 and one["requests_failed"] == 0
    # 5 ms/token configured: tinyserve's steps keep to a grid, so the mean gap holds under load; the median does not
    # (a late step is made up by a short one)
    assert 4.5 <= one["tpot_ms_mean"] <= 6.5 and 150 <= one["decode_tok_s"] <= 220
    assert one["decode_tok_s"] == res.tok_s and math.isnan(one["decode_tok_s_lo"])  # 2 repeats: too few for an interval
    assert three["tpot_ms_mean"] > one["tpot_ms_mean"]  # 3 running requests: +10 % per step by construction
    assert three["output_tok_s"] > 1.8 * one["output_tok_s"]  # batching: more aggregate throughput
    assert all(r["output_tokens"] == 40 and len(r["itl"]) == 39 for r in res.requests)
    assert chat.ok and chat.output_tokens == 6 and chat.ttft > 0
    back = BenchResult.load(tmp_path / "b.json")
    assert BenchResult is LoadResult and res.data["validity"]["valid"] is not False
    assert all(math.isclose(a["decode_tok_s"], b["decode_tok_s"]) for a, b in zip(back.summary(), res.summary()))
    assert list(res.table["concurrency"]) == [1, 3]
    assert res.plot().axes[0].get_ylabel() == "decode tok/s per request"
    assert "decode_tok_s" in res._repr_html_() and "TPOT" in res._repr_html_()


def test_unreachable_server_is_one_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BenchError, match=r"127\.0\.0\.1.*/v1/models"):
        single_stream(url, requests=1, repeats=1)
    r = stream_request(url, model="m", prompt="x", max_tokens=2, timeout=2)
    assert not r.ok and "Connection" in r.error


def test_a_stream_cut_before_done_is_a_failed_request(timed_server, tmp_path):
    """Issue 34: a stream that ended without ``data: [DONE]`` (75 of 200 tokens, clean EOF) was ok=True.
    It is a failed request with its reason, and counted as failed in every figure."""
    url, _ = timed_server(ttft_ms=5, itl_ms=1, cut_after=75, cut_every=2)
    cut = [stream_request(url, model="m", prompt="x", max_tokens=200) for _ in range(2)]
    whole, broken = (cut[0], cut[1]) if cut[0].ok else (cut[1], cut[0])
    assert whole.ok and whole.output_tokens == 200
    assert not broken.ok and broken.error.startswith("IncompleteStream: ") and "[DONE]" in broken.error
    assert "75 token chunks" in broken.error
    res = single_stream(url, requests=4, warmup=0, repeats=1, concurrency=(1,), max_tokens=100)
    row = res.summary()[0]
    assert row["requests_ok"] == 2 and row["requests_failed"] == 2
    assert sum(1 for r in res.requests if not r["ok"] and "IncompleteStream" in r["error"]) == 2
    assert all(r["output_tokens"] == 100 for r in res.requests if r["ok"])
