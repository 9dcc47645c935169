"""Time of ``make report`` on the bundled sample session, against plain ``jupyter nbconvert --execute``.

Measured in one run on this machine:
  (a) ``kit report --session notebooks/sample --out <tmp>``: what ``make report`` runs once the venv
      and the vendored assets exist. It executes every notebook, redacts, exports, writes the index.
  (b) anchor: ``jupyter nbconvert --to html --execute`` run on the same notebooks one after the
      other. This is what a user would run without the kit: no parameters, no redaction, and pages
      that load require.js and MathJax from a CDN.
Targets: (a) <= 90 s on this 2-core machine; (a) <= 1.3x (b), so the kit's extra work (the offline
assets, redaction, index) costs little next to executing the notebooks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
TARGET_S = 90.0
TARGET_RATIO = 1.3


def _run(cmd: list[str], env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"report_time: {' '.join(cmd[:4])} ... failed (exit {proc.returncode})")
    return took


def main() -> int:
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="kit-bench-report-") as tmp:
        env = dict(os.environ, KIT_LEDGER=str(Path(tmp) / "anchor-ledger.json"))
        print("report_time: (a) kit report on notebooks/sample ...", file=sys.stderr, flush=True)
        kit_s = _run([py, "-m", "kit", "report", "--session", "notebooks/sample", "--out", f"{tmp}/report"],
                     dict(os.environ), ROOT)
        summary = json.loads((Path(tmp) / "report" / "report.json").read_text())
        failed = [n["name"] for n in summary["notebooks"] if not n["ok"]]
        if failed:
            raise SystemExit(f"report_time: notebooks failed: {failed}")
        nbs = sorted(NOTEBOOKS.glob("*.ipynb"))
        print(f"report_time: (b) jupyter nbconvert --execute on {len(nbs)} notebooks ...", file=sys.stderr, flush=True)
        anchor_s = 0.0
        for nb in nbs:
            anchor_s += _run([py, "-m", "jupyter", "nbconvert", "--to", "html", "--execute",
                              "--ExecutePreprocessor.timeout=300", "--output-dir", f"{tmp}/nbconvert", nb.name],
                             env, NOTEBOOKS)
    ratio = kit_s / anchor_s
    per_nb = "".join(f"| {n['name']} | {n['seconds']:.1f} |\n" for n in summary["notebooks"])
    print(f"""## Report time (`bench/report_time.py`)

How long `make report` takes on the bundled sample session, on this machine, measured once.
**(a)** Wall time of `kit report --session notebooks/sample --out <tmp>` as a subprocess. It executes
{len(summary['notebooks'])} notebooks in real kernels, redacts, exports offline HTML and writes the index.
**(b)** The anchor: `jupyter nbconvert --to html --execute` on the same notebooks, one after another.
(b) has no parameters, no redaction and no offline assets.

| measurement | seconds |
|---|---|
| (a) kit report, total | {kit_s:.1f} |
| (b) nbconvert --execute, sum of {len(nbs)} runs | {anchor_s:.1f} |
| ratio (a) / (b) | {ratio:.2f} |

Time per notebook, as `kit report` itself measured it (kernel start included):

| notebook | seconds |
|---|---|
{per_nb}
Targets: (a) <= {TARGET_S:.0f} s: **{'met' if kit_s <= TARGET_S else 'not met'}** ({kit_s:.1f} s);
(a) <= {TARGET_RATIO}x (b): **{'met' if ratio <= TARGET_RATIO else 'not met'}** ({ratio:.2f}x).
The machine is shared: 1-minute load average {os.getloadavg()[0]:.1f} when the run ended.""")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
