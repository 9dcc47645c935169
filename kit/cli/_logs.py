"""``kit logs parse LOG`` (tables found, counts, warnings) and ``kit logs spec LOG`` (normalised acceptance and
the pooled summary).

``kit logs spec --json`` prints
``{"engine", "version", "k", "records": [{"line", "time", "mean_acceptance_length", "draft_acceptance_rate",
"per_position", "after_idle"}], "summary": {"mean_acceptance_length", "draft_acceptance_rate", "windows",
"excluded_windows", "definition", "comparable"}}`` with rates as fractions, rounded to 4 decimals
(the logs print 2 or 3), and ``after_idle`` true for windows left out of the summary.
"""
from __future__ import annotations

import math
import os
import sys

import kit.engines
from kit import logs
from kit.util import frame_records, print_json, progress


def register(parser) -> None:
    lsub = parser.add_subparsers(dest="logs_command", metavar="SUBCOMMAND")
    p = lsub.add_parser("parse", help="parse a log: record kinds, counts, engine, version, warnings")
    p.add_argument("log", help="a serving log (.log, .gz or .zst)")
    p.add_argument("--engine", choices=kit.engines.names(), help="the engine, if the log does not say")
    p.add_argument("--version", dest="engine_version", help="the engine version, if the log does not say")
    p.add_argument("--json", action="store_true", help="print everything, tables included, as JSON")
    p.set_defaults(func=_parse)
    s = lsub.add_parser("spec", help="speculative acceptance, normalised across engines and versions")
    s.add_argument("log", help="a serving log with speculative-decoding lines")
    s.add_argument("--engine", choices=kit.engines.names(), help="the engine, if the log does not say")
    s.add_argument("--version", dest="engine_version", help="the engine version, if the log does not say")
    s.add_argument("--k", type=int, help="draft tokens per verify step, if the log does not say")
    s.add_argument("--json", action="store_true", help="print the records and the summary as JSON")
    s.set_defaults(func=_spec)


def _read(args, **kw):
    """``logs.read`` with a progress bar for long logs (terminal only, after 2 s)."""
    size = os.path.getsize(args.log) if os.path.isfile(args.log) else None
    with progress("reading log", size) as bar:
        data = logs.read(args.log, engine=args.engine, version=args.engine_version, **kw)
        bar.update(size or 0)
    return data


def _parse(args) -> int:
    data = _read(args)
    if args.json:
        dump(data.to_dict(tables=True))
        return 0
    print(repr(data))
    for kind, n in data.counts.items():
        print(f"  {kind:<11} {n} rows")
    if data.server_args:
        print(f"  server_args {len(data.server_args)} keys")
    for w in data.warnings:
        print(f"  warning: {w}")
    return 0


def _spec(args) -> int:
    data = _read(args, k=args.k)
    if not len(data.spec):  # nothing to summarise: say so and fail, never print NaN as an answer
        print(f"kit: error: {args.log}: no speculative-decoding lines (engine {data.engine or 'unknown'}, "
              f"version {data.version or 'unknown'}); 'kit logs parse {args.log}' lists what it holds",
              file=sys.stderr)
        return 1
    summary = logs.spec_summary(data)
    if args.json:
        cols = ["line", "time", "mean_acceptance_length", "draft_acceptance_rate", "per_position", "after_idle"]
        recs = [{k: _round(v) for k, v in r.items()}
                for r in frame_records(data.spec[[c for c in cols if c in data.spec]])]
        for r in recs:
            r["after_idle"] = bool(r.get("after_idle"))
        dump({"engine": data.engine, "version": data.version, "k": summary.k, "records": recs,
               "summary": {"mean_acceptance_length": _round(summary.mean_acceptance_length),
                           "draft_acceptance_rate": _round(summary.draft_acceptance_rate),
                           "windows": summary.windows, "excluded_windows": summary.excluded_windows,
                           "definition": summary.definition, "comparable": summary.comparable}})
        return 0
    print(repr(summary))
    for rec in frame_records(data.spec):
        al, rate = rec["mean_acceptance_length"], rec["draft_acceptance_rate"]
        al_s = f"{al:.2f}" if al is not None else "?"
        rate_s = f"{rate:.1%}" if rate is not None else "?"
        idle = "  (after idle, excluded)" if rec["after_idle"] else ""
        print(f"  line {rec['line']:>7}  {rec['time'] or '-':<19}  length {al_s:>5}  "
              f"draft acceptance {rate_s:>6}{idle}")
    for w in summary.warnings:
        print(f"  warning: {w}")
    return 0


def _round(x, places: int = 4):
    """Floats to ``places`` decimals (lists element-wise); NaN to None; everything else as is."""
    if isinstance(x, (list, tuple)):
        return [_round(v, places) for v in x]
    if isinstance(x, float):
        return None if math.isnan(x) else round(x, places)
    return x


def dump(obj) -> None:
    print_json(obj, indent=2, allow_nan=False, default=None)
