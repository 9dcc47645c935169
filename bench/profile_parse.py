#!/usr/bin/env python3
"""Benchmark: the trace reader (kit profile summary) vs a bare orjson parse, HolisticTraceAnalysis 0.5.0,
the decoders it could use, compare() and the cache; issue 21's targets.

Inputs (built here under a temp dir): the xdit_sd_3.5 rank-0 trace of
``../shared/data/traces/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz`` written as plain
JSON (57 MB, 239k events) and the same events repeated x4 (ts shifted, correlation ids renumbered:
228 MB); the scaling rows repeat them up to ~1 GB. Every figure is the median of ``BENCH_REPEATS``
(default 3) fresh processes, wall clock and peak RSS (of the largest process: getrusage(RUSAGE_CHILDREN)
in a one-child wrapper; and of the whole process tree, /proc sampled every 10 ms).

- *bare orjson*: a process that only reads the file and ``orjson.loads`` it (the floor for any reader
  that parses the whole JSON);
- *kit cold*: ``python -m kit profile summary FILE --json`` with an empty ``KIT_CACHE_DIR`` (parse,
  attribution, summary, writing the cache); *kit cached*: the same command again;
- *reopen*: in-process ``load()+summary()`` on a cache hit, imports excluded;
- *HTA 0.5.0*: ``TraceAnalysis(trace_dir)`` + ``get_gpu_kernel_breakdown(visualize=False)``, in its
  own venv (``$BENCH_HTA_VENV``, default ``hta-0.5.0-venv`` under the temp dir; created with pip from
  PyPI when missing, never in the project's environment);
- *decoders*: the reader alone (``kit.profile.reading._read.read_raw``, in-process time of a fresh process)
  with each decoder (``KIT_TRACE_DECODER=msgspec``: typed ``Struct``s of the used fields;
  ``orjson``: byte prefilter + orjson), against ``orjson.loads`` and ``msgspec.json.decode`` (untyped)
  of the same bytes;
- *compare*: both profiles loaded in one process (cache off), then ``compare(a, b, phase="all")``;
  the trace files are then deleted and the comparison repeated: the result must be identical;
- *scaling*: in-process ``load(cache=False)+summary()`` of 57 MB, 228 MB and ~1 GB (``BENCH_SCALE_MB``:
  extra sizes in MB, default ``1000``; empty: none), time per MB and peak RSS against the JSON size;
  imports (pandas and the kit modules a load uses, ``_KIT_IMPORTS``) are done before the timing, as
  in *compare*; what a first load computes once (regexes compiled, pandas' first-use paths) is timed.

Every process runs with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed) and ``kit`` byte-compiled
first (``precompile``), as an installed package is.

Prints one Markdown section to stdout; progress goes to stderr.
"""
from __future__ import annotations

import json
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
HTA_VENV = Path(os.environ.get("BENCH_HTA_VENV") or Path(tempfile.gettempdir()) / "hta-0.5.0-venv")
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
PY = sys.executable
ENV = {"PYTHONPATH": str(ROOT)}

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
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # see precompile()
    out = subprocess.run([PY, "-c", _WRAP, str(timeout), *cmd], capture_output=True, text=True,
                         env={**base, **(env or {})}, timeout=timeout + 30)
    first, _, rest = out.stdout.partition("\n")
    wall, rss, rss_sum, rc = first.split()
    if rc != "0":
        raise RuntimeError(f"{cmd[:3]} exited {rc}: {out.stderr[-500:]}")
    return float(wall), int(rss) / 1024.0, int(rss_sum) / 1024.0, rest


def precompile() -> None:
    """Byte-compile ``kit`` first, as an install does (pip compiles every package it installs, and so
    are pandas, orjson and HTA here): otherwise, where ``PYTHONDONTWRITEBYTECODE`` is set, every kit
    process would compile its ~45 modules from source (~50 ms) and the bench would time the compiler."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "kit")], check=True, env=base, timeout=300)


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


def make_scaled(src: Path, mb: float, out: Path, reps: int | None = None) -> int:
    """Write ``out``: ``src``'s events repeated ``reps`` times (default: to ~``mb`` MB), ts shifted and
    correlation ids renumbered, as plain JSON (one event per line)."""
    import gzip

    import orjson

    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    evs = doc.pop("traceEvents")
    ts = [e["ts"] for e in evs if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts)) * 1.01 + 1000.0
    one = len(orjson.dumps(evs))
    reps = reps or max(1, math.ceil(mb * 1e6 / one))
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


def ensure_hta() -> Path | None:
    py = HTA_VENV / "bin" / "python"
    if py.exists():
        return py
    log(f"creating the HTA 0.5.0 venv {HTA_VENV} (pip install HolisticTraceAnalysis==0.5.0 from PyPI) ...")
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
ORJSON_SCRIPT = ("import sys, orjson\n"
                 "for f in sys.argv[1:]:\n"
                 "    orjson.loads(open(f, 'rb').read())\n")
# the kit modules a load, a summary and a comparison import on first use: imported before the timings
# that say "imports excluded", as pandas is
_KIT_IMPORTS = "import kit.profile._assemble, kit.profile.reading._read, kit.profile.reading._kineto, kit.profile.analyses._summary, kit.profile.analyses._compare"
REOPEN_SCRIPT = ("import sys, time\n"
                 "from kit import profile\n"
                 "profile.load, profile.Profile  # the lazy imports (pandas) happen here, outside the timing\n"
                 "t = time.perf_counter(); p = profile.load(sys.argv[1:]); s = p.summary()\n"
                 "print(time.perf_counter() - t, all(m['cached'] for m in p.meta['ranks'].values()))\n")
DECODE_SCRIPT = ("import os, sys, time\n"
                 "kind, f = sys.argv[1], sys.argv[2]\n"
                 "if kind in ('msgspec', 'orjson'):\n"
                 "    os.environ['KIT_TRACE_DECODER'] = kind\n"
                 "    from kit.profile.reading._read import read_raw\n"
                 "    t = time.perf_counter(); r = read_raw(f); n = len(r['kernels']['name'])\n"
                 "elif kind == 'orjson.loads':\n"
                 "    import orjson\n"
                 "    t = time.perf_counter(); n = len(orjson.loads(open(f, 'rb').read())['traceEvents'])\n"
                 "else:\n"
                 "    import msgspec\n"
                 "    t = time.perf_counter(); n = len(msgspec.json.decode(open(f, 'rb').read())['traceEvents'])\n"
                 "print(time.perf_counter() - t, n)\n")
COMPARE_SCRIPT = ("import json, os, sys, time\n"
                  "from kit import profile\n"
                  "profile.load, profile.compare\n"
                  f"{_KIT_IMPORTS}\n"
                  "a_f, b_f = sys.argv[1], sys.argv[2]\n"
                  "t0 = time.perf_counter(); a = profile.load(a_f, cache=False); t1 = time.perf_counter()\n"
                  "b = profile.load(b_f, cache=False); t2 = time.perf_counter()\n"
                  "c = profile.compare(a, b, phase='all').to_dict(); t3 = time.perf_counter()\n"
                  "os.unlink(a_f); os.unlink(b_f)\n"
                  "d = profile.compare(a, b, phase='all').to_dict()\n"
                  "same = json.dumps(c, sort_keys=True) == json.dumps(d, sort_keys=True)  # NaN-safe equality\n"
                  "print(json.dumps({'load_a': t1 - t0, 'load_b': t2 - t1, 'compare': t3 - t2, 'identical': same,\n"
                  "                  'by_op': bool(c['by_op'])}))\n")
SCALE_SCRIPT = ("import sys, time\n"
                "from kit import profile\n"
                "profile.load, profile.Profile  # the lazy imports (pandas) happen here, outside the timing\n"
                f"{_KIT_IMPORTS}\n"
                "t = time.perf_counter(); p = profile.load(sys.argv[1], cache=False); s = p.summary()\n"
                "print(time.perf_counter() - t, len(p.kernels))\n")


def bench_set(label: str, files: list[Path], hta_py: Path | None, tmp: Path) -> dict:
    res: dict = {"label": label, "files": files, "json_mb": sum(f.stat().st_size for f in files) / 1e6}
    cache = tmp / "cache"
    env = {**ENV, "KIT_CACHE_DIR": str(cache)}
    kit_cmd = [PY, "-m", "kit", "profile", "summary", *map(str, files), "--json"]
    log(f"[{label}] bare orjson ...")
    res["orjson"] = median_of([PY, "-c", ORJSON_SCRIPT, *map(str, files)])
    log(f"[{label}] kit cold ...")
    res["kit_cold"] = median_of(kit_cmd, env, setup=lambda: shutil.rmtree(cache, ignore_errors=True))
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
        d = tmp / f"hta_{len(list(tmp.iterdir()))}"
        d.mkdir()
        for f in files:
            os.symlink(f, d / f.name)
        log(f"[{label}] HTA 0.5.0 ...")
        try:
            res["hta"] = median_of([str(hta_py), "-c", HTA_SCRIPT, str(d)])
        except (RuntimeError, subprocess.SubprocessError) as exc:
            log(f"HTA failed: {exc}")
    return res


def bench_decoders(f: Path) -> dict:
    out = {}
    for kind in ("msgspec", "orjson", "orjson.loads", "msgspec.json.decode"):
        log(f"[decoders] {kind} on {f.name} ...")
        ts, rss = [], []
        for _ in range(REPEATS):
            _, r, _, o = measure([PY, "-c", DECODE_SCRIPT, kind, str(f)], ENV)
            ts.append(float(o.split()[0]))
            rss.append(r)
        out[kind] = {"s": statistics.median(ts), "rss": statistics.median(rss)}
    return out


def bench_compare(a: Path, b: Path, tmp: Path) -> dict:
    runs = []
    for i in range(REPEATS):
        ca, cb = tmp / f"cmp_a_{i}.json", tmp / f"cmp_b_{i}.json"
        shutil.copy(a, ca)
        shutil.copy(b, cb)
        log("[compare] ...")
        _, _, _, out = measure([PY, "-c", COMPARE_SCRIPT, str(ca), str(cb)], ENV)
        runs.append(json.loads(out.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in ("load_a", "load_b", "compare")}
    med["identical"] = all(r["identical"] for r in runs)
    med["by_op"] = all(r["by_op"] for r in runs)
    return med


def bench_scaling(base: list[tuple[float, Path]], tmp: Path) -> list[dict]:
    sizes = [int(x) for x in os.environ.get("BENCH_SCALE_MB", "1000").split(",") if x]
    todo = list(base)
    for mb in sizes:
        f = tmp / f"scaled_{mb}.json"
        log(f"[scale] writing ~{mb} MB ...")
        make_scaled(XDIT, mb, f)
        todo.append((f.stat().st_size / 1e6, f))
    rows = []
    for mb, f in todo:
        log(f"[scale] parsing {mb:.0f} MB ...")
        walls, rss, ins = [], [], []
        for _ in range(1 if mb >= 500 else REPEATS):
            w, r, _, out = measure([PY, "-c", SCALE_SCRIPT, str(f)], ENV, timeout=1200)
            walls.append(w)
            rss.append(r)
            ins.append(float(out.split()[0]))
        rows.append({"mb": mb, "in_s": statistics.median(ins), "rss": statistics.median(rss), "runs": len(ins)})
    return rows


def _met(ok: bool) -> str:
    return "met" if ok else "**NOT met**"


def main() -> int:
    if not XDIT.is_file():
        print("## Profile parse\n\nSkipped: ../shared/data/traces not found.")
        return 0
    hta_py = ensure_hta()
    precompile()
    tmp = Path(tempfile.mkdtemp(prefix="kit-bench-"))
    try:
        x1, x4 = tmp / "xdit_x1.json", tmp / "xdit_x4.json"
        log("writing the plain-JSON inputs ...")
        make_scaled(XDIT, 0, x1, reps=1)
        make_scaled(XDIT, 0, x4, reps=4)
        sets = [bench_set(f"xdit_sd_3.5 rank 0, plain JSON ({x1.stat().st_size / 1e6:.0f} MB)", [x1], hta_py, tmp),
                bench_set(f"the same events x4 ({x4.stat().st_size / 1e6:.0f} MB)", [x4], hta_py, tmp)]
        dec = {f.name: bench_decoders(f) for f in (x1, x4)}
        cmp_ = bench_compare(x1, x4, tmp)
        scale = bench_scaling([(x1.stat().st_size / 1e6, x1), (x4.stat().st_size / 1e6, x4)], tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(report(sets, dec, cmp_, scale, hta_py))
    return 0


def report(sets, dec, cmp_, scale, hta_py) -> str:
    cpu = os.cpu_count()
    lines = ["## Profile parse: `kit profile summary` vs a bare orjson parse, HolisticTraceAnalysis 0.5.0, decoders, "
             "compare and cache (`bench/profile_parse.py`)", "",
             f"Medians of {REPEATS} fresh processes on this machine ({cpu} CPUs, Python {sys.version.split()[0]}, "
             f"load average {os.getloadavg()[0]:.1f} at the end: other work shares these CPUs, so compare ratios, "
             "not absolute times). Inputs: the xdit_sd_3.5 rank-0 trace written as plain JSON and its events x4 "
             "(see the script's docstring for every row).", "",
             "| input | run | wall (s) | peak RSS, largest process (MiB) | peak RSS, process tree (MiB) | wall / bare orjson | HTA wall / this |",
             "|---|---|---:|---:|---:|---:|---:|"]
    verdicts = []
    for r in sets:
        o, h, kc = r["orjson"], r.get("hta"), r["kit_cold"]
        for key, name in (("orjson", "bare orjson process"), ("kit_cold", "kit cold"), ("kit_cached", "kit cached"),
                          ("hta", "HTA 0.5.0")):
            m = r.get(key)
            if not m:
                continue
            vs_h = f"{h['wall'] / m['wall']:.2f}x" if h else "n/a"
            lines.append(f"| {r['label']} | {name} | {m['wall']:.2f} | {m['rss']:.0f} | {m['rss_sum']:.0f} | "
                         f"{m['wall'] / o['wall']:.2f}x | {vs_h} |")
        lines.append(f"| {r['label']} | reopen from cache, in-process load+summary | {r['reopen_s']:.3f} | | | | |")
        json_mib = r["json_mb"] * 1e6 / 2**20
        verdicts.append((r["label"], "cold kit <= 1.0x bare orjson process", f"{kc['wall'] / o['wall']:.2f}x",
                         kc["wall"] <= o["wall"]))
        if h:
            verdicts.append((r["label"], "cold kit >= 5x faster than HTA 0.5.0", f"{h['wall'] / kc['wall']:.2f}x",
                             h["wall"] >= 5 * kc["wall"]))
        verdicts.append((r["label"], "cold kit peak RSS (largest process) below the JSON size",
                         f"{kc['rss']:.0f} vs {json_mib:.0f} MiB", kc["rss"] < json_mib))
        verdicts.append((r["label"], "cold kit peak RSS (process tree) below the JSON size",
                         f"{kc['rss_sum']:.0f} vs {json_mib:.0f} MiB", kc["rss_sum"] < json_mib))
        verdicts.append((r["label"], "reopen from cache <= 0.3 s", f"{r['reopen_s']:.3f} s", r["reopen_s"] <= 0.3))
    lines += ["", "### Decoders: the reader alone (in-process time and peak RSS of a fresh process)", "",
              "| input | msgspec typed Structs (kit default) | byte prefilter + orjson (kit fallback) | "
              "`orjson.loads` (whole file) | `msgspec.json.decode`, untyped (whole file) |", "|---|---:|---:|---:|---:|"]
    for name, d in dec.items():
        cells = [f"{d[k]['s']:.2f} s, {d[k]['rss']:.0f} MiB" for k in ("msgspec", "orjson", "orjson.loads",
                                                                      "msgspec.json.decode")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    c = cmp_
    ratio = c["compare"] / c["load_a"]
    lines += ["", "### compare() of the two loaded profiles (one process, cache off)", "",
              "| load 57 MB (s) | load 228 MB (s) | compare (s) | compare / one cold load (57 MB) | by-op split | "
              "identical with the trace files deleted |", "|---:|---:|---:|---:|---|---|",
              f"| {c['load_a']:.2f} | {c['load_b']:.2f} | {c['compare']:.3f} | {ratio:.3f}x | "
              f"{'yes' if c['by_op'] else 'no'} | {'yes' if c['identical'] else 'NO'} |"]
    verdicts.append(("57 MB vs 228 MB", "compare <= 0.25x one cold load", f"{ratio:.3f}x", ratio <= 0.25))
    verdicts.append(("57 MB vs 228 MB", "compare identical with the trace files deleted",
                     "yes" if c["identical"] else "no", c["identical"] and c["by_op"]))
    if scale:
        lines += ["", "### Time per MB, 57 MB to ~1 GB (in-process `load(cache=False)+summary()`, imports excluded)",
                  "", "| JSON size (MB) | runs | parse+summary (s) | s per 100 MB | peak RSS (MiB) | RSS / JSON size |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for r in scale:
            lines.append(f"| {r['mb']:.0f} | {r['runs']} | {r['in_s']:.2f} | {100 * r['in_s'] / r['mb']:.3f} | "
                         f"{r['rss']:.0f} | {r['rss'] * 2**20 / 1e6 / r['mb']:.2f} |")
        per = [r["in_s"] / r["mb"] for r in scale]
        flat = max(per) / min(per) - 1
        verdicts.append((f"{scale[0]['mb']:.0f} MB to {scale[-1]['mb']:.0f} MB", "time per MB flat within 25%",
                         f"{100 * flat:.0f}%", flat <= 0.25))
        big = scale[-1]
        verdicts.append((f"{big['mb']:.0f} MB", "peak RSS below the JSON size (in-process load)",
                         f"{big['rss']:.0f} vs {big['mb'] * 1e6 / 2**20:.0f} MiB", big["rss"] * 2**20 < big["mb"] * 1e6))
    lines += ["", "| input | target (issue 21) | this run | |", "|---|---|---:|---|"]
    for label, target, value, ok in verdicts:
        lines.append(f"| {label} | {target} | {value} | {_met(ok)} |")
    if not hta_py:
        lines += ["", "HTA 0.5.0 could not be installed here: the HTA comparisons were not run."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
