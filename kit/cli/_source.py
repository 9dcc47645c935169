"""``kit source slice|grep|find``: the kit.source functions from a shell, on any host."""
from __future__ import annotations

from kit import source
from kit.cli._remote import connect_args, host_args
from kit.errors import KitError


def register(parser) -> None:
    sub = parser.add_subparsers(dest="source_command", metavar="ACTION")

    p = sub.add_parser("slice", help="print lines START..END of PATH with line numbers (like sed -n)")
    p.add_argument("path", help="file on the host")
    p.add_argument("start", type=int, help="first line (1-based)")
    p.add_argument("end", type=int, help="last line (inclusive)")
    host_args(p, short_identity=False)  # -i is grep's --ignore-case here
    p.set_defaults(func=_slice)

    p = sub.add_parser("grep", help="search a file or directory on the host (rg if present, else grep -r)",
                       description="PATTERN PATH, in grep's and rg's order. PATH PATTERN (the order of "
                                   "kit.source.grep(host, path, pattern)) is accepted too when only the "
                                   "first argument names a file or directory on the host.")
    p.add_argument("pattern", help="regular expression (a fixed string with -F)")
    p.add_argument("path", help="file or directory on the host")
    p.add_argument("-C", "--context", type=int, default=0, help="lines of context around each match")
    p.add_argument("-F", "--fixed-strings", action="store_true", help="PATTERN is a fixed string, not a regex")
    p.add_argument("-i", "--ignore-case", action="store_true", help="match without regard to case")
    p.add_argument("--glob", default="*.py", help="file name filter inside directories (default *.py; '' for all)")
    host_args(p, short_identity=False)  # -i is grep's --ignore-case here
    p.set_defaults(func=_grep)

    p = sub.add_parser("find", help="every definition/assignment of SYMBOL in PATH (functions, fields, keywords...)")
    p.add_argument("path", help="file or directory on the host")
    p.add_argument("symbol", help="name to look for (a function, field, keyword argument...)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list of {path, line, kind, name, value, enclosing}")
    host_args(p, short_identity=False)  # -i is grep's --ignore-case here
    p.set_defaults(func=_find)


def _slice(args) -> int:
    with connect_args(args) as host:
        print(source.slice(host, args.path, args.start, args.end))
    return 0


def _grep(args) -> int:
    with connect_args(args) as host:
        pattern, path = _grep_order(host, args.pattern, args.path)
        matches = source.grep(host, path, pattern, context=args.context, regex=not args.fixed_strings,
                              glob=args.glob or None, ignore_case=args.ignore_case)
    if matches:
        print(matches)
    return 0 if matches else 1


def _grep_order(host, first: str, second: str) -> tuple[str, str]:
    """(pattern, path): grep's order, PATTERN PATH, unless only ``first`` exists on the host, which
    then is the path (PATH PATTERN, as kit.source.grep takes them)."""
    if not _exists(host, second) and _exists(host, first):
        return second, first
    return first, second


def _exists(host, path: str) -> bool:
    try:
        host.stat(path)
    except (KitError, OSError):
        return False
    return True


def _find(args) -> int:
    with connect_args(args) as host:
        symbols = source.find(host, args.path, args.symbol)
    if args.json:
        print(symbols.to_json())
    else:
        print(symbols if symbols else f"{args.symbol}: not defined or assigned in {args.path}")
    return 0 if symbols else 1
