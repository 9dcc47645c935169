#!/usr/bin/env python3
"""Benchmark: what a ``kit`` command costs before and around its work (issue 48's start-up targets).

Every figure is the median wall time of ``BENCH_REPEATS`` (default 5) fresh processes, the variants of one
row interleaved (A B A B ...) so that a change of load hits both, ratios taken between medians of this run:

- ``kit --help`` (target: under 0.25 s);
- a cold ``kit profile summary TRACE --json`` (empty ``KIT_CACHE_DIR``) of a small trace (the sample's
  ``tp1_eager`` rank 0, written as plain JSON) and of the 57 MB plain-JSON trace
  (``../shared/data/traces/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz`` written as plain
  JSON, as ``bench/profile_parse.py`` does) and of its events x4 (228 MB, ``profile_parse.make_scaled``;
  ``BENCH_X4=off`` leaves it out),
  against a bare orjson parse process of the same file (targets: at most 0.8x at 57-62 MB, 0.5x at 228 MB),
  each with the run catalogue recording into a fresh store (the default) and with ``KIT_RUNS=off``;
- the modules each process imported (``-X importtime`` lines, not timed).

``BENCH_BASE=<git ref>`` adds the same commands of that commit (``git archive`` into a temporary folder, run
with this environment) to each row's interleaving: before and after, from one run.

The load average (1 min) is read before and after and printed with the figures. Prints one Markdown
section on stdout; progress on stderr.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "notebooks/sample/traces/tp1_eager/rank0.trace.json.gz"
XDIT = (ROOT / ".." / "shared" / "data" / "traces").resolve() / \
    "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz"
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
PY = sys.executable
ORJSON = "import sys, orjson\norjson.loads(open(sys.argv[1], 'rb').read())\n"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _env(root: Path = ROOT, **extra: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "KIT_RUNS", "KIT_RUNS_DIR")}
    return {**base, "PYTHONPATH": str(root), "KIT_PROGRESS": "off", **extra}


def checkout(ref: str, tmp: Path) -> Path:
    """``ref``'s tree (kit/ only) in a temporary folder, byte-compiled as an install is."""
    out = tmp / "base"
    out.mkdir()
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "kit"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=tar, check=True)
    subprocess.run([PY, "-m", "compileall", "-q", str(out / "kit")], check=True, env=_env(out), timeout=300)
    return out


def wall(cmd: list[str], env: dict, setup=None) -> float:
    """Wall seconds of one fresh process (its output discarded; a failure stops the bench)."""
    if setup:
        setup()
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {p.returncode}: {p.stderr.decode()[-400:]}")
    return took


def interleaved(variants: dict[str, tuple[list[str], dict, object]]) -> dict[str, float]:
    """Median wall time per variant, the variants run in turn REPEATS times (after one warm-up each)."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    for cmd, env, setup in variants.values():
        wall(cmd, env, setup)
    for _ in range(REPEATS):
        for k, (cmd, env, setup) in variants.items():
            times[k].append(wall(cmd, env, setup))
    return {k: statistics.median(v) for k, v in times.items()}


def modules(cmd: list[str], env: dict) -> int:
    """How many modules the process imported (``-X importtime`` lines)."""
    p = subprocess.run([PY, "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True, timeout=600)
    return sum(1 for line in p.stderr.splitlines() if line.startswith("import time:") and "|" in line) - 1


def plain_json(src: Path, out: Path) -> int:
    import gzip

    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out.stat().st_size


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="kit-bench-startup-"))
    os.chdir(tmp)   # ``python -m kit`` puts the working directory first on sys.path: PYTHONPATH decides the kit
    try:
        subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "kit")], check=True, env=_env(), timeout=300)
        load0 = os.getloadavg()[0]
        cache, store = tmp / "cache", tmp / "runs"

        def fresh():
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(store, ignore_errors=True)

        on = _env(KIT_CACHE_DIR=str(cache), KIT_RUNS="on", KIT_RUNS_DIR=str(store))
        off = _env(KIT_CACHE_DIR=str(cache), KIT_RUNS="off")
        ref = os.environ.get("BENCH_BASE")
        base = checkout(ref, tmp) if ref else None
        kit = [PY, "-m", "kit"]
        log("[startup] kit --help ...")
        hv = {"help": ([*kit, "--help"], off, None)}
        if base:
            hv["base"] = ([*kit, "--help"], _env(base, KIT_RUNS="off"), None)
        helps = interleaved(hv)
        rows = [("`kit --help`", helps["help"], None, modules([*kit, "--help"], off))]
        if base:
            rows.append((f"`kit --help` at {ref}", helps["base"], None, modules([*kit, "--help"], hv["base"][1])))
        small = tmp / "tp1_eager_rank0.json"
        files = [(f"sample tp1_eager rank 0, plain JSON ({plain_json(SMALL, small) / 1e6:.1f} MB)", small)]
        if XDIT.exists():
            big = tmp / "xdit_rank0.json"
            size = plain_json(XDIT, big)
            files.append((f"xdit_sd_3.5 rank 0, plain JSON ({size / 1e6:.0f} MB)", big))
            if os.environ.get("BENCH_X4", "on") != "off":
                sys.path.insert(0, str(ROOT / "bench"))
                import profile_parse

                x4 = tmp / "xdit_x4.json"
                profile_parse.make_scaled(XDIT, 0, x4, reps=4)
                files.append((f"the same events x4, plain JSON ({x4.stat().st_size / 1e6:.0f} MB)", x4))
        else:
            log(f"[startup] {XDIT} not found: the 57 MB rows are left out")
        verdicts = [("`kit --help`", "under 0.25 s", f"{helps['help']:.3f} s", helps["help"] < 0.25)]
        for label, f in files:
            log(f"[startup] {label} ...")
            summary = [*kit, "profile", "summary", str(f), "--json"]
            variants = {"orjson": ([PY, "-c", ORJSON, str(f)], off, None), "on": (summary, on, fresh),
                        "off": (summary, off, fresh)}
            if base:
                variants["base"] = (summary, _env(base, KIT_CACHE_DIR=str(cache), KIT_RUNS="on",
                                                  KIT_RUNS_DIR=str(store)), fresh)
            m = interleaved(variants)
            fresh()
            n_on, n_off = modules(summary, on), modules(summary, off)
            rows += [(f"cold summary, {label}, recording on", m["on"], m["on"] / m["orjson"], n_on),
                     (f"cold summary, {label}, `KIT_RUNS=off`", m["off"], m["off"] / m["orjson"], n_off),
                     (f"bare orjson parse process, {label}", m["orjson"], 1.0, None)]
            if base:
                rows.append((f"cold summary, {label}, recording on, at {ref}", m["base"], m["base"] / m["orjson"],
                             modules(summary, _env(base, KIT_CACHE_DIR=str(cache), KIT_RUNS="on",
                                                   KIT_RUNS_DIR=str(store)))))
            if f is not small:
                target = 0.8 if f is big else 0.5
                verdicts.append((label, f"cold summary <= {target}x a bare orjson parse process (recording on)",
                                 f"{m['on'] / m['orjson']:.2f}x", m["on"] / m["orjson"] <= target))
        load1 = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = ["## Start-up: `kit --help` and a cold `kit profile summary` against a bare orjson parse", "",
           f"Median of {REPEATS} fresh processes each, variants interleaved; load average (1 min) {load0:.1f} at the "
           f"start, {load1:.1f} at the end. Recording on: a fresh store per run (written after the answer by a "
           "child that outlives the command: not in its wall time; the modules counted are the command's own).", "",
           "| command | wall (s) | / bare orjson | modules imported |", "|---|---:|---:|---:|"]
    for name, w, ratio, n in rows:
        out.append(f"| {name} | {w:.3f} | {'' if ratio is None else f'{ratio:.2f}x'} | {'' if n is None else n} |")
    out += ["", "| input | target | measured | met |", "|---|---|---:|---|"]
    out += [f"| {a} | {b} | {c} | {'yes' if ok else 'no'} |" for a, b, c, ok in verdicts]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
