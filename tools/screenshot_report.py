"""Re-take the README's screenshots of a built report: the index page and page 04, in headless Chromium
at 1400 px wide, as a teammate opens them (code folded).

    kit report --out report && python tools/screenshot_report.py report

writes docs/report.png and docs/report-04.png (the top of each page, ``--height`` px tall).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.report._browser import load

ROOT = Path(__file__).resolve().parents[1]
SHOTS = {"index.html": "report.png", "04_single_stream_gap.html": "report-04.png"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a report directory written by kit report")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1800)
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    args = ap.parse_args(argv)
    for page, name in SHOTS.items():
        if not (args.report / page).is_file():
            print(f"screenshot_report: {args.report / page}: no such page", file=sys.stderr)
            return 1
        load(args.report / page, screenshot=args.out / name, window=(args.width, args.height))
        print(f"screenshot_report: {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
