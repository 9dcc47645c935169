"""Cost of ``kit.profile.compare`` against the anchor of loading and summarising the same two traces.

Prints one Markdown section (see bench/run_all.py). In one process per measurement (medians of 3,
empty parse cache each time): *anchor* = ``kit.profile.load`` + ``summary("decode")`` of both runs;
*compare* = the same loads + ``compare(a, b, ops=False)``; *compare with ops* = loads + ``compare``
with the by-op / by-module split (read from the Profiles' kernel tables; no second parse). Pairs: the recorded
comparison pairs of the sample session (CUDA-graph replay, no op links) and the eager
``cmp_shapes_a`` run against itself (op links present).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T = ROOT / "notebooks" / "sample" / "traces"
PAIRS = [("cmp_gemm_a", "cmp_gemm_b"), ("cmp_sdpa_cudnn", "cmp_sdpa_efficient"), ("cmp_shapes_a", "cmp_shapes_a")]
CODE = {
    "anchor": "pa, pb = P.load(A), P.load(B); pa.summary('decode'); pb.summary('decode')",
    "compare": "pa, pb = P.load(A), P.load(B); P.compare(pa, pb, ops=False)",
    "compare+ops": "pa, pb = P.load(A), P.load(B); P.compare(pa, pb, ops=True)",
}


def _run(kind: str, a: Path, b: Path) -> float:
    prog = ("import time, kit.profile as P\n"
            f"A, B = {str(a)!r}, {str(b)!r}\n"
            "t0 = time.perf_counter()\n" + CODE[kind] + "\nprint(time.perf_counter() - t0)\n")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KIT_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=600, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    rows = []
    for a, b in PAIRS:
        pa, pb = T / a / "rank0.trace.json.gz", T / b / "rank0.trace.json.gz"
        if not (pa.exists() and pb.exists()):
            print(f"missing {pa} or {pb}", file=sys.stderr)
            return 1
        med = {}
        for kind in CODE:
            med[kind] = statistics.median(_run(kind, pa, pb) for _ in range(3))
            print(f"{a} vs {b}: {kind} {med[kind]:.3f} s", file=sys.stderr)
        mb = (pa.stat().st_size + pb.stat().st_size) / 1e6
        rows.append((f"{a} vs {b}", mb, med["anchor"], med["compare"], med["compare+ops"]))
    print("## Run comparison: `kit.profile.compare` vs loading and summarising the two runs "
          "(`bench/profile_compare.py`)\n")
    print(__doc__.split("\n\n", 1)[1].strip() + "\n")
    print("| pair | gz MB (both) | anchor: load + summary (s) | load + compare (s) | load + compare with ops (s) "
          "| compare / anchor | with ops / anchor |")
    print("|---|---|---|---|---|---|---|")
    for name, mb, an, c, co in rows:
        print(f"| {name} | {mb:.2f} | {an:.3f} | {c:.3f} | {co:.3f} | {c / an:.2f} | {co / an:.2f} |")
    worst = max(r[3] / r[2] for r in rows)
    print(f"\n- Target: compare costs at most 1.5x the anchor (without the op pass): worst {worst:.2f}x — "
          f"**{'met' if worst <= 1.5 else 'not met'}**.")
    print(f"- Wall times on a shared machine ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end): "
          f"compare the ratios, not the seconds. Measured {time.strftime('%Y-%m-%d')}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
