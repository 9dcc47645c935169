#!/usr/bin/env python3
"""Benchmark: kit.profile parse + summary vs HolisticTraceAnalysis 0.5.0 and a bare orjson process.

Measured in one run, each figure the median of N fresh processes (wall clock and peak RSS of the
process and its children, via getrusage(RUSAGE_CHILDREN) in a one-child wrapper):

- kit cold: ``python -m kit profile summary FILES --json`` with an empty cache dir (parse, summary,
  writing the parquet cache);
- kit cached: the same command again (cache hit), and the in-process ``load()+summary()`` time of a
  cache hit (interpreter start and imports excluded: what a notebook re-run pays);
- HTA 0.5.0 (own venv under .kit-cache/, created here if missing): ``TraceAnalysis(trace_dir)`` +
  ``get_gpu_kernel_breakdown(visualize=False)``;
- bare orjson: ``orjson.loads(gzip.decompress(...))`` of the same files (the floor for any reader
  that parses the whole JSON).

Traces: ``../shared/data/traces/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz``
(62 MB JSON, 239k events) and the 8-rank ``../shared/data/traces/param/dlrm_kineto`` set.

Scaling (``BENCH_SCALE_MB``, default ``70,280,1000``): the xdit trace's events repeated, shifted in
time and with fresh correlation ids, written as plain JSON of about that many MB; each is parsed
cold in a fresh process (``load(cache=False) + summary()``, imports excluded from the time) and
the time per MB and peak RSS are reported (target: time per MB flat within 25%).
Prints one Markdown section to stdout; progress goes to stderr.
"""
from __future__ import annotations

import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = (ROOT / ".." / "shared" / "data" / "traces").resolve()
XDIT = SHARED / "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz"
DLRM = sorted((SHARED / "param/dlrm_kineto").glob("*.json.gz"))
HTA_VENV = ROOT / ".kit-cache" / "hta-0.5.0"
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
PY = sys.executable

_WRAP = r"""
import os, resource, subprocess, sys, tempfile, time
page = os.sysconf("SC_PAGE_SIZE")
def tree(pid):
    todo, out = [pid], []
    while todo:
        q = todo.pop()
        out.append(q)
        try:
            for t in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{t}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out
def rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * page
    except OSError:
        return 0
out = tempfile.TemporaryFile()
err = tempfile.TemporaryFile()
t = time.perf_counter()
p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=err)
peak_sum = 0
while p.poll() is None:
    peak_sum = max(peak_sum, sum(rss(q) for q in tree(p.pid)))
    time.sleep(0.01)
w = time.perf_counter() - t
rss_max = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
out.seek(0); err.seek(0)
sys.stdout.write(f"{w} {rss_max} {peak_sum // 1024} {p.returncode}\n")
sys.stdout.write(out.read().decode(errors="replace")[-2000:])
sys.stderr.write(err.read().decode(errors="replace")[-2000:])
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(cmd: list[str], env: dict | None = None, timeout: float = 300.0) -> tuple[float, float, float, str]:
    """(wall s, peak RSS MiB of the largest process, peak RSS MiB summed over the process tree
    (sampled every 10 ms), stdout) of one fresh process."""
    out = subprocess.run([PY, "-c", _WRAP, str(timeout), *cmd], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=timeout + 30)
    first, _, rest = out.stdout.partition("\n")
    wall, rss, rss_sum, rc = first.split()
    if rc != "0":
        raise RuntimeError(f"{cmd[:3]} exited {rc}: {out.stderr[-500:]}")
    return float(wall), int(rss) / 1024.0, int(rss_sum) / 1024.0, rest


def median_of(cmd, env=None, setup=None) -> dict:
    walls, rss, rss_sum, last = [], [], [], ""
    for _ in range(REPEATS):
        if setup:
            setup()
        w, r, r2, last = measure(cmd, env)
        walls.append(w)
        rss.append(r)
        rss_sum.append(r2)
    return {"wall": statistics.median(walls), "rss": statistics.median(rss), "rss_sum": statistics.median(rss_sum),
            "walls": walls, "out": last}


def ensure_hta() -> Path | None:
    py = HTA_VENV / "bin" / "python"
    if py.exists():
        return py
    log("creating HTA 0.5.0 venv under .kit-cache/ (pip install HolisticTraceAnalysis==0.5.0) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True, timeout=300)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "HolisticTraceAnalysis==0.5.0"], check=True, timeout=1800)
    except (subprocess.SubprocessError, OSError) as exc:
        log(f"HTA venv could not be created: {exc}")
        return None
    return py


HTA_SCRIPT = ("import sys, logging; logging.disable(logging.WARNING)\n"
              "from hta.trace_analysis import TraceAnalysis\n"
              "a = TraceAnalysis(trace_dir=sys.argv[1])\n"
              "a.get_gpu_kernel_breakdown(visualize=False)\n")
ORJSON_SCRIPT = ("import gzip, sys, orjson\n"
                 "for f in sys.argv[1:]:\n"
                 "    orjson.loads(gzip.decompress(open(f, 'rb').read()))\n")
REOPEN_SCRIPT = ("import sys, time\n"
                 "from kit import profile\n"
                 "profile.load, profile.Profile  # the lazy imports (pandas) happen here, outside the timing\n"
                 "t = time.perf_counter(); p = profile.load(sys.argv[1:]); s = p.summary()\n"
                 "print(time.perf_counter() - t, all(m['cached'] for m in p.meta['ranks'].values()))\n")


def bench_set(label: str, files: list[Path], hta_py: Path | None) -> dict:
    res: dict = {"label": label, "files": files}
    tmp = Path(tempfile.mkdtemp(prefix="kit-bench-"))
    try:
        cache = tmp / "cache"
        env = {"KIT_CACHE_DIR": str(cache)}
        kit_cmd = [PY, "-m", "kit", "profile", "summary", *map(str, files), "--json"]
        log(f"[{label}] bare orjson ...")
        res["orjson"] = median_of([PY, "-c", ORJSON_SCRIPT, *map(str, files)])
        log(f"[{label}] kit cold ...")
        res["kit_cold"] = median_of(kit_cmd, env, setup=lambda: shutil.rmtree(cache, ignore_errors=True))
        cold_in = []
        for _ in range(REPEATS):
            shutil.rmtree(cache, ignore_errors=True)
            _, _, _, out = measure([PY, "-c", REOPEN_SCRIPT, *map(str, files)], env)
            cold_in.append(float(out.split()[0]))
        res["cold_in_s"] = statistics.median(cold_in)
        log(f"[{label}] kit cached ...")
        res["kit_cached"] = median_of(kit_cmd, env)
        reopen = []
        for _ in range(REPEATS):
            _, _, _, out = measure([PY, "-c", REOPEN_SCRIPT, *map(str, files)], env)
            t, hit = out.split()
            assert hit == "True", "cache was not hit"
            reopen.append(float(t))
        res["reopen_s"] = statistics.median(reopen)
        if hta_py:
            if len(files) == 1:
                d = tmp / "hta_dir"
                d.mkdir()
                os.symlink(files[0], d / files[0].name)
            else:
                d = files[0].parent
            log(f"[{label}] HTA 0.5.0 ...")
            try:
                res["hta"] = median_of([str(hta_py), "-c", HTA_SCRIPT, str(d)])
            except (RuntimeError, subprocess.SubprocessError) as exc:
                log(f"HTA failed: {exc}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


SCALE_SCRIPT = ("import sys, time\n"
                "from kit import profile\n"
                "profile.load, profile.Profile  # the lazy imports (pandas) happen here, outside the timing\n"
                "t = time.perf_counter(); p = profile.load(sys.argv[1], cache=False); s = p.summary()\n"
                "print(time.perf_counter() - t, len(p.kernels))\n")


def make_scaled(src: Path, mb: int, out: Path) -> int:
    """Write ``out``: ``src``'s events repeated (ts shifted, correlation ids renumbered) to ~``mb`` MB."""
    import gzip

    import orjson

    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    evs = doc.pop("traceEvents")
    ts = [e["ts"] for e in evs if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts)) * 1.01 + 1000.0
    one = len(orjson.dumps(evs))
    reps = max(1, math.ceil(mb * 1e6 / one))
    with open(out, "wb") as f:
        f.write(orjson.dumps(doc)[:-1] + b', "traceEvents": [')
        first = True
        for r in range(reps):
            for e in evs:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + r * span
                a = e2.get("args")
                if isinstance(a, dict) and isinstance(a.get("correlation"), int):
                    e2["args"] = {**a, "correlation": a["correlation"] + r * 10_000_000}
                if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + r * 10_000_000
                f.write((b"" if first else b",\n") + orjson.dumps(e2))
                first = False
        f.write(b"]}")
    return out.stat().st_size


def bench_scaling() -> list[dict]:
    sizes = [int(x) for x in os.environ.get("BENCH_SCALE_MB", "70,280,1000").split(",") if x]
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="kit-scale-"))
    try:
        for mb in sizes:
            f = tmp / f"scaled_{mb}.json"
            log(f"[scale] writing ~{mb} MB ...")
            size = make_scaled(XDIT, mb, f)
            log(f"[scale] parsing {size / 1e6:.0f} MB ...")
            walls, rss, ins = [], [], []
            for _ in range(1 if mb >= 500 else REPEATS):
                w, r, _, out = measure([PY, "-c", SCALE_SCRIPT, str(f)], timeout=1200)
                walls.append(w)
                rss.append(r)
                ins.append(float(out.split()[0]))
            rows.append({"mb": size / 1e6, "in_s": statistics.median(ins), "wall": statistics.median(walls),
                         "rss": statistics.median(rss), "runs": len(ins)})
            f.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main() -> int:
    if not XDIT.is_file() or len(DLRM) != 8:
        print("## Profile parse\n\nSkipped: ../shared/data/traces not found.")
        return 0
    hta_py = ensure_hta()
    sets = [bench_set("xdit_sd_3.5 rank 0 (62 MB JSON, 239k events)", [XDIT], hta_py),
            bench_set("dlrm_kineto, 8 ranks (7.3 MB JSON)", DLRM, hta_py)]
    cpu = os.cpu_count()
    lines = ["## Profile parse: `kit profile summary` vs HolisticTraceAnalysis 0.5.0 and bare orjson", "",
             f"Each figure is the median of {REPEATS} fresh processes on this machine ({cpu} CPUs, "
             f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} at the end: other work shares "
             "these CPUs, so compare ratios, not absolute times), wall clock and peak RSS: of the largest process "
             "(`getrusage(RUSAGE_CHILDREN)` in a one-child wrapper) and of the whole process tree (worker "
             "processes included; `/proc` sampled every 10 ms). *kit cold*: `python -m kit profile summary "
             "FILES --json` with an empty `KIT_CACHE_DIR` (parse, categorise, summarise, write the parquet "
             "cache). *kit cached*: the same command on a warm cache; *reopen*: in-process `load()+summary()` "
             "on a cache hit, imports excluded. *HTA*: `TraceAnalysis(trace_dir)` + "
             "`get_gpu_kernel_breakdown(visualize=False)` in its own venv. *orjson*: a process that only "
             "gunzips and `orjson.loads` the same files.", "",
             "| trace | run | wall (s) | peak RSS, largest process (MiB) | peak RSS, process tree (MiB) | wall vs orjson | HTA wall / this |",
             "|---|---|---:|---:|---:|---:|---:|"]
    verdicts = []
    for r in sets:
        o = r["orjson"]
        h = r.get("hta")
        for key, name in (("orjson", "bare orjson process"), ("kit_cold", "kit cold"), ("kit_cached", "kit cached"),
                          ("hta", "HTA 0.5.0")):
            m = r.get(key)
            if not m:
                continue
            vs_h = f"{h['wall'] / m['wall']:.2f}x" if h else "n/a"
            lines.append(f"| {r['label']} | {name} | {m['wall']:.2f} | {m['rss']:.0f} | {m['rss_sum']:.0f} | "
                         f"{m['wall'] / o['wall']:.2f}x | {vs_h} |")
        lines.append(f"| {r['label']} | kit cold, in-process load+summary (imports excluded) | {r['cold_in_s']:.3f} | | | | |")
        lines.append(f"| {r['label']} | kit reopen, in-process load+summary (cache hit) | {r['reopen_s']:.3f} | | | | |")
        kc = r["kit_cold"]
        verdicts.append((r["label"], "cold kit <= 1.5x bare orjson process wall", f"{kc['wall'] / o['wall']:.2f}x",
                         kc["wall"] <= 1.5 * o["wall"]))
        if h:
            verdicts.append((r["label"], "cold kit >= 4x faster than HTA", f"{h['wall'] / kc['wall']:.2f}x",
                             h["wall"] >= 4 * kc["wall"]))
            verdicts.append((r["label"], "kit peak RSS below HTA's (process tree)",
                             f"{kc['rss_sum']:.0f} vs {h['rss_sum']:.0f} MiB", kc["rss_sum"] < h["rss_sum"]))
        verdicts.append((r["label"], "cached reopen <= 0.3 s (in-process)", f"{r['reopen_s']:.3f} s",
                         r["reopen_s"] <= 0.3))
    lines += ["", "| trace | target | this run | met |", "|---|---|---:|---|"]
    for label, target, value, ok in verdicts:
        lines.append(f"| {label} | {target} | {value} | {'met' if ok else 'NOT met'} |")
    if not hta_py:
        lines += ["", "HTA 0.5.0 could not be installed here: the HTA comparisons were not run."]
    lines += ["", "Anchor from `../shared/reference/traces.md` §6 (median of 3, another run): HTA 0.5.0 4.63 s / 454 MiB "
              "and orjson 0.95 s / 477 MiB (decompressed input) on the xdit trace."]
    if os.environ.get("BENCH_SCALE_MB", "70,280,1000"):
        sc = bench_scaling()
        lines += ["", "### Time per MB from 70 MB to 1 GB of JSON (xdit events repeated; plain JSON; in-process "
                  "`load(cache=False)+summary()`, imports excluded; peak RSS of the process)", "",
                  "| JSON size (MB) | runs | parse+summary (s) | s per 100 MB | peak RSS (MiB) | RSS / JSON size |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for r in sc:
            lines.append(f"| {r['mb']:.0f} | {r['runs']} | {r['in_s']:.2f} | {100 * r['in_s'] / r['mb']:.3f} | "
                         f"{r['rss']:.0f} | {r['rss'] / r['mb']:.2f} |")
        per = [r["in_s"] / r["mb"] for r in sc]
        flat = max(per) / min(per) - 1 if per else float("nan")
        lines += ["", f"Time per MB: max/min - 1 = {100 * flat:.0f}% across sizes (target: within 25%: "
                  f"**{'met' if flat <= 0.25 else 'NOT met'}**)."]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
