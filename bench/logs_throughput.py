"""Benchmark: ``kit.logs.read`` throughput (MB/s) and memory on a large mixed serving log.

Generates a log mixing every line kind the parsers read (SGLang prefill/decode lines in several
version formats with rank tags, hybrid Mamba and spec fields, uvicorn access lines, a server_args
dump, vLLM throughput + SpecDecoding lines with process tags and ANSI colours, NCCL_DEBUG lines, a
torn line, benchmark result blocks) into a temporary directory, at two sizes (default 100 MB and
600 MB), and measures for each:

* ``grep -c 'batch'`` over the file: the floor (one C pass over the bytes, page cache warm);
* ``kit.logs.read`` in a fresh Python process: wall time, MB/s, CPU time of the calling process and
  of its worker processes (files of 64 MB or more are scanned by one worker per core over byte
  ranges, see ``kit/logs/_parallel.py``), peak RSS of the calling process and of the largest
  worker, the size of the returned tables, and whether the record counts equal what was generated;
* the smaller file once more with ``KIT_LOG_WORKERS=1`` (one process): the single-core speed.

The returned tables hold one row per record, so they grow with the file; what must stay flat is the
parser's working memory: in the calling process peak RSS - RSS after import - bytes of the returned
tables (``DataFrame.memory_usage(deep=True)``), and the peak RSS of a worker (one piece at a time).
Both are compared between the two sizes. The generated files are deleted afterwards.

Usage: ``.venv/bin/python bench/logs_throughput.py [--sizes 100,600]``. Prints one Markdown section.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MBPS = 50.0
TARGET_MIN_MB = 500

_CHILD = r"""
import json, resource, sys, time
import kit.logs
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
d = kit.logs.read(sys.argv[1])
took, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
tables = sum(int(t.memory_usage(deep=True).sum()) for t in d.tables.values())
print(json.dumps({"seconds": took, "cpu_seconds": cpu, "workers_cpu_seconds": kids.ru_utime + kids.ru_stime,
                  "workers_peak_kb": kids.ru_maxrss, "base_kb": base, "peak_kb": peak, "table_bytes": tables,
                  "counts": d.counts, "torn": d.torn_lines, "unknown": d.unknown_lines, "lines": d.lines}))
"""


def _block(rng: random.Random) -> tuple[str, dict[str, int]]:
    """~1 MB of mixed lines and the number of records of each kind in it.

    Proportions follow what a serving log holds per ~10 s window: SGLang logs a decode line every
    40 decode iterations (~24 lines per 10 s at 100 tok/s), a prefill line and an access line per
    request; vLLM logs one throughput and one SpecDecoding line per 10 s; NCCL lines come in a burst
    at start-up (one per window here, far more than in a real log); a torn line in 1 of 20 windows
    and a benchmark result block in 1 of 50.
    """
    lines: list[str] = []
    counts = {"decode": 0, "prefill": 0, "throughput": 0, "spec": 0, "nccl": 0, "bench": 0, "torn": 0}
    size = 0
    while size < 1_000_000:
        start = len(lines)
        m, s = rng.randrange(60), rng.randrange(60)
        t = f"2026-03-14 10:{m:02d}:{s:02d}"
        n = rng.randrange(1, 64)
        for _ in range(4):
            lines.append(f'[{t}] INFO:     127.0.0.1:{rng.randrange(20000, 60000)} - '
                         '"POST /v1/chat/completions HTTP/1.1" 200 OK\n')
            lines.append(f"[{t} TP0] Prefill batch, #new-seq: 1, #new-token: {rng.randrange(1, 9000)}, #cached-token: "
                         f"{rng.randrange(0, 70000)}, token usage: 0.{rng.randrange(10, 99)}, #running-req: {n}, "
                         f"#queue-req: 0, input throughput (token/s): {rng.uniform(10, 20000):.2f}, "
                         "cuda graph: False\n")
            counts["prefill"] += 1
        for i in range(24):
            if i % 3 == 0:  # EAGLE3 server, sglang >= 0.5.11 format and accept-rate definition, N = 4
                al = rng.uniform(1.0, 4.0)
                lines.append(f"[{t} TP0] Decode batch, #running-req: {n}, #token: {rng.randrange(100, 400000)}, "
                             f"token usage: 0.{rng.randrange(10, 99)}, accept len: {al:.2f}, "
                             f"accept rate: {(al - 1) / 3:.2f}, cuda graph: True, "
                             f"gen throughput (token/s): {rng.uniform(50, 900):.2f}, #queue-req: 0\n")
                counts["spec"] += 1
            elif i % 3 == 1:  # sglang <= 0.5.3 format with DP/TP rank tags
                lines.append(f"[{t} DP1 TP3] Decode batch. #running-req: {n}, #token: {rng.randrange(100, 400000)}, "
                             f"token usage: 0.{rng.randrange(10, 99)}, "
                             f"gen throughput (token/s): {rng.uniform(50, 900):.2f}, #queue-req: 0, \n")
            else:  # hybrid Mamba model, iteration numbers printed
                lines.append(f"[{t} TP0] Decode batch [{rng.randrange(10**6)}], #running-req: {n}, #full token: "
                             f"{rng.randrange(100, 400000)}, full token usage: 0.74, mamba num: {4 * n}, "
                             "mamba usage: 0.80, "
                             f"cuda graph: True, gen throughput (token/s): {rng.uniform(50, 900):.2f}, "
                             "#queue-req: 0, \n")
            counts["decode"] += 1
        lines.append(f"[{t} TP0] Cache flushed successfully!\n")
        lines.append(f"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 03-14 10:{m:02d}:{s:02d} [loggers.py:271] Engine 000: "
                     f"Avg prompt throughput: 0.0 tokens/s, "
                     f"Avg generation throughput: {rng.uniform(10, 90):.1f} tokens/s, "
                     f"Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.{rng.randrange(10)}%, "
                     "Prefix cache hit rate: 0.0%\n")
        lines.append(f"(APIServer pid=1) INFO 03-14 10:{m:02d}:{s:02d} [metrics.py:101] SpecDecoding metrics: Mean "
                     f"acceptance length: 2.62, Accepted throughput: 1.55 tokens/s, Drafted throughput: 2.86 tokens/s, "
                     f"Accepted: 39 tokens, Drafted: 72 tokens, Per-position acceptance rate: 0.708, 0.583, 0.333, "
                     f"Avg Draft acceptance rate: 54.2%\n")
        counts["throughput"] += 1
        counts["spec"] += 1
        lines.append(f"(Worker_TP0 pid=82429) INFO 03-14 10:{m:02d}:{s:02d} [gpu_model_runner.py:2007] "
                     "Model loading took 42.1 GiB\n")
        lines.append(f"node-1:5016:6000 [1] NCCL INFO Channel 0{rng.randrange(8)}/0 : 1[1] -> 2[2] "
                     "via P2P/CUMEM/read\n")
        counts["nccl"] += 1
        if rng.random() < 0.05:
            lines.append("node-1:5016:6000 [1] NCCL ININFO 03-14 10:00:00 [custom_all_reduce.py:37] "
                         "Skipping P2P check.\n")
            counts["torn"] += 1
        if rng.random() < 0.02:
            lines.append("\n============ Serving Benchmark Result ============\n"
                         "Backend:                                 sglang    \n"
                         "Successful requests:                     50        \n"
                         "Benchmark duration (s):                  44.20     \n"
                         "Output token throughput (tok/s):         113.12    \n"
                         "---------------Time to First Token----------------\n"
                         "Mean TTFT (ms):                          363.58    \n"
                         "Median TTFT (ms):                        125.85    \n"
                         "==================================================\n")
            counts["bench"] += 1
        size += sum(len(x) for x in lines[start:])
    return "".join(lines), counts


def generate(path: Path, size_mb: int, seed: int = 0) -> dict[str, int]:
    rng = random.Random(seed)
    blocks = [_block(rng) for _ in range(8)]
    total = {k: 0 for k in blocks[0][1]}
    header = ("[2026-03-14 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=8, "
              "speculative_algorithm='EAGLE3', speculative_num_steps=3, speculative_eagle_topk=1, "
              "speculative_num_draft_tokens=4, attention_backend='flashinfer')\n")
    written = 0
    with open(path, "w") as f:
        f.write(header)
        written += len(header)
        i = 0
        while written < size_mb * 1_000_000:
            text, counts = blocks[i % len(blocks)]
            f.write(text)
            written += len(text)
            for k, v in counts.items():
                total[k] += v
            i += 1
    return total


def measure(path: Path, expected: dict[str, int], workers: int | None = None) -> dict:
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    t0 = time.perf_counter()
    # stdout must be a pipe: GNU grep stops at the first match when its output is /dev/null
    subprocess.run(["grep", "-c", "batch", str(path)], stdout=subprocess.PIPE, check=False)
    grep_s = time.perf_counter() - t0
    env = dict(os.environ)
    env.pop("KIT_LOG_WORKERS", None)
    if workers is not None:
        env["KIT_LOG_WORKERS"] = str(workers)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, cwd=ROOT,
                          env=env)
    if proc.returncode:
        raise SystemExit(f"kit.logs.read failed on {path.name}: {proc.stderr.strip().splitlines()[-1]}")
    r = json.loads(proc.stdout)
    got = dict(r["counts"])
    got["torn"] = r["torn"]
    ok = all(got.get(k, 0) == v for k, v in expected.items())
    mb = size / 1e6
    work_mb = (r["peak_kb"] * 1024 - r["base_kb"] * 1024 - r["table_bytes"]) / 1e6
    cpu = r["cpu_seconds"] + r["workers_cpu_seconds"]
    return {"mb": mb, "grep_s": grep_s, "grep_mbps": mb / grep_s, "read_s": r["seconds"],
            "read_mbps": mb / r["seconds"],
            "cpu_ms_per_mb": cpu * 1000 / mb, "main_cpu_ms_per_mb": r["cpu_seconds"] * 1000 / mb,
            "parallel": r["workers_cpu_seconds"] > 0, "load": os.getloadavg()[0],
            "peak_mb": r["peak_kb"] / 1024, "base_mb": r["base_kb"] / 1024, "table_mb": r["table_bytes"] / 1e6,
            "work_mb": work_mb, "worker_peak_mb": r["workers_peak_kb"] / 1024, "counts_ok": ok, "lines": r["lines"],
            "records": sum(r["counts"].values())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,600", help="file sizes in MB, comma-separated")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="kit-logs-bench-"))
    results = []
    single = None
    try:
        for size in sizes:
            path = tmp / f"mixed_{size}MB.log"
            print(f"logs_throughput: generating {size} MB ...", file=sys.stderr, flush=True)
            expected = generate(path, size)
            print(f"logs_throughput: reading {size} MB ...", file=sys.stderr, flush=True)
            results.append(measure(path, expected))
            if single is None:
                print(f"logs_throughput: reading {size} MB in one process ...", file=sys.stderr, flush=True)
                single = measure(path, expected, workers=1)
            path.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    big = results[-1]
    small = results[0]
    print("## Serving-log parsing throughput (`bench/logs_throughput.py`)\n")
    print("A generated log mixing every line kind `kit.logs` reads, in the proportions of a serving log "
          "(per ~10 s window: 24 SGLang decode lines in three version formats incl. hybrid Mamba and spec "
          "fields, 4 prefill and 4 access lines, one vLLM throughput and one SpecDecoding line with ANSI "
          "colours, one NCCL_DEBUG line, other INFO lines; a torn line in 1 window of 20, a benchmark block "
          "in 1 of 50) is parsed by `kit.logs.read` in a fresh process. Files of 64 MB or more are scanned "
          f"by one worker process per core ({os.cpu_count()} here) over byte ranges cut at line boundaries; "
          "the last row is the smaller file again in one process (`KIT_LOG_WORKERS=1`). The floor is "
          "`grep -c batch` over the same file (page cache warm). CPU = the read's CPU time, calling process "
          "plus workers. Working memory = peak RSS of the calling process − its RSS after import − bytes of "
          "the returned tables (`memory_usage(deep=True)`); a worker's peak RSS includes the pages it shares "
          "with the calling process it was forked from.\n")
    print("| file (MB) | processes | lines | records | counts match | grep -c (MB/s) | kit.logs.read (MB/s, wall) | "
          "read / grep | CPU (ms/MB, all processes) | load avg | peak RSS (MB) | tables (MB) | "
          "working memory (MB) | worker peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results + [single]:
        procs = f"1 + {os.cpu_count()} workers" if r["parallel"] else "1"
        worker = f"{r['worker_peak_mb']:.0f}" if r["parallel"] else "–"
        print(f"| {r['mb']:.0f} | {procs} | {r['lines']:,} | {r['records']:,} | {'yes' if r['counts_ok'] else 'NO'} | "
              f"{r['grep_mbps']:.0f} | {r['read_mbps']:.1f} | {r['read_mbps'] / r['grep_mbps']:.3f} | "
              f"{r['cpu_ms_per_mb']:.1f} | {r['load']:.1f} | {r['peak_mb']:.0f} | {r['table_mb']:.0f} | "
              f"{r['work_mb']:.0f} | {worker} |")
    speed_ok = big["read_mbps"] >= TARGET_MBPS and big["mb"] >= TARGET_MIN_MB
    growth = big["work_mb"] / max(small["work_mb"], 1.0)
    wgrowth = big["worker_peak_mb"] / max(small["worker_peak_mb"], 1.0)
    flat_ok = growth < 1.5 and (wgrowth < 1.5 or not big["parallel"])
    print()
    print(f"- Target: >= {TARGET_MBPS:.0f} MB/s on a >= {TARGET_MIN_MB} MB file: "
          f"{big['read_mbps']:.1f} MB/s on {big['mb']:.0f} MB (wall clock, {os.cpu_count()} cores, 1-minute load "
          f"{big['load']:.1f} when it finished) — **{'met' if speed_ok else 'not met'}**. In one process: "
          f"{single['read_mbps']:.1f} MB/s on {single['mb']:.0f} MB ({single['cpu_ms_per_mb']:.1f} ms of CPU per MB).")
    print(f"- Target: memory flat in file size (the parser's working memory grows < 1.5x for a "
          f"{big['mb'] / small['mb']:.1f}x larger file): calling process {small['work_mb']:.0f} MB -> "
          f"{big['work_mb']:.0f} MB (x{growth:.2f}), largest worker {small['worker_peak_mb']:.0f} MB -> "
          f"{big['worker_peak_mb']:.0f} MB peak RSS (x{wgrowth:.2f}) — **{'met' if flat_ok else 'not met'}**. "
          f"The returned tables themselves grow with the number of records ({small['table_mb']:.0f} MB -> "
          f"{big['table_mb']:.0f} MB for {big['records']:,} records), and so does the calling process's peak RSS "
          f"({small['peak_mb']:.0f} MB -> {big['peak_mb']:.0f} MB).")
    counts_ok = all(r["counts_ok"] for r in results + [single])
    print(f"- Record counts equal to those generated: {'yes' if counts_ok else 'NO'}.")
    print("- The machine is shared (2 cores, other jobs may run); `load avg` is the 1-minute load when each read "
          "finished. CPU per MB is less sensitive to other processes than wall time, but not immune (cores are "
          "shared).")
    return 0 if all(r["counts_ok"] for r in results + [single]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
