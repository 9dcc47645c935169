"""Download, once per checkout, the published wheels of the engines whose source the tests read.

``tests/source/test_source_real_engines.py`` follows SGLang's and vLLM's own source (as published on
PyPI) with ``kit.source``. The wheels are large (about 874 MB in all, nearly all of it vLLM's compiled
code, of which the tests unpack only the ``.py`` files), so ``make test`` fetches them here, first,
saying what it downloads and showing pip's progress, instead of inside a silent test. They land in the
git-ignored ``.kit-cache/engines/wheels/``; a wheel already there is not fetched again.

    python tools/fetch_engines.py            # what make test runs
    python tools/fetch_engines.py --list     # print what would be downloaded, download nothing

Without a reachable package registry it says so and exits 0: the tests that need a wheel then skip,
saying why.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".kit-cache" / "engines" / "wheels"
# (package, version): the versions the real-engine source tests read
ENGINES = [("sglang", "0.5.4"), ("sglang", "0.5.6"), ("sglang", "0.5.8"), ("sglang", "0.5.9"),
           ("vllm", "0.10.2"), ("vllm", "0.11.0")]
ALL_MB = 874  # what the six wheels weighed together when a first `make test` downloaded them (issue 25)


def missing() -> list[tuple[str, str]]:
    return [e for e in ENGINES if not any(WHEELS.glob(f"{e[0]}-{e[1]}-*.whl"))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print what would be downloaded and stop")
    args = ap.parse_args(argv)
    todo = missing()
    if not todo:
        print(f"fetch_engines: the engine wheels are in {WHEELS.relative_to(ROOT)}/ already", file=sys.stderr)
        return 0
    size = f"about {ALL_MB} MB" if len(todo) == len(ENGINES) else f"part of about {ALL_MB} MB"
    names = ", ".join(f"{n}=={v}" for n, v in todo)
    print(f"fetch_engines: downloading {len(todo)} engine wheel(s), {size}, once per checkout, into "
          f"{WHEELS.relative_to(ROOT)}/ (the source tests read their .py files): {names}", file=sys.stderr)
    if args.list:
        return 0
    WHEELS.mkdir(parents=True, exist_ok=True)
    for i, (name, version) in enumerate(todo, 1):
        print(f"fetch_engines: [{i}/{len(todo)}] {name}=={version}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "on",
               "--disable-pip-version-check", "-d", str(WHEELS), f"{name}=={version}"]
        try:
            proc = subprocess.run(cmd, timeout=1200, stdout=sys.stderr)
        except subprocess.TimeoutExpired:
            print(f"fetch_engines: {name}=={version}: no answer from the package registry in 1200 s; "
                  "its tests will skip", file=sys.stderr)
            continue
        if proc.returncode != 0:
            print(f"fetch_engines: {name}=={version}: pip download failed (exit {proc.returncode}); "
                  "its tests will skip, saying why", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
