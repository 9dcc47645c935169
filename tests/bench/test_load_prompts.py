"""kit.bench's prompts and per-level records against a real HTTP server of known timing
(tests/live/timed_server.py, its own process): distinct prompts counted by the text sent, datasets
read by format, a fresh seed per call, prefix-cache hits from usage, one plot line per load kind,
the client's own stall detected."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kit.bench import load_test, make_prompts, sweep
from kit.bench._prompts import prompt_hash
from kit.errors import BenchError
from tests.live.conftest import truth_requests


def test_distinct_prompts_count_the_texts_sent(timed_server, tmp_path):
    url, truth = timed_server(ttft_ms=5, itl_ms=1)
    data = tmp_path / "four.txt"
    data.write_text("one prompt\ntwo prompt\nthree prompt\nfour prompt\n")
    with pytest.warns(UserWarning, match=r"four.txt: 4 prompts for 12 requests: each sent up to 3 times"):
        res = load_test(url, concurrency=3, requests=12, max_tokens=2, warmup=0, prompts=str(data))
    s = res.summary()[0]
    sent = {r["prompt"] for r in truth_requests(truth)}
    assert len(sent) == 4 and s["distinct_prompts"] == 4 and s["requests_ok"] == 12
    assert any("4 prompts for 12 requests" in n for n in res.data["notes"])
    assert "4 prompts for 12 requests" in res._repr_html_() and "<th>distinct_prompts</th>" in res._repr_html_()
    assert len({r["prompt_hash"] for r in res.requests}) == 4
    assert prompt_hash("a") != prompt_hash(["a"]) and prompt_hash([{"role": "user", "content": "a"}])


def _write_formats(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = [{"prompt": "alpha one"}, {"prompt": "beta two"}, {"prompt": "gamma three"}]
    files = {"one_line.json": json.dumps(recs),
             "per_line.json": "[\n" + ",\n".join(json.dumps(r) for r in recs) + "\n]\n",
             "lines.jsonl": "\n".join(json.dumps(r) for r in recs) + "\n",
             "sharegpt.json": json.dumps([{"id": "x", "conversations": [{"from": "human", "value": r["prompt"]},
                                                                        {"from": "gpt", "value": "ok"}]}
                                          for r in recs] + [{"id": "empty", "conversations": []}]),
             "openai.jsonl": "\n".join(json.dumps({"messages": [{"role": "system", "content": "sys"},
                                                                {"role": "user", "content": r["prompt"]}]})
                                       for r in recs)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    table = pa.Table.from_pylist([{"text": r["prompt"], "n": i} for i, r in enumerate(recs)])
    pq.write_table(table, tmp_path / "hf.parquet")
    with pa.OSFile(str(tmp_path / "data-00000-of-00001.arrow"), "wb") as sink:  # datasets' save_to_disk file
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    return [r["prompt"] for r in recs], list(files) + ["hf.parquet", "data-00000-of-00001.arrow"]


def test_datasets_read_by_format(tmp_path):
    want, names = _write_formats(tmp_path)
    for name in names:
        got = make_prompts(3, source=str(tmp_path / name), seed=1)
        assert got == want, name
    notes: list = []
    make_prompts(3, source=str(tmp_path / "sharegpt.json"), notes=notes)
    assert notes and "1 record(s) with an empty conversation skipped" in notes[0]
    assert make_prompts(3, source=str(tmp_path)) == want  # a save_to_disk folder


@pytest.mark.parametrize("name,text,msg", [
    ("bad.jsonl", '{"prompt": "a"}\nnot json\n', r"bad.jsonl: line 2: not a JSON record"),
    ("bad.json", '[{"prompt": "a"}, 3]', r"bad.json: record 2: a int, not a record"),
    ("nokey.json", '[{"prompt": "a"}, {"title": "b"}]', r"nokey.json: record 2: no prompt .*keys: title"),
    ("trunc.json", '[{"prompt": "a"}, {"prompt": ', r"trunc.json: not a JSON document"),
    ("broken.parquet", "PAR1 not really", r"broken.parquet: not a readable parquet file"),
])
def test_bad_record_is_one_line_error(tmp_path, name, text, msg):
    (tmp_path / name).write_text(text)
    with pytest.raises(BenchError, match=msg) as err:
        make_prompts(2, source=str(tmp_path / name))
    assert "\n" not in str(err.value)


def test_new_seed_per_call_unless_given(timed_server):
    url, truth = timed_server(ttft_ms=5, itl_ms=1)
    a = load_test(url, concurrency=2, requests=4, max_tokens=2, warmup=0)
    b = load_test(url, concurrency=2, requests=4, max_tokens=2, warmup=0)
    assert a.data["seed"] != b.data["seed"] and not a.data["seed_given"]
    assert len({r["prompt"] for r in truth_requests(truth)}) == 8  # the second call sent new prompts
    c = load_test(url, concurrency=2, requests=4, max_tokens=2, warmup=0, seed=a.data["seed"])
    assert c.data["seed_given"] and {r["prompt_hash"] for r in c.requests} == {r["prompt_hash"] for r in a.requests}


def test_prefix_cache_hits_read_from_usage(timed_server):
    url, _ = timed_server(ttft_ms=50, itl_ms=2, prefix_cache=True)
    fresh = load_test(url, concurrency=2, requests=6, max_tokens=4, warmup=0, prompt_tokens=32).summary()[0]
    with pytest.warns(UserWarning, match="1 prompts for 7 requests"):
        same = load_test(url, concurrency=2, requests=6, max_tokens=4, warmup=1, prompts=["one repeated prompt"])
    s = same.summary()[0]
    assert fresh["cache_hit_share"] < 0.1 and fresh["cache_reported_requests"] == 6
    assert s["cache_hit_share"] == 1.0 and s["cached_tokens"] == 6 * 3 and s["distinct_prompts"] == 1


def test_plot_draws_one_line_per_load_kind(timed_server):
    url, _ = timed_server(ttft_ms=5, itl_ms=1)
    res = sweep(url, rates=[20, 40], concurrencies=[1, 2], requests=4, max_tokens=3, warmup=0)
    ax = res.plot().axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["open loop (req/s)", "closed loop (concurrency)"]
    assert [len(line.get_xdata()) for line in ax.get_lines()] == [2, 2]


STOPPER = """
import os, signal, sys, time
pid, path, n, ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
while not os.path.exists(path) or sum(1 for _ in open(path)) < n:
    time.sleep(0.005)
os.kill(pid, signal.SIGSTOP)
time.sleep(ms / 1e3)
os.kill(pid, signal.SIGCONT)
"""


def _plant_stall(truth, after: int, ms: float) -> subprocess.Popen:
    """Stop this test process for ``ms`` once the server has finished ``after`` requests: the client
    stalls while the server keeps its schedule."""
    return subprocess.Popen([sys.executable, "-c", STOPPER, str(os.getpid()), str(truth), str(after), str(ms)])


def _nothing():
    import contextlib

    return contextlib.nullcontext()


@pytest.mark.parametrize("rerun", [1, 0])
def test_client_stall_is_detected(timed_server, rerun):
    url, truth = timed_server(ttft_ms=10, itl_ms=10)
    stopper = _plant_stall(truth, 2, 800)
    with pytest.warns(UserWarning, match="the client itself stalled") if not rerun else _nothing():
        res = load_test(url, concurrency=2, requests=10, max_tokens=25, warmup=0, stall_ms=300, rerun_stalled=rerun)
    assert stopper.wait(30) == 0
    lv, s = res.levels[0], res.summary()[0]
    if rerun:
        first = lv["client"][0]["stalled_attempts"][0]
        assert first["client_lag_ms_max"] > 600 and first["client_stalled"]
        assert s["reruns"] == 1 and not s["client_stalled"] and s["requests_ok"] == 10
        assert len({r["prompt"] for r in truth_requests(truth)}) == 20  # the re-run sent fresh prompts
    else:
        assert s["client_stalled"] and s["client_lag_ms_max"] > 600 and s["reruns"] == 0
        assert any("the client itself stalled" in n for n in res.data["notes"])
