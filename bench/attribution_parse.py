#!/usr/bin/env python3
"""Benchmark: what kernel attribution costs on the largest real trace, before and after a change.

The kit's code at ``--before`` (a git ref, default the commit before issue 20's attribution work) is
extracted with ``git archive`` into a temporary directory; this working tree is the "after". Each
side runs in fresh processes, taking turns (before, after, before, ...) so that other load on the
machine falls on both alike; each process times, in-process (imports excluded):

- ``load``: ``kit.profile.load(TRACE, cache=False)`` (parse, steps, attribution, categories);
- ``link``: the time inside ``kit.profile.attribution._attribution.link`` (launch -> enclosing frames -> evidence;
  after issue 20 also the op sequences, ``claim``, and the op links the reader rewrite moved into the
  same sweep), ``decide`` the time inside ``_attribution.decide``;
- ``summary``: ``Profile.summary()`` afterwards.

Trace: ``../shared/data/traces/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz``
(62 MB JSON, 239k events; the largest real trace the kit has). Prints one Markdown section.
Usage: ``python bench/attribution_parse.py [--before REF] [--repeats N] [--trace PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = (ROOT / ".." / "shared" / "data" / "traces"
         / "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz").resolve()
BEFORE = "72c3c8c"   # main before the issue-20 attribution work

_CHILD = r"""
import json, sys, time
import kit.profile as kp
from kit.profile.attribution import _attribution as A
acc = {"link": 0.0, "decide": 0.0, "claim": 0.0}
def timed(name, f):
    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[name] += time.perf_counter() - t
    return g
A.link = timed("link", A.link)
A.decide = timed("decide", A.decide)
if hasattr(A, "claim"):   # the op-sequence matching (absent before issue 20)
    A.claim = timed("claim", A.claim)
t0 = time.perf_counter()
p = kp.load(sys.argv[1], cache=False)
t1 = time.perf_counter()
s = p.summary()
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "summary": t2 - t1, **acc, "kernels": len(p.kernels),
                  "decided_by": {r.decided_by: round(r.share_of_kernel, 4) for r in s.evidence.itertuples()}}))
"""


def _run(tree: Path, trace: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(trace)], capture_output=True, text=True, env=env,
                         timeout=600, cwd=tree)
    if out.returncode:
        raise SystemExit(f"bench child failed in {tree}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--trace", type=Path, default=TRACE)
    a = ap.parse_args()
    a.trace = a.trace.resolve()   # the children run in another directory
    if not a.trace.is_file():
        print(f"trace absent: {a.trace}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kit-bench-before-") as tmp:
        got = subprocess.run(["git", "archive", a.before, "kit"], cwd=ROOT, capture_output=True)
        if got.returncode:
            print(f"git archive {a.before}: {got.stderr.decode(errors='replace').strip()} (a shallow clone? "
                  f"fetch that commit or pass --before REF)", file=sys.stderr)
            return 1
        arch = got.stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=arch, check=True)
        runs: dict[str, list] = {"before": [], "after": []}
        for i in range(a.repeats):
            for side, tree in (("before", Path(tmp)), ("after", ROOT)):
                runs[side].append(_run(tree, a.trace))
                print(f"{side} {i + 1}/{a.repeats}: {runs[side][-1]['load']:.2f} s", file=sys.stderr)
    med = {s: {k: statistics.median(r[k] for r in rs) for k in ("load", "link", "claim", "decide", "summary")}
           for s, rs in runs.items()}
    load1 = os.getloadavg()[0]
    mb = a.trace.stat().st_size / 1e6
    print("## Attribution cost on the largest trace (`bench/attribution_parse.py`)\n")
    print(f"`{a.trace.name}` (xdit_sd_3.5 rank 0, {mb:.1f} MB gzip, 62 MB JSON, "
          f"{runs['after'][0]['kernels']:,} kernels); median of {a.repeats} fresh processes per side, the sides "
          f"taking turns; in-process times, imports excluded. *before*: `git archive {a.before}`; *after*: this "
          f"tree. 1-minute load average at the end: {load1:.1f}.\n")
    print("| figure | before (s) | after (s) | after / before |")
    print("|---|---:|---:|---:|")
    for k, label in (("load", "`load(cache=False)` (parse + steps + attribution + categories)"),
                     ("link", "inside `_attribution.link`"),
                     ("claim", "of which op sequences (`_sequences.claim`)"),
                     ("decide", "inside `_attribution.decide`"),
                     ("summary", "`Profile.summary()`")):
        b, f = med["before"][k], med["after"][k]
        print(f"| {label} | {b:.3f} | {f:.3f} | {f / b:.2f}x |" if b > 0 else f"| {label} | {b:.3f} | {f:.3f} | - |")
    print(f"\nDecided by (after): {runs['after'][0]['decided_by']}; before: {runs['before'][0]['decided_by']}.\n")
    print(f"_Command: `.venv/bin/python bench/attribution_parse.py --before {a.before} --repeats {a.repeats}`._")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
