"""``kit investigate A B`` (registered by ``kit.cli``): why is B slower (or faster) than A?

    kit investigate A B [--labels LA LB] [--json] [--ledger LEDGER]

A and B are runs: a folder, a file, files joined by ``,``, or a run id of the catalogue (its recorded inputs,
each checked against its recorded sha256) (traces with a ``reference/`` folder for graph
replays, engine logs, benchmark results, the model's config.json, nvidia-smi --query-gpu output). Prints each
step of the pipeline (inputs, validity, gap, itl, structure, settings, floor: ran, skipped or refused with the
reason), then the causes ranked by their share of the gap beyond noise, each with its evidence, trust, setting
and the ``kit.experiment`` that would confirm it, and what is not explained. An invalid run is said first.
``--ledger`` records each cause as an open hypothesis. Exit 0; 3 when a run is invalid.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import kit.runs
from kit.errors import UsageError
from kit.investigation import investigate


def register(p) -> None:
    p.add_argument("a", metavar="A", help="run A: a folder, a file, or files joined by ','")
    p.add_argument("b", metavar="B", help="run B, the same way")
    p.add_argument("--labels", nargs=2, metavar=("LA", "LB"), help="names of the two runs (default A B)")
    p.add_argument("--json", action="store_true", help="print the investigation as JSON")
    p.add_argument("--ledger", help="a ledger.json (or session folder's) to record each cause in as a hypothesis")
    p.set_defaults(func=_investigate)


RUN_ID = re.compile(r"[0-9A-Za-z-]{4,40}")


def _resolve(arg: str) -> str | list[str]:
    """A path as given; else a catalogue run id -> the local inputs it recorded (a changed file is refused)."""
    if any(Path(x).exists() for x in arg.split(",")) or not RUN_ID.fullmatch(arg):
        return arg
    run = kit.runs.get(arg)
    paths = []
    for i in run.get("inputs") or []:
        p = Path(i.get("path") or "")
        if i.get("host", "local") != "local" or not p.exists():
            continue
        if p.is_file() and i.get("sha256") and kit.runs.file_hash(p) != i["sha256"]:
            raise UsageError(f"kit investigate: run {run['run_id']}: {p} changed since it was recorded")
        paths.append(str(p))
    if not paths:
        raise UsageError(f"kit investigate: run {run['run_id']} ({run.get('kind')}) recorded no local input that "
                         "still exists")
    print(f"{arg}: catalogue run {run['run_id']} ({run.get('kind')}): {len(paths)} input(s)", file=sys.stderr)
    return paths


def _investigate(args) -> int:
    inv = investigate(_resolve(args.a), _resolve(args.b), labels=tuple(args.labels) if args.labels else None)
    ids = inv.record(args.ledger) if args.ledger else []
    if args.json:
        sys.stdout.write(inv.to_json() + "\n")
    else:
        print(repr(inv))
        if ids:
            print(f"ledger {args.ledger}: recorded {', '.join(ids)}")
    return 3 if inv.invalid else 0
