#!/usr/bin/env python3
"""What issue 34's guards cost the trace reader and the cache, against the code before them.

Measured against ``BENCH_BASE`` (a git ref; default: the merge base of HEAD and ``main``), whose ``kit/``
is exported with ``git archive`` into a temp dir:

- *read_raw*: CPU seconds (``time.process_time``) of ``kit.profile.reading._read.read_raw`` on the xdit_sd_3.5
  rank-0 trace written as plain JSON (62 MB), each decoder, each run a fresh process, this checkout and
  the base interleaved (after, before, after, ...), ``BENCH_REPEATS`` (default 7) of each; medians.
  CPU time, not wall: the machine is shared, and the guards are CPU work (a byte count, a check per
  new non-ASCII name, a keyed digest).
- *reopen*: ``load()+summary()`` on a cache hit (the sealed entry read and its BLAKE2b digest checked
  vs the unsealed entry of the base), CPU seconds, interleaved the same way.
- *gzip bomb*: ``kit profile summary`` of a 3 MB ``.gz`` holding one 3 GiB string
  (``tests/profile/test_hostile_traces._bomb``): wall time to the error and peak RSS (this checkout
  only; the base ran past 300 s).

Prints one Markdown section; progress goes to stderr.
"""
from __future__ import annotations

import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("KIT_SHARED_DATA") or ROOT / ".." / "shared" / "data").resolve()
XDIT = SHARED / "traces" / "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz"
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
READ = ("import time, sys\nfrom kit.profile.reading._read import read_raw\n"
        "t = time.process_time(); read_raw(sys.argv[1]); print(time.process_time() - t)")
REOPEN = ("import time, sys, kit.profile as p\np.load(sys.argv[1])\n"
          "t = time.process_time(); p.load(sys.argv[1]).summary(); print(time.process_time() - t)")


def _base_tree(tmp: Path) -> Path:
    ref = os.environ.get("BENCH_BASE") or subprocess.run(
        ["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    out = tmp / "base"
    out.mkdir()
    tar = subprocess.run(["git", "archive", ref, "kit"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=tar, check=True)
    print(f"base: {ref}", file=sys.stderr)
    return out


def _run(tree: Path, code: str, arg: str, env: dict) -> float:
    res = subprocess.run([sys.executable, "-c", code, arg], cwd=tree, capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(tree), **env))
    return float(res.stdout.strip().splitlines()[-1])


def _pair(trees: dict, code: str, arg: str, env: dict) -> dict:
    got: dict = {k: [] for k in trees}
    for _ in range(REPEATS):
        for k, tree in trees.items():
            got[k].append(_run(tree, code, arg, env(k) if callable(env) else env))
    return {k: statistics.median(v) for k, v in got.items()}


def _bomb(tmp: Path) -> tuple[float, float, str]:
    from tests.profile.test_hostile_traces import _bomb as make

    f = tmp / "bomb.json.gz"
    make(f)
    wrap = ("import resource, subprocess, sys\nr = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\nprint(r.stderr.strip())")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", wrap, sys.executable, "-m", "kit", "profile", "summary", str(f),
                          "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = time.perf_counter() - t0
    code, rss_kib = res.stdout.split("\n")[0].split()
    if code == "0" or "longer than" not in res.stdout:
        raise SystemExit(f"the bomb was not stopped: {res.stdout[-500:]}")
    rss = int(rss_kib) / 1024
    return wall, rss, f"{f.stat().st_size / 1e6:.1f} MB"


def main() -> int:
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        trace = tmp / "xdit.json"
        with gzip.open(XDIT) as src, open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst)
        trees = {"now": ROOT, "base": _base_tree(tmp)}
        rows = []
        for dec in ("msgspec", "orjson"):
            print(f"read_raw {dec}", file=sys.stderr)
            m = _pair(trees, READ, str(trace), {"KIT_TRACE_DECODER": dec})
            rows.append((f"read_raw, {dec} decoder, CPU s", m))
        print("reopen", file=sys.stderr)
        m = _pair(trees, REOPEN, str(trace), lambda k: {"KIT_CACHE_DIR": str(tmp / f"cache-{k}")})
        rows.append(("reopen from the cache (load+summary), CPU s", m))
        print("bomb", file=sys.stderr)
        wall, rss, size = _bomb(tmp)
    print("## Reader guards: what issue 34's bounds and cache digests cost (`bench/reader_guards.py`)\n")
    print("| measurement | now | before | ratio |\n|---|---:|---:|---:|")
    for name, m in rows:
        print(f"| {name} (median of {REPEATS}) | {m['now']:.3f} | {m['base']:.3f} | {m['now'] / m['base']:.2f}x |")
    print(f"| gzip bomb ({size} .gz, one 3 GiB string): wall to the one-line error | {wall:.1f} s | > 300 s | |")
    print(f"| gzip bomb: peak RSS of the `kit` process | {rss:.0f} MiB | 2.6-3.4 GB | |")
    read_ok = all(m["now"] / m["base"] <= 1.05 for name, m in rows if name.startswith("read_raw"))
    reopen = rows[-1][1]
    print(f"\nTargets: read_raw no slower (<= 1.05x): **{'met' if read_ok else 'not met'}**; reopen from the cache "
          f"<= 0.3 s (the profile-parse target) with the keyed digest checked: **"
          f"{'met' if reopen['now'] <= 0.3 else 'not met'}** (the digest costs "
          f"{1e3 * (reopen['now'] - reopen['base']):+.0f} ms); the bomb stopped within seconds at bounded memory: "
          f"**{'met' if wall < 30 and rss < 512 else 'not met'}**.\n\n_Command: `BENCH_BASE=<ref> "
          f".venv/bin/python bench/reader_guards.py` ({time.perf_counter() - t_all:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f}; ref {os.environ.get('BENCH_BASE', 'merge base with main')})._")
    return 0


if __name__ == "__main__":
    sys.exit(main())
