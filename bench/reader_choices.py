#!/usr/bin/env python3
"""Benchmark: three choices of the trace reader, each against the alternative it replaced (issue 21).

Inputs as in ``bench/profile_parse.py``: the xdit_sd_3.5 rank-0 trace of ``../shared/data/traces`` written
as plain JSON (57 MB) and its events x4 (229 MB).

- *prefetch worker*: cold ``kit profile summary FILE --json`` (57 MB, empty ``KIT_CACHE_DIR``), the parse
  worker forked (what a fresh ``kit`` process does) against spawned (``_load._fork_is_safe`` forced false
  in the same wrapper); ``BENCH_REPEATS`` runs of each, alternating, medians;
- *cache format*: the four tables of the loaded 229 MB profile written as uncompressed Arrow IPC (the
  cache now) and as parquet (before), each in a fresh process: write time, how far writing raises the
  process's peak RSS above the peak the load itself reached, read-back time, bytes on disk;
- *kernel-name rules*: ``categorise`` of the 57 MB trace's distinct kernel names with the lower-cased
  search (``fold``) and with every rule searched as written; median of ``BENCH_REPEATS`` warm calls after
  both forms are compiled, plus the first (cold) call of each in its own process.

Prints one Markdown section to stdout; progress goes to stderr.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_parse import PY, ROOT, XDIT, log, make_scaled, precompile  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(ROOT)}

CLI = ("import sys, time\n"
       "t = time.perf_counter()\n"
       "import kit.profile._load as L\n"
       "if sys.argv[1] == 'spawn':\n"
       "    L._fork_is_safe = lambda: False\n"
       "from kit.cli import main\n"
       "code = main(['profile', 'summary', sys.argv[2], '--json'])\n"
       "sys.stderr.write(f'WALL {time.perf_counter() - t}\\n')\n")
CACHE = ("import json, os, sys, time\n"
         "from kit import profile\n"
         "from kit.profile.reading._cache import write_table, read_table\n"
         "from kit.profile._load import system_arrow_pool\n"
         "import pandas as pd\n"
         "def hwm():\n"
         "    for line in open('/proc/self/status'):\n"
         "        if line.startswith('VmHWM'):\n"
         "            return int(line.split()[1]) / 1024\n"
         "fmt, src, out = sys.argv[1], sys.argv[2], sys.argv[3]\n"
         "p = profile.load(src, cache=False)\n"
         "tabs = {'kernels': p.kernels, 'annotations': p.annotations, 'steps': p.steps, 'runtime': p.runtime}\n"
         "import gc; gc.collect()\n"
         "h0 = hwm(); t = time.perf_counter()\n"
         "with system_arrow_pool():\n"
         "    for n, tb in tabs.items():\n"
         "        f = os.path.join(out, n + '.' + fmt)\n"
         "        write_table(tb, f) if fmt == 'arrow' else tb.to_parquet(f, index=False)\n"
         "w = time.perf_counter() - t; grow = hwm() - h0\n"
         "t = time.perf_counter()\n"
         "for n in tabs:\n"
         "    f = os.path.join(out, n + '.' + fmt)\n"
         "    read_table(f) if fmt == 'arrow' else pd.read_parquet(f)\n"
         "r = time.perf_counter() - t\n"
         "size = sum(os.path.getsize(os.path.join(out, n + '.' + fmt)) for n in tabs)\n"
         "print(json.dumps({'write': w, 'grow': grow, 'read': r, 'bytes': size}))\n")
RULES = ("import json, statistics, sys, time\n"
         "from kit.profile.attribution._categories import build_rules, categorise, fold\n"
         "from kit.profile.reading._read import read_raw\n"
         "mode, f, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
         "names = sorted(set(read_raw(f)['kernels']['name']))\n"
         "rules = [r for r in build_rules(None) if 'kernel' in r.on]\n"
         "def as_written(ns):\n"
         "    out = {}\n"
         "    for n in ns:\n"
         "        out[n] = next((r.category for r in rules if r.matches(n)), 'other')\n"
         "    return out\n"
         "fn = (lambda ns: categorise(ns, rules)) if mode == 'folded' else as_written\n"
         "t = time.perf_counter(); first = fn(names); cold = time.perf_counter() - t\n"
         "warm = []\n"
         "for _ in range(reps):\n"
         "    t = time.perf_counter(); fn(names); warm.append(time.perf_counter() - t)\n"
         "print(json.dumps({'cold': cold, 'warm': statistics.median(warm), 'names': len(names),\n"
         "                  'chars': sum(map(len, names)), 'cats': first}))\n")


def run_py(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, env=env or ENV, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-1000:])
    return out


def bench_prefetch(x1: Path, tmp: Path) -> dict:
    walls: dict[str, list[float]] = {"fork": [], "spawn": []}
    for i in range(REPEATS):
        for mode in ("fork", "spawn") if i % 2 == 0 else ("spawn", "fork"):
            cache = tmp / f"cache-{mode}-{i}"
            out = run_py(CLI, mode, str(x1), env={**ENV, "KIT_CACHE_DIR": str(cache)})
            walls[mode].append(float(out.stderr.rsplit("WALL ", 1)[1]))
            shutil.rmtree(cache, ignore_errors=True)
    return {m: {"median": statistics.median(w), "min": min(w), "max": max(w)} for m, w in walls.items()}


def bench_cache(x4: Path, tmp: Path) -> dict:
    res = {}
    for fmt in ("arrow", "parquet"):
        d = tmp / f"tables-{fmt}"
        d.mkdir()
        res[fmt] = json.loads(run_py(CACHE, fmt, str(x4), str(d)).stdout.strip().splitlines()[-1])
    return res


def bench_rules(x1: Path) -> dict:
    res = {m: json.loads(run_py(RULES, m, str(x1), str(REPEATS)).stdout) for m in ("folded", "as_written")}
    res["same"] = res["folded"].pop("cats") == res["as_written"].pop("cats")
    return res


def report(pf: dict, cache: dict, rules: dict) -> str:
    a, q = cache["arrow"], cache["parquet"]
    f, w = rules["folded"], rules["as_written"]
    lines = [
        "## Reader choices: forked prefetch, Arrow IPC cache, lower-cased rules (`bench/reader_choices.py`)", "",
        f"Each choice against the one it replaced, one run on this machine (2 CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end); inputs as in the profile-parse section.", "",
        "| choice | now | before | now / before |", "|---|---|---|---:|",
        f"| cold `kit profile summary` (57 MB), in-process wall, median of {REPEATS} alternating (min-max) | "
        f"forked worker {pf['fork']['median']:.3f} s ({pf['fork']['min']:.3f}-{pf['fork']['max']:.3f}) | "
        f"spawned worker {pf['spawn']['median']:.3f} s ({pf['spawn']['min']:.3f}-{pf['spawn']['max']:.3f}) | "
        f"{pf['fork']['median'] / pf['spawn']['median']:.2f} |",
        f"| cache write, the 229 MB profile's 4 tables | Arrow IPC {a['write']:.3f} s | parquet {q['write']:.3f} s | "
        f"{a['write'] / q['write']:.2f} |",
        f"| peak RSS raised above the load's own peak while writing | {a['grow']:.1f} MiB | {q['grow']:.1f} MiB | |",
        f"| cache read-back | {a['read']:.3f} s | {q['read']:.3f} s | {a['read'] / q['read']:.2f} |",
        f"| bytes on disk | {a['bytes'] / 1e6:.1f} MB | {q['bytes'] / 1e6:.1f} MB | {a['bytes'] / q['bytes']:.2f} |",
        f"| kernel-name categories, {f['names']} distinct names ({f['chars']:,} characters), warm | "
        f"lower-cased {1000 * f['warm']:.1f} ms | as written {1000 * w['warm']:.1f} ms | {f['warm'] / w['warm']:.2f} |",
        f"| the same, first call of a process (compiles included) | {1000 * f['cold']:.1f} ms | "
        f"{1000 * w['cold']:.1f} ms | {f['cold'] / w['cold']:.2f} |",
        "", f"- Categories identical both ways: {'yes' if rules['same'] else 'NO'}.",
        "- The CLI wall is timed inside the process (imports of `kit` included, interpreter start and exit "
        "not), so both rows differ only in how the parse worker starts.",
        "", "_Command: `.venv/bin/python bench/reader_choices.py` (about 15 s on this machine)._"]
    return "\n".join(lines)


def main() -> int:
    if not XDIT.is_file():
        print("## Reader choices\n\nSkipped: ../shared/data/traces not found.")
        return 0
    precompile()
    tmp = Path(tempfile.mkdtemp(prefix="kit-bench-"))
    try:
        x1, x4 = tmp / "xdit_x1.json", tmp / "xdit_x4.json"
        log("writing the plain-JSON inputs ...")
        make_scaled(XDIT, 0, x1, reps=1)
        make_scaled(XDIT, 0, x4, reps=4)
        log("[prefetch] ...")
        pf = bench_prefetch(x1, tmp)
        log("[cache] ...")
        cache = bench_cache(x4, tmp)
        log("[rules] ...")
        rules = bench_rules(x1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(report(pf, cache, rules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
