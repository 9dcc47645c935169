"""Run every benchmark script in bench/ and rewrite BENCHMARKS.md (``make bench``).

Each script is standalone, prints one Markdown section (heading, what was measured, a table of
figures and ratios from this one run, the targets and whether they were met) on stdout, and exits
non-zero if it could not measure. Progress goes to stderr.
"""
from __future__ import annotations

import datetime as _dt
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def main() -> int:
    scripts = sorted(p for p in BENCH.glob("*.py") if p.name != "run_all.py" and not p.name.startswith("_"))
    sections = []
    failed = []
    for script in scripts:
        rel = script.relative_to(ROOT)
        print(f"bench: {rel} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(rel)], cwd=ROOT, capture_output=True, text=True)
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            failed.append(str(rel))
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            sections.append(f"## {rel}\n\nFailed (exit {proc.returncode}) after {took:.1f} s:\n\n```\n{tail}\n```\n")
        else:
            sections.append(proc.stdout.strip() + f"\n\n_Command: `.venv/bin/python {rel}` ({took:.1f} s)._\n")
        print(f"bench: {rel} {'FAILED' if proc.returncode else 'ok'} in {took:.1f} s", file=sys.stderr, flush=True)
    cpu = _cpu_name()
    header = (
        "# Benchmarks\n\n"
        "Written by `make bench` (`bench/run_all.py`), which runs every script in `bench/` once; each\n"
        "figure below comes from that one run, and ratios compare figures measured in the same run.\n\n"
        f"- Date: {_dt.date.today().isoformat()}\n"
        f"- Machine: {cpu}, {_cores()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}\n"
    )
    (ROOT / "BENCHMARKS.md").write_text(header + "\n" + "\n".join(sections))
    if failed:
        print("bench: failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if __name__ == "__main__":
    raise SystemExit(main())
