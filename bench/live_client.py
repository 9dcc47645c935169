"""Benchmark: how right ``kit.bench`` is against a server of known timing, beside guidellm.

The server is ``tests/live/timed_server.py`` in its own process: first token 40 ms after the request
arrived, then one token every 10 ms times a log-normal jitter (sigma 0.35), plus 40 ms on every 25th
token; it writes down when it flushed each token. Figures per load level, each from one run:

* TTFT overhead: the client's mean TTFT - the server's (arrival to first flush): what the client's
  own send path adds;
* decode tok/s error: the client's 1 / mean TPOT against the server's, in %;
* p99 ITL error: the client's p99 of all token gaps against the server's, in %;
* late sends (open loop): arrivals sent more than 10 ms after their schedule (the client falling behind);
  client stalls: a level where this process itself stalled over 50 ms is re-run once (``rerun_stalled=1``)
  and flagged if it stalls again; the truth compared is the kept run's.

The newer load kinds run on the same server: multi-turn chat sessions (every turn sent with the
conversation so far) and a replayed Mooncake-format trace (Poisson arrivals written to a file, then
replayed; the server's arrival offsets are compared with the file's).

guidellm 0.3.1 (from ``.kit-cache/guidellm-0.3.1``, installed by the tests) runs the same prompts at
batch 1 on the same server when present; its row is left out, saying why, when it is not.

Usage: ``.venv/bin/python bench/live_client.py``. Prints one Markdown section.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kit.bench import load_test  # noqa: E402
from kit.bench._stats import percentile  # noqa: E402

TARGETS = {"tok_s": 2.0, "p99": 10.0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(truth: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    p = subprocess.Popen([sys.executable, "-m", "tests.live.timed_server", "--port", str(port), "--truth", str(truth),
                          "--ttft-ms", "40", "--itl-ms", "10", "--jitter", "0.35", "--stall-every", "25",
                          "--stall-ms", "40", "--seed", "11"], cwd=ROOT, stdout=subprocess.DEVNULL,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return p, url
        except OSError:
            time.sleep(0.05)
    raise SystemExit("timed server did not start")


def _truth(path: Path, tokens: int = 100, arrivals: list | None = None, since: float = 0.0) -> dict:
    """The server's figures; ``since``: only requests that arrived after it (epoch s): the run the kit
    kept when it re-ran a level because the client itself stalled."""
    reqs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    reqs = [r for r in reqs if len(r["sent"]) == tokens and r["t"] >= since]  # not guidellm's backend checks
    path.unlink()
    if arrivals is not None:
        arrivals.extend(sorted(r["t"] for r in reqs))
    tpot = sum((r["sent"][-1] - r["sent"][0]) / (len(r["sent"]) - 1) for r in reqs) / len(reqs)
    gaps = [b - a for r in reqs for a, b in zip(r["sent"], r["sent"][1:])]
    return {"ttft_ms": sum(r["sent"][0] for r in reqs) / len(reqs) * 1e3, "tok_s": 1 / tpot,
            "itl_p99_ms": percentile(gaps, 99) * 1e3, "n": len(reqs)}


def _kept(res) -> tuple[float, str]:
    """(first send of the kept run, epoch s; a note of the client stalls that re-ran the level)."""
    lv = res.levels[0]
    reruns = lv["summary"]["reruns"]
    note = f" ({reruns} re-run: client stalled)" if reruns else ""
    if lv["summary"]["client_stalled"]:
        note = f" (client stalled: {lv['summary']['client_lag_ms_max']:.0f} ms, flagged)"
    return min(r["start"] for r in lv["requests"]) - 0.001, note


def _row(label: str, ours: dict, true: dict, late="") -> str:
    e_tok = (ours["tok_s"] / true["tok_s"] - 1) * 100
    e_p99 = (ours["itl_p99_ms"] / true["itl_p99_ms"] - 1) * 100
    met = abs(e_tok) <= TARGETS["tok_s"] and abs(e_p99) <= TARGETS["p99"]
    return (f"| {label} | {true['n']} | {ours['ttft_ms'] - true['ttft_ms']:+.2f} | {true['tok_s']:.2f} | "
            f"{ours['tok_s']:.2f} | {e_tok:+.2f} | {true['itl_p99_ms']:.2f} | {ours['itl_p99_ms']:.2f} | "
            f"{e_p99:+.2f} | "
            f"{late} | {'met' if met else 'not met'} |")


def _guidellm(url: str, tmp: Path, n: int, out_tokens: int) -> dict | str:
    exe = ROOT / ".kit-cache" / "guidellm-0.3.1" / "bin" / "guidellm"
    if not exe.is_file():
        return "guidellm is not installed in .kit-cache/guidellm-0.3.1 (run tests/bench/test_independent_client.py)"
    data = tmp / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"g{i} alpha bravo", "output_tokens_count": out_tokens}) + "\n"
                            for i in range(n)))
    res = subprocess.run([str(exe), "benchmark", "run", "--target", url, "--model", "timed-model", "--rate-type",
                          "synchronous", "--max-requests", str(n), "--data", str(data), "--data-args",
                          '{"prompt_column": "prompt", "output_tokens_count_column": "output_tokens_count"}',
                          "--output-path", str(tmp / "g.json"), "--disable-progress", "--disable-console-outputs"],
                         capture_output=True, text=True, timeout=900, cwd=tmp)
    if res.returncode:
        return f"guidellm failed: {(res.stderr or res.stdout).strip().splitlines()[-1][:200]}"
    m = json.loads((tmp / "g.json").read_text())["benchmarks"][0]["metrics"]
    return {"ttft_ms": m["time_to_first_token_ms"]["successful"]["mean"],
            "tok_s": 1e3 / m["inter_token_latency_ms"]["successful"]["mean"],  # guidellm's ITL is vLLM's TPOT
            "itl_p99_ms": float("nan")}


def _trace(tmp: Path, n: int = 60, rate: float = 10.0) -> tuple[Path, list[float]]:
    """A Mooncake-format trace: Poisson arrivals at ``rate``, prompts of 32-256 words, 100 output tokens."""
    import random

    rng, t, rows = random.Random(5), 0.0, []
    for i in range(n):
        rows.append({"timestamp": round(t * 1e3, 3), "input_length": rng.randrange(32, 256), "output_length": 100,
                     "hash_ids": [i % 4]})
        t += rng.expovariate(rate)
    path = tmp / "mooncake.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, [r["timestamp"] / 1e3 for r in rows]


def _new_kinds(url: str, truth: Path, tmp: Path) -> tuple[list[str], str]:
    """Rows for the multi-turn and trace-replay load kinds, and the trace's arrival agreement."""
    rows = []
    print("bench: multi-turn", file=sys.stderr, flush=True)
    res = load_test(url, users=4, turns=4, requests=32, chat=True, max_tokens=100, turn_tokens=64, warmup=0,
                    rerun_stalled=1)
    s, (since, note) = res.summary()[0], _kept(res)
    ours = {"ttft_ms": s["ttft_ms_mean"], "tok_s": 1e3 / s["tpot_ms_mean"], "itl_p99_ms": s["itl_ms_p99"]}
    rows.append(_row("multi-turn chat, 4 users x 4 turns", ours, _truth(truth, since=since), note))
    print("bench: trace replay", file=sys.stderr, flush=True)
    path, want = _trace(tmp)
    res = load_test(url, trace=str(path), warmup=0, rerun_stalled=1)
    s, (since, note) = res.summary()[0], _kept(res)
    ours = {"ttft_ms": s["ttft_ms_mean"], "tok_s": 1e3 / s["tpot_ms_mean"], "itl_p99_ms": s["itl_ms_p99"]}
    got: list[float] = []
    rows.append(_row("trace replay (Mooncake file, ~10 req/s)", ours, _truth(truth, arrivals=got, since=since),
                     str(s["late_sends"]) + note))
    err = max(abs((g - got[0]) - w) for g, w in zip(got, want)) * 1e3
    note = (f"\n\nTrace replay: the server's arrival offsets were within {err:.1f} ms of the file's "
            f"({len(want)} requests over {want[-1]:.2f} s: {err / 10 / want[-1]:.2f} % of the span).")
    return rows, note


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="kit-bench-live-"))
    truth = tmp / "truth.jsonl"
    server, url = _serve(truth)
    rows = []
    try:
        for label, kw in (("batch 1 (c=1)", {"concurrency": 1, "requests": 24}),
                          ("c=16", {"concurrency": 16, "requests": 96}),
                          ("open loop, Poisson 20 req/s", {"rate": 20, "requests": 120}),
                          ("open loop, constant 80 req/s", {"rate": 80, "arrival": "constant", "requests": 240})):
            print(f"bench: {label}", file=sys.stderr, flush=True)
            res = load_test(url, max_tokens=100, prompt_tokens=64, warmup=0, rerun_stalled=1, **kw)
            s, (since, note) = res.summary()[0], _kept(res)
            ours = {"ttft_ms": s["ttft_ms_mean"], "tok_s": 1e3 / s["tpot_ms_mean"], "itl_p99_ms": s["itl_ms_p99"]}
            rows.append(_row(label, ours, _truth(truth, since=since),
                             late=(str(s["late_sends"]) if "rate" in kw else "") + note))
        more, trace_note = _new_kinds(url, truth, tmp)
        rows += more
        print("bench: guidellm", file=sys.stderr, flush=True)
        g = _guidellm(url, tmp, 24, 100)
        if isinstance(g, dict):
            t = _truth(truth)
            rows.append(f"| guidellm 0.3.1, synchronous | {t['n']} | {g['ttft_ms'] - t['ttft_ms']:+.2f} | "
                        f"{t['tok_s']:.2f} | "
                        f"{g['tok_s']:.2f} | {(g['tok_s'] / t['tok_s'] - 1) * 100:+.2f} | {t['itl_p99_ms']:.2f} | "
                        "(no per-gap p99) | | | |")
            g_note = ""
        else:
            g_note = f"\n\nguidellm row left out: {g}."
    finally:
        server.terminate()
        server.wait(10)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("## Live client accuracy: `kit.bench` against a server of known timing, beside guidellm "
          "(`bench/live_client.py`)\n")
    print("`tests/live/timed_server.py` in its own process: first token 40 ms after arrival, then 10 ms x a "
          "log-normal jitter (sigma 0.35) per token, +40 ms on every 25th token, 100 tokens per request, a distinct "
          "prompt per request; the truth is the server's own flush time of each token. TTFT overhead = client mean "
          "TTFT - server mean (arrival to first flush). tok/s = 1 / mean TPOT. Targets: tok/s within "
          f"{TARGETS['tok_s']:g} %, p99 ITL within {TARGETS['p99']:g} % of the truth. Load average at the end: "
          f"{load:.1f}.\n")
    print("| load | requests | TTFT overhead (ms) | true tok/s | measured tok/s | error (%) | true p99 ITL (ms) | "
          "measured p99 ITL (ms) | error (%) | late sends; client stalls | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows) + g_note + trace_note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
