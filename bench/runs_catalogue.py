#!/usr/bin/env python3
"""Benchmark: the run catalogue (``kit.runs``) over 1,000 recorded runs (issue 39; target: a query <= 1 s).

1,000 runs are recorded through ``kit.runs.record`` (redaction, hashing, Parquet writes: the path every
recorded command takes): 600 profile summaries (the figures, facts and tables of the real summary of
``tests/data/traces/cpu_eager``, figures scaled per run), 250 benchmark parses (the real rows of
``tests/data/logs/vllm_bench_serve_0.34.txt``, p99 ITL drawn per run) and 150 log parses. Then, each in a
fresh Python process (DuckDB import, connection and the view definitions included, the way ``kit runs
query`` pays them):

- *figure filter*: "which runs of the last 7 days had p99 ITL above 20 ms" (``figures`` view);
- *latest*: ``kit.runs.runs(limit=30)``;
- *aggregate*: mean step time per day and kind over every summary;
- *one run*: ``kit.runs.get(prefix)``.

Each on the store as recording leaves it (loose files merged into packs as they accumulate: ``_store.COMPACT_AT``), with
every run a loose file (compaction turned off: the worst case), and after ``kit runs compact``. The
anchor: the same figure filter done by reading every run file with ``pyarrow.parquet`` and filtering in
pandas (what one would write without DuckDB). Medians of ``BENCH_REPEATS`` (default 5) processes.

Prints one Markdown section to stdout; progress goes to stderr.
"""
from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
N = int(os.environ.get("BENCH_RUNS", "1000"))
_COMPACT_AT = __import__("kit.runs._store").runs._store.COMPACT_AT   # as shipped

QUERIES = {
    "figure filter": "kit.runs.query(\"SELECT run_id, created, value FROM figures WHERE name = 'p99_itl_ms' "
                     "AND value > 20 AND created > now() - INTERVAL 7 DAY\")",
    "latest 30": "kit.runs.runs(limit=30)",
    "aggregate": "kit.runs.query(\"SELECT date_trunc('day', created) AS day, kind, avg(value) AS v, count(*) AS n "
                 "FROM figures WHERE name = 'step_us' GROUP BY ALL\")",
    "one run": "kit.runs.get(RUN)",
    "CLI figure filter": "CLI",
}
CLI = ["runs", "query", "SELECT run_id, created, value FROM figures WHERE name = 'p99_itl_ms' AND value > 20 "
       "AND created > now() - INTERVAL 7 DAY"]
ANCHOR = ("import glob, pyarrow.parquet as pq, pandas as pd\n"
          "t = pd.concat([pq.read_table(f, columns=['run_id', 'created', 'figures']).to_pandas() "
          "for f in glob.glob(STORE + '/runs/*.parquet')])\n"
          "f = t.explode('figures').dropna(subset=['figures'])\n"
          "f = pd.concat([f[['run_id', 'created']].reset_index(drop=True), "
          "pd.DataFrame(f['figures'].tolist())], axis=1)\n"
          "now = pd.Timestamp.now(tz='UTC')\n"
          "out = f[(f['name'] == 'p99_itl_ms') & (f['value'] > 20) & (f['created'] > now - pd.Timedelta(days=7))]\n")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def record_runs(store: Path, compact_at: int) -> tuple[float, list[str], int]:
    """Record N runs into ``store``; returns seconds per run, the ids and how many had p99 ITL > 20 ms."""
    os.environ.update(KIT_RUNS="off", KIT_CACHE_DIR=str(store.parent / "cache"))   # the inputs: not recorded
    from kit import logs, profile, runs
    from kit.runs import _extract, _store
    from kit.util import frame_figures

    _store.COMPACT_AT = compact_at
    s = profile.load(str(ROOT / "tests/data/traces/cpu_eager/trace.json.gz"), cache=False).summary("decode")
    summ = _extract.extract(s, {"phase": "decode"})
    bench_rows = logs.parse_bench(str(ROOT / "tests/data/logs/vllm_bench_serve_0.34.txt"))
    log_data = logs.read(str(ROOT / "notebooks/sample/logs/sglang_0.5.9_tp8_eagle3.log"))
    log_kw = _extract.extract(log_data, {})
    os.environ.update(KIT_RUNS="on", KIT_RUNS_DIR=str(store))
    rng = random.Random(39)
    ids, slow = [], 0
    t0 = time.perf_counter()
    for i in range(N):
        k = rng.random()
        if i % 20 < 12:
            f = [(n, v * (1 + 0.1 * k) if isinstance(v, (int, float)) else v, *rest) for n, v, *rest in summ["figures"]]
            r = runs.record("summary", **{**summ, "figures": f, "label": f"run {i}"})
        elif i % 20 < 17:
            p99 = 5 + 30 * k
            slow += p99 > 20
            r = runs.record("bench", inputs=[str(ROOT / "tests/data/logs/vllm_bench_serve_0.34.txt")],
                            figures=[f for f in frame_figures(bench_rows) if f[0] != "p99_itl_ms"]
                            + [("p99_itl_ms", p99)],
                            tables={"rows": bench_rows}, settings={"rate": i % 7})
        else:
            r = runs.record("logs", **log_kw)
        ids.append(r.run_id)
        if i % 200 == 199:
            log(f"  recorded {i + 1} runs")
    return (time.perf_counter() - t0) / N, ids, slow


def timed(code: str, store: Path, run_id: str) -> float:
    if code == "CLI":   # `kit runs query` as typed in a shell: the whole process, timed from outside
        env = {**os.environ, "KIT_RUNS": "on", "KIT_RUNS_DIR": str(store), "PYTHONPATH": str(ROOT)}
        r0, t0 = os.times(), time.perf_counter()
        got = subprocess.run([PY, "-m", "kit", *CLI], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
        wall, r1 = time.perf_counter() - t0, os.times()
        cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
        return wall, len(got.stdout.strip().splitlines()) - 1, cpu, math.nan
    prog = (f"import time\nt = time.perf_counter()\nimport kit.runs\nSTORE = {str(store)!r}\nRUN = {run_id!r}\n"
            f"out = {code}\nimport sys\ncold, cpu = time.perf_counter() - t, time.process_time()\n"
            f"t = time.perf_counter()\nout = {code}\nwarm = time.perf_counter() - t\n"
            f"sys.stdout.write(f'{{cold}} {{len(out)}} {{cpu}} {{warm}}\\n')\n")
    env = {**os.environ, "KIT_RUNS": "on", "KIT_RUNS_DIR": str(store), "PYTHONPATH": str(ROOT)}
    env.pop("KIT_RUNS_SHARED", None)
    got = subprocess.run([PY, "-c", prog], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    w = got.stdout.split()
    return float(w[0]), int(w[1]), float(w[2]), float(w[3])


def anchor(store: Path) -> float:
    prog = f"import time\nt0 = time.perf_counter()\nSTORE = {str(store)!r}\n{ANCHOR}print(time.perf_counter() - t0)\n"
    return float(subprocess.run([PY, "-c", prog], capture_output=True, text=True, check=True).stdout)


def median_of(fn) -> float:
    return statistics.median(fn() for _ in range(REPEATS))


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="kit-bench-runs-"))
    log(f"recording {N} runs (compaction as shipped) ...")
    per_run, ids, slow = record_runs(tmp / "store", _COMPACT_AT)
    layouts = {"as recorded": tmp / "store"}
    one = {"as recorded": ids[N // 2], "compacted": ids[N // 2]}
    import shutil

    shutil.copytree(tmp / "store", tmp / "compacted")
    from kit.runs import _store

    _store.compact(tmp / "compacted")
    layouts["compacted"] = tmp / "compacted"
    log(f"recording {N} runs, every one a loose file ...")
    one["all loose"] = record_runs(tmp / "loose", 10 ** 9)[1][N // 2]
    layouts["all loose"] = tmp / "loose"
    rows, worst = [], 0.0
    for lname, store in layouts.items():
        files = len(list((store / "runs").glob("*.parquet")))
        for qname, code in QUERIES.items():
            got = [timed(code, store, one[lname]) for _ in range(REPEATS)]
            t = statistics.median(g[0] for g in got)
            cpu = statistics.median(g[2] for g in got)
            warm = statistics.median(g[3] for g in got)
            if lname != "all loose":
                worst = max(worst, t)
            if qname == "figure filter":
                assert got[0][1] == slow, (lname, got[0][1], slow)
            rows.append((lname, files, qname, t, cpu, warm, got[0][1]))
        log(f"  {lname}: done")
    anchors = {lname: median_of(lambda s=store: anchor(s)) for lname, store in layouts.items()}
    size = sum(p.stat().st_size for p in (tmp / "store").rglob("*") if p.is_file())
    out = ["## Run catalogue: SQL over 1,000 recorded runs (`bench/runs_catalogue.py`)", "",
           f"{N} runs recorded through `kit.runs.record` (600 profile summaries with their 6 tables, 250 bench "
           f"parses, 150 log parses; redaction, hashing and Parquet writes included): **{per_run * 1e3:.1f} ms per "
           f"run**; the store holds {size / 2 ** 20:.1f} MiB. Each query in a fresh process (DuckDB import, "
           f"connection and views included), median of {REPEATS}:", "",
           "| store layout | run files | query | fresh process: wall s | CPU s | again in that process: s | rows | "
           "anchor: pyarrow + pandas scan (s) | ratio |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for lname, files, qname, t, cpu, warm, n in rows:
        a = anchors[lname] if qname == "figure filter" else None
        w = "" if warm != warm else f"{warm:.3f}"
        out.append(f"| {lname} | {files} | {qname} | {t:.3f} | {cpu:.3f} | {w} | {n} | {f'{a:.3f}' if a else ''} | "
                   f"{f'{t / a:.2f}x' if a else ''} |")
    load = os.getloadavg()
    out += ["", f"Load average during the queries: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) on "
            f"{os.cpu_count()} cores."]
    verdict = "met" if worst <= 1.0 else f"missed by {worst - 1.0:.2f} s"
    out += ["", f"Target: a catalogue query over 1,000 runs <= 1 s: **{verdict}** (slowest query: "
            f"{worst:.3f} s, the layouts recording leaves; \"all loose\", compaction turned off, is shown for scale). "
            f"CPU s is the query process's own CPU time (imports included), which load on the machine does not "
            f"inflate; \"again\" is the same query repeated in that process (a notebook's case: DuckDB and pandas "
            f"loaded). The figure filter found the {slow} runs recorded with p99 ITL above 20 ms."]
    shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
