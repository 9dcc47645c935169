"""``kit profile summary`` (registered by ``kit.cli``).

    kit profile summary TRACE... [--json] [--phase decode|prefill|all] [--rules FILE] [--top N] [--no-cache]

``--json`` prints ``{"files", "ranks", "kernel_time_us", "wall_time_us", "steps", "categories":
[{"category", "time_us", "share_of_kernel", "share_of_wall"}], "warnings"}`` (shares as fractions;
the ``idle`` row has ``share_of_kernel: null``).
"""
from __future__ import annotations

import json
import sys


def register(subparsers) -> None:
    prof = subparsers.add_parser("profile", help="decode profiles (Kineto / nsys traces)")
    psub = prof.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    s = psub.add_parser("summary", help="kernel-category shares, idle, comm and AllReduce spread of traces")
    s.add_argument("traces", nargs="+", metavar="TRACE", help="one trace file per rank (.json, .json.gz, nsys csv/sqlite)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--phase", choices=("decode", "prefill", "all"), default="all")
    s.add_argument("--rules", help="TOML file of extra category rules ([[rule]] category/pattern)")
    s.add_argument("--top", type=int, default=5, help="top kernels per category (text output)")
    s.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-trace cache")
    s.set_defaults(func=_summary)
    prof.set_defaults(func=lambda a: (prof.print_help(), 2)[1])


def _summary(args) -> int:
    # start parsing big traces in worker processes first: the pandas import below then overlaps it
    from kit.profile import prefetch

    pending, ex = prefetch(args.traces, cache=not args.no_cache, rules=args.rules)
    try:
        from kit import profile

        p = profile.load(args.traces, rules=args.rules, cache=not args.no_cache, _prefetched=pending)
    finally:
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
    s = p.summary(args.phase, top=args.top)
    if args.json:
        json.dump(s.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(repr(s))
    if len(s.top):
        print("top kernels:")
        for r in s.top.itertuples():
            print(f"  {r.category:<18} {r.time_us:>12,.1f} us x{r.calls:<6} {r.name[:100]}")
    return 0
