#!/usr/bin/env python3
"""What the input hardening costs: report redaction, and the trace checks of ``kit.profile.reading._validate``.

Measured in one run on this machine:
  (a) ``kit report --session notebooks/sample --out <tmp>`` wall time (what ``make report`` runs), and
      the in-process time the redaction takes over that run's artefacts (every ipynb copy through
      ``redact_notebook``, every page through ``redact_html``, the ledger copy through
      ``redact_json_text``): its share of (a). Target: <= 10% of the report's wall time.
  (b) the credential corpus of ``tests/redact/secret_corpus.py``: formats masked and decoys masked.
  (c) ``kit.profile.load + summary`` of the 62 MB xdit trace (``../shared/data``), cold, in-process,
      median of 3, with the checks and with them replaced by identities (same process, same file).
      Target: checks cost <= 10%.
Prints one Markdown section; progress goes to stderr.
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
sys.path.insert(0, str(ROOT))
# ../shared/data beside the checkout; KIT_SHARED_DATA names it when the checkout is elsewhere (a worktree)
SHARED = Path(os.environ.get("KIT_SHARED_DATA") or ROOT / ".." / "shared" / "data").resolve()
XDIT = SHARED / "traces" / "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz"


def _report() -> tuple[float, float, int]:
    import nbformat

    from kit.redact import redact_html, redact_json_text, redact_notebook

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kit", "report", "--session", "notebooks/sample", "--out", str(out)],
                       cwd=ROOT, check=True, capture_output=True, timeout=600)
        wall = time.perf_counter() - t0
        nbs = [nbformat.read(p, as_version=4) for p in sorted((out / "ipynb").glob("*.ipynb"))]
        pages = [p.read_text() for p in sorted(out.glob("*.html"))]
        ledger = (out / "ledger.json").read_text() if (out / "ledger.json").is_file() else "{}"
        t0 = time.perf_counter()
        masked = 0
        for nb in nbs:
            masked += redact_notebook(nb)[0]
        for page in pages:
            masked += redact_html(page)[1]
        masked += redact_json_text(ledger)[1]
        return wall, time.perf_counter() - t0, masked


def _corpus() -> tuple[int, int, int, int]:
    from kit.redact import redact_text
    from tests.redact.secret_corpus import CREDENTIALS, DECOYS

    caught = sum(needle not in redact_text(line)[0] for _, line, needle in CREDENTIALS)
    kept = sum(redact_text(d)[0] == d for d in DECOYS)
    return caught, len(CREDENTIALS), len(DECOYS) - kept, len(DECOYS)


def _trace() -> tuple[float, float]:
    from kit import profile
    from kit.profile import _assemble
    from kit.profile.reading import _validate

    def run() -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            profile.load([str(XDIT)], cache=False).summary()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    profile.load([str(XDIT)], cache=False).summary()  # imports and page cache
    with_checks = run()
    saved = (_validate.clean_events, _assemble.check_frames)
    _validate.clean_events = lambda evs, col, cats: evs
    _assemble.check_frames = lambda fr, name: fr
    try:
        without = run()
    finally:
        _validate.clean_events, _assemble.check_frames = saved
    return with_checks, without


def main() -> int:
    print("bench: report ...", file=sys.stderr, flush=True)
    wall, red, masked = _report()
    caught, n_cred, decoys_masked, n_decoys = _corpus()
    print("bench: trace ...", file=sys.stderr, flush=True)
    trace = _trace() if XDIT.is_file() else None
    print("## Input hardening: redaction and trace checks (`bench/hardening.py`)\n")
    print("| measurement | figure |\n|---|---:|")
    print(f"| (a) kit report on the sample session, wall | {wall:.1f} s |")
    print(f"| (a) redaction of that run's artefacts (ipynb copies, pages, ledger), in-process | {red:.2f} s |")
    print(f"| (a) redaction / report wall | {100 * red / wall:.1f}% |")
    print(f"| (a) spans masked in the sample report (no secret in it) | {masked} |")
    print(f"| (b) credential formats masked | {caught} of {n_cred} |")
    print(f"| (b) decoys masked | {decoys_masked} of {n_decoys} |")
    if trace:
        print(f"| (c) xdit trace load+summary, with checks (median of 3) | {trace[0]:.3f} s |")
        print(f"| (c) the same without checks | {trace[1]:.3f} s |")
        print(f"| (c) ratio with / without | {trace[0] / trace[1]:.2f}x |")
    print()
    print(f"Targets: redaction <= 10% of the report: **{'met' if red <= 0.1 * wall else 'NOT met'}**; "
          f"0 credential formats leaked: **{'met' if caught == n_cred else 'NOT met'}**; "
          f"0 decoys masked: **{'met' if decoys_masked == 0 else 'NOT met'}**"
          + (f"; trace checks <= 1.10x: **{'met' if trace[0] <= 1.1 * trace[1] else 'NOT met'}**." if trace
             else "; trace checks: not measured (../shared/data absent)."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
