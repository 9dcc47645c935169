"""``kit bench parse FILE [--json]``: benchmark text blocks or JSON/JSONL results, one row per run."""
from __future__ import annotations

import sys

from kit.cli._logs import dump


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="parse benchmark output")
    bsub = bench.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    b = bsub.add_parser("parse", help="benchmark text blocks or JSON/JSONL results -> one row per run")
    b.add_argument("file")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_bench)
    bench.set_defaults(func=lambda a: (bench.print_help(), 2)[1])


def _bench(args) -> int:
    from kit import logs
    from kit.util import frame_records

    df = logs.parse_bench(args.file)
    for w in df.attrs.get("warnings", []):
        print(f"kit: warning: {args.file}: {w}", file=sys.stderr)
    if args.json:
        dump(frame_records(df))
        return 0
    cols = [c for c in ("tool", "engine", "completed", "output_throughput", "median_tpot_ms", "median_ttft_ms",
                        "median_itl_ms", "accept_length") if c in df.columns and df[c].notna().any()]
    print(df[cols].to_string(index=False))
    return 0
