"""``kit source slice|grep|find``: the kit.source functions from a shell, on any host."""
from __future__ import annotations

import argparse
import json

from kit.cli._remote import connect_args, host_args


def register(subparsers) -> None:
    parser = subparsers.add_parser("source", help="read, search and navigate source files on a host")
    sub = parser.add_subparsers(dest="source_command", metavar="ACTION")

    p = sub.add_parser("slice", help="print lines START..END of PATH with line numbers (like sed -n)")
    p.add_argument("path")
    p.add_argument("start", type=int)
    p.add_argument("end", type=int)
    _host_arg(p)
    p.set_defaults(func=_slice)

    p = sub.add_parser("grep", help="search a file or directory on the host (rg if present, else grep -r)")
    p.add_argument("path", help="file or directory (the same order as kit.source.grep(host, path, pattern))")
    p.add_argument("pattern")
    p.add_argument("-C", "--context", type=int, default=0, help="lines of context around each match")
    p.add_argument("-F", "--fixed-strings", action="store_true", help="PATTERN is a fixed string, not a regex")
    p.add_argument("-i", "--ignore-case", action="store_true")
    p.add_argument("--glob", default="*.py", help="file name filter inside directories (default *.py; '' for all)")
    _host_arg(p)
    p.set_defaults(func=_grep)

    p = sub.add_parser("find", help="every definition/assignment of SYMBOL in PATH (functions, fields, keywords...)")
    p.add_argument("path")
    p.add_argument("symbol")
    p.add_argument("--json", action="store_true", help="print a JSON list of {path, line, kind, name, value, enclosing}")
    _host_arg(p)
    p.set_defaults(func=_find)

    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _host_arg(p: argparse.ArgumentParser) -> None:
    host_args(p, short_identity=False)  # -i is grep's --ignore-case here


def _slice(args) -> int:
    from kit import source

    with connect_args(args) as host:
        print(source.slice(host, args.path, args.start, args.end))
    return 0


def _grep(args) -> int:
    from kit import source

    with connect_args(args) as host:
        matches = source.grep(host, args.path, args.pattern, context=args.context, regex=not args.fixed_strings,
                              glob=args.glob or None, ignore_case=args.ignore_case)
    if matches:
        print(matches)
    return 0 if matches else 1


def _find(args) -> int:
    from kit import source

    with connect_args(args) as host:
        symbols = source.find(host, args.path, args.symbol)
    if args.json:
        print(json.dumps([s.to_dict() for s in symbols], indent=2))
    else:
        print(symbols if symbols else f"{args.symbol}: not defined or assigned in {args.path}")
    return 0 if symbols else 1
