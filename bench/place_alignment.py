#!/usr/bin/env python3
"""Benchmark: placement by alignment (``kit.profile.load(trace, reference=REF)``) against the cold load of
the pair it needs (issue 32).

For each recorded pair of tests/data/traces (target: a CUDA-graph replay or an eager trace without stack;
reference: the eager run with stack): *anchor* = ``kit.profile.load`` of the target and of the reference
with the parse cache off; *alignment* = ``kit.profile.attribution._place.place`` on those two Profiles (name codes,
the per-step alignments, labels written). Medians of ``BENCH_REPEATS`` (default 5) in this process. Also
the scaling of the alignment itself: ``align`` of the recorded Llama step tiled to 16, 32 and 64 layers
against itself (n = reference length), which is the cost of one distinct step sequence of a deeper model.

Prints one Markdown section to stdout; progress goes to stderr.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kit import profile  # noqa: E402
from kit.profile.attribution import _place  # noqa: E402

TRACES = ROOT / "tests" / "data" / "traces"
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
PAIRS = [("hf_llama_plain", "hf_llama_stack"), ("hf_qwen3next_plain", "hf_qwen3next_stack"),
         ("place_llama_graph", "place_llama_ref"), ("place_mixtral_graph", "place_mixtral_ref"),
         ("place_granitehybrid_graph", "place_granitehybrid_ref"), ("place_compiled_graph", "place_compiled_ref"),
         ("place_twostream_graph", "place_twostream_ref")]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def trace(name: str) -> Path:
    return TRACES / name / "trace.json.gz"


def one(target: str, ref: str) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    pt = profile.load(trace(target), cache=False)
    pr = profile.load(trace(ref), cache=False)
    t1 = time.perf_counter()
    pl = _place.place(pt, pr)
    return t1 - t0, time.perf_counter() - t1, pl


def pairs() -> list[str]:
    rows = []
    present = [(a, b) for a, b in PAIRS if trace(a).exists() and trace(b).exists()]
    for a, b in present:
        one(a, b)  # imports and first-use compilation out of the figures
        runs = [one(a, b) for _ in range(REPEATS)]
        load = statistics.median(r[0] for r in runs)
        align = statistics.median(r[1] for r in runs)
        mb = (trace(a).stat().st_size + trace(b).stat().st_size) / 1e6
        n = int(runs[-1][2].steps["kernels"].sum())
        rows.append((a, b, mb, n, load, align))
        log(f"{a} vs {b}: load {load:.3f}s, align {align:.3f}s")
    out = ["| target vs reference | gz MB (both) | target kernels | anchor: cold load of both (s) | alignment (s) "
           "| alignment / anchor |", "|---|---|---|---|---|---|"]
    for a, b, mb, n, load, align in rows:
        out.append(f"| {a} vs {b} | {mb:.2f} | {n:,} | {load:.3f} | {align:.3f} | {align / load:.2f} |")
    big = max(rows, key=lambda r: r[2]) if rows else None
    worst = max(r[5] / r[4] for r in rows) if rows else float("nan")
    out.append("")
    if big:
        ratio = big[5] / big[4]
        met = "met" if ratio <= 0.5 else "not met"
        out.append(f"- Target: alignment at most 0.5x the cold load of the pair on the largest pair "
                   f"({big[0]} vs {big[1]}, {big[2]:.2f} MB): {ratio:.2f}x — **{met}**; worst pair {worst:.2f}x.")
    return out


def scaling() -> list[str]:
    p = profile.load(trace("hf_llama_stack"), cache=False)
    k = p.kernels[p.kernels["step"] == 1].sort_values("start_us")
    lay = k[k["layer"] == 0]["name"].astype(object).to_numpy()
    codes = _place.Codes()
    out = ["| layers | kernels per step | align one step (s) |", "|---|---|---|"]
    import numpy as np
    for n_layers in (16, 32, 64):
        seq = codes.of(np.tile(lay, n_layers))
        ts = []
        for _ in range(max(1, REPEATS // 2)):
            t = time.perf_counter()
            _place.align(seq, seq)
            ts.append(time.perf_counter() - t)
        out.append(f"| {n_layers} | {len(seq):,} | {statistics.median(ts):.3f} |")
        log(f"scaling {n_layers} layers: {statistics.median(ts):.3f}s")
    return out


def main() -> int:
    lines = ["## Placement by alignment: cost against the cold load of the pair (`bench/place_alignment.py`)", "",
             __doc__.split("\n\n")[1].replace("\n", " "), ""]
    lines += pairs()
    lines += ["", "Alignment of one distinct step sequence as the model deepens (the Llama layer tiled; each "
              "distinct target sequence is aligned once per load, repeated steps are a lookup):", ""]
    lines += scaling()
    lines += ["", f"_Command: `.venv/bin/python bench/place_alignment.py` (measured "
              f"{time.strftime('%Y-%m-%d', time.gmtime())}, shared 2-CPU machine: compare ratios)._"]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
