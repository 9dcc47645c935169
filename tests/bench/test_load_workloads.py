"""kit.bench's load kinds and level watchers against a real HTTP server of known timing
(tests/live/timed_server.py, its own process, which writes down what it received and when):
multi-turn and agentic sessions, trace replay, length distributions, the steady state, the
saturation knee, Pareto sweeps, HTTP phases, /metrics and GPU samples per level."""
from __future__ import annotations

import json
import math
import os
import stat
from collections import defaultdict

import pytest

import kit
from kit.bench import load_test, pareto_sweep, saturation
from kit.bench._searches import pareto_front
from tests.conftest import ROOT
from tests.live.conftest import truth_requests


def _sessions(truth) -> dict[str, list[dict]]:
    """The server's requests grouped by conversation (its first user message), turns in order."""
    by = defaultdict(list)
    for r in truth_requests(truth):
        msgs = json.loads(r["prompt"])
        first = next(m["content"] for m in msgs if m["role"] == "user")
        by[first].append(dict(r, messages=msgs))
    return {k: sorted(v, key=lambda r: len(r["messages"])) for k, v in by.items()}


def test_multi_turn_sends_previous_turns_as_prefix(timed_server):
    url, truth = timed_server(ttft_ms=20, itl_ms=1, prefix_cache=True, full_prompts=True)
    res = load_test(url, users=2, turns=3, requests=6, chat=True, max_tokens=4, turn_tokens=8, warmup=0)
    sessions = _sessions(truth)
    assert len(sessions) == 2 and all(len(v) == 3 for v in sessions.values())
    for turns in sessions.values():
        for prev, cur in zip(turns, turns[1:]):
            # turn k = every message of turn k-1 + the answer the server streamed to it + a new user turn
            assert cur["messages"][:len(prev["messages"])] == prev["messages"]
            assert cur["messages"][len(prev["messages"])] == {"role": "assistant", "content": prev["text"]}
            assert cur["messages"][-1]["role"] == "user" and len(cur["messages"]) == len(prev["messages"]) + 2
            assert cur["cached_tokens"] >= prev["prompt_tokens"]  # the server's prefix cache saw the prefix
    s = res.summary()[0]
    assert s["mode"] == "users" and s["requests_ok"] == 6 and s["distinct_prompts"] == 6
    assert sorted((r["session"], r["turn"]) for r in res.requests) == [(a, b) for a in range(2) for b in range(3)]
    assert s["cache_hit_share"] > 0.4  # later turns are mostly their prefix


def test_agentic_sessions_share_a_prefix(timed_server):
    url, truth = timed_server(ttft_ms=20, itl_ms=1, prefix_cache=True, full_prompts=True)
    res = load_test(url, users=2, turns=2, requests=4, chat=True, max_tokens=3, turn_tokens=6,
                    shared_prefix_tokens=40, think_ms=5, warmup=0)
    firsts = [v[0] for v in _sessions(truth).values()]
    assert len({json.dumps(f["messages"][0]) for f in firsts}) == 1 and firsts[0]["messages"][0]["role"] == "system"
    assert max(f["cached_tokens"] for f in firsts) >= 40  # the second session found the tools prefix cached
    assert res.summary()[0]["requests_ok"] == 4


def _trace_rows(n: int = 24):
    gaps = [x * 2.5 for x in (37, 120, 5, 80, 210, 15, 60, 95, 140, 20, 70, 33, 180, 45, 10, 125, 66, 88, 150, 25,
                              55, 105, 40, 75)]
    t, rows = 1000, []
    for i in range(n):
        rows.append({"t_ms": t, "in": 20 + (i * 37) % 200, "out": 2 + i % 5, "hash_ids": [7, 8] if i % 3 else [9]})
        t += gaps[i % len(gaps)]
    return rows


@pytest.mark.parametrize("fmt", ["mooncake", "weka"])
def test_trace_replay_reproduces_arrivals_and_lengths(timed_server, tmp_path, fmt):
    url, truth = timed_server(ttft_ms=5, itl_ms=1, prefix_cache=True)
    rows = _trace_rows()
    path = tmp_path / f"{fmt}.jsonl"
    recs = ([{"timestamp": r["t_ms"], "input_length": r["in"], "output_length": r["out"], "hash_ids": r["hash_ids"]}
             for r in rows] if fmt == "mooncake" else
            [{"t": r["t_ms"] / 1e3, "type": "n", "model": "m", "in": r["in"], "out": r["out"],
              "hash_ids": r["hash_ids"]} for r in rows])
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    res = load_test(url, trace=str(path), warmup=0)
    got = sorted(truth_requests(truth), key=lambda r: r["t"])
    assert len(got) == len(rows) and res.summary()[0]["mode"] == "trace"
    span = (rows[-1]["t_ms"] - rows[0]["t_ms"]) / 1e3
    # two arrivals a few ms apart may reach the server in either order: offsets compared sorted
    want_at = [(r["t_ms"] - rows[0]["t_ms"]) / 1e3 for r in rows]
    for want, r in zip(want_at, got):
        assert abs(r["t"] - got[0]["t"] - want) <= 0.02 * span, (r["t"] - got[0]["t"], want)
    assert sorted((r["prompt_tokens"], r["max_tokens"]) for r in got) == sorted((w["in"], w["out"]) for w in rows)
    shared = sum(1 for w in rows if w["hash_ids"] == [7, 8])
    assert sum(1 for r in got if r["cached_tokens"] >= 20) >= shared - 1  # the same blocks, the same leading words


def test_weka_conversations_start_together_with_their_own_hashes(timed_server, tmp_path):
    url, truth = timed_server(ttft_ms=5, itl_ms=1, prefix_cache=True)
    conv = [{"t": 100.0, "in": 100, "out": 2, "hash_ids": [1, 2]},
            {"t": 100.6, "in": 150, "out": 2, "hash_ids": [1, 2, 3]}]
    path = tmp_path / "weka.jsonl"
    path.write_text("".join(json.dumps({"id": cid, "requests": conv}) + "\n" for cid in ("c1", "c2")))
    res = load_test(url, trace=str(path), warmup=0)
    got = sorted(truth_requests(truth), key=lambda r: r["t"])
    offsets = [r["t"] - got[0]["t"] for r in got]
    assert offsets[1] < 0.2 and abs(offsets[2] - 0.6) < 0.2 and abs(offsets[3] - 0.6) < 0.2  # side by side
    assert min(r["cached_tokens"] for r in got[:2]) < 5  # hash 1 of c1 is not hash 1 of c2
    assert min(r["cached_tokens"] for r in got[2:]) >= 100  # each second turn finds its conversation's blocks
    assert sorted(r["conversation"] for r in res.requests) == ["c1", "c1", "c2", "c2"]


def test_length_distributions(timed_server):
    url, truth = timed_server(ttft_ms=2, itl_ms=1)
    res = load_test(url, concurrency=4, requests=40, input_lengths=("uniform", 10, 50), output_lengths=[2, 4, 8],
                    warmup=0, seed=3)
    t = truth_requests(truth)
    ins = [r["prompt_tokens"] for r in t]
    assert min(ins) >= 10 and max(ins) <= 50 and math.isclose(sum(ins) / len(ins), 30, rel_tol=0.2)
    assert {r["max_tokens"] for r in t} == {2, 4, 8}
    assert sorted(r["max_tokens"] for r in res.requests) == sorted(r["max_tokens"] for r in t)
    assert res.data["input_lengths"] == ("uniform", 10, 50)


def test_steady_state_excludes_the_warm_up(timed_server):
    url, _ = timed_server(ttft_ms=20, itl_ms=2, warm_requests=6, warm_factor=8)
    res = load_test(url, concurrency=2, requests=40, max_tokens=5, warmup=0)
    lv = res.levels[0]
    steady = lv["steady"]
    assert "warm-up excluded" in steady["said"] and 6 <= steady["excluded"] <= 10, steady["said"]  # 6 were cold
    assert 20 <= steady["figures"]["ttft_ms_p50"] < 30  # the true 20 ms, not the cold 160 ms
    assert lv["summary"]["ttft_ms_mean"] > 1.3 * steady["figures"]["ttft_ms_mean"]  # the cold start, averaged in


def test_saturation_finds_the_knee(timed_server):
    url, truth = timed_server(ttft_ms=60, itl_ms=25, slots=2)  # 3 tokens: ~110 ms a request, 2 at once
    res = saturation(url, start=8, step=4, max_levels=6, requests=24, max_tokens=3, arrival="constant",
                     slo={"e2e_ms": 200}, warmup=0)
    sat = res.data["saturation"]
    served = [r["sent"][-1] for r in truth_requests(truth)]
    capacity = 2 / (sum(served) / len(served))  # what the server could do: slots / service time
    assert abs(sat["knee_rate"] - capacity) <= 4, (sat, capacity)
    assert sat["values"][0] < sat["knee_value"] and "did not rise" in sat["stopped"]
    assert len(res.levels) == len(sat["rates"]) >= 3


def test_pareto_sweep_marks_the_front(timed_server):
    url, _ = timed_server(ttft_ms=5, itl_ms=2)
    res = pareto_sweep(url, concurrencies=[1, 3], lengths=[(16, 4), (16, 12)], requests=6, warmup=0)
    rows = res.summary()
    assert len(rows) == 4 and res.data["pareto"]["front"]
    best = max(rows, key=lambda r: r["output_tok_s"])
    assert best["pareto"] and best["level"] in res.data["pareto"]["front"]
    assert len(res.plot().axes[0].get_lines()) == 2  # one line per length pair
    rows = [{"a": 1, "b": 5}, {"a": 2, "b": 4}, {"a": 1, "b": 3}, {"a": 2, "b": 4}]
    assert pareto_front(rows, ("a", "b")) == [0, 1, 3]


def test_http_phases_and_server_metrics(timed_server):
    url, _ = timed_server(ttft_ms=60, itl_ms=5, head_ms=40)
    res = load_test(url, concurrency=2, requests=6, max_tokens=10, warmup=0, metrics=True)
    for r in res.requests:
        ph = r["phases"]
        assert 36 <= ph["wait_ms"] < r["ttft"] * 1e3, ph  # the headers came 40 ms after, before the first token
        assert ph["receive_ms"] >= r["latency"] * 1e3 - ph["wait_ms"] - ph["send_ms"] - ph["connect_ms"] - 1
    s = res.summary()[0]
    assert 36 <= s["http_wait_ms_mean"] < s["ttft_ms_mean"]
    m = res.levels[0]["server_metrics"][0]
    assert m["counters"]['timed:generation_tokens_total{model="timed-model"}'] == s["output_tokens"] == 60
    assert m["counters"]['timed:requests_total{model="timed-model"}'] == 6
    assert 0 <= m["gauges"]['timed:num_requests_running{model="timed-model"}']["max"] <= 2
    from kit.bench._watch import MetricsSampler

    with MetricsSampler(url + "/elsewhere") as gone:  # a server without /metrics: said, not a crash
        pass
    assert "/elsewhere/metrics: HTTP 404" in gone.summary()["missing"]


def test_gpu_samples_per_level(timed_server, tmp_path, monkeypatch):
    capture = ROOT / "tests" / "data" / "env" / "h200" / "smi_clocks_load.csv"
    exe = tmp_path / "bin" / "nvidia-smi"  # prints the H200 capture, then runs until stopped, as -lms does
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\ncat '{capture}'\nexec sleep 600\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    url, _ = timed_server(ttft_ms=5, itl_ms=1)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    lines = capture.read_text().splitlines()
    for where in (True, kit.connect("local")):  # this machine, and over the kit's host connection
        res = load_test(url, concurrency=2, requests=4, max_tokens=3, warmup=0, gpu=where)
        g = res.levels[0]["gpu"][0]
        assert g["samples"] == len(lines), where
        assert g["power_w_max"] == max(float(x.split(", ")[8].split()[0]) for x in lines)
        assert g["throttled"] and "SW power cap" in g["reasons"] and g["missing"] is None
        assert any("the GPU slowed itself down" in n and "SW power cap" in n for n in res.data["notes"])
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    none = load_test(url, concurrency=1, requests=1, max_tokens=2, warmup=0, gpu=True).levels[0]["gpu"][0]
    assert none["samples"] == 0 and "nvidia-smi not found" in none["missing"]


@pytest.mark.parametrize("text,msg", [
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 9, "input_length": 5}\n',
     r"t.jsonl: line 2: not a trace record .*keys: timestamp, input_length"),
    ('{"t": 0, "in": 5, "out": 2}\nnot json\n', r"t.jsonl: line 2: not a JSON record"),
    ('{"t": "soon", "in": 5, "out": 2}\n', r"t.jsonl: line 1: t/in/out missing or not numbers"),
    ("\n", r"t.jsonl: an empty trace"),
])
def test_bad_trace_is_one_line_error(tmp_path, text, msg):
    from kit.bench._workloads import read_trace
    from kit.errors import BenchError

    (tmp_path / "t.jsonl").write_text(text)
    with pytest.raises(BenchError, match=msg) as err:
        read_trace(tmp_path / "t.jsonl")
    assert "\n" not in str(err.value)
