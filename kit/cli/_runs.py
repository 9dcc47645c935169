"""``kit runs list|show|query|table|baseline|baselines|export|compact``: the run catalogue (``kit.runs``) from
the command line.

``--store DIR`` (repeatable) reads those stores instead of one's own and ``$KIT_RUNS_SHARED``.
"""
from __future__ import annotations

import json
import sys

import pandas as pd

from kit import runs
from kit.util import clip, frame_records, print_json


def register(r) -> None:
    rsub = r.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    lst = rsub.add_parser("list", help="the latest recorded runs, newest first")
    lst.add_argument("--kind", help="only runs of this kind (summary, comparison, logs, bench, audit, experiment)")
    lst.add_argument("--limit", type=int, default=30, help="how many runs (default 30)")
    show = rsub.add_parser("show", help="one run: inputs, settings, figures, facts, tables")
    show.add_argument("run_id", help="the run's id (a unique prefix is enough)")
    q = rsub.add_parser("query", help="SQL over the catalogue (views runs, figures, facts, inputs, run_tables)")
    q.add_argument("sql", help="the query, e.g. \"SELECT run_id, value FROM figures WHERE name = 'step_us'\"")
    t = rsub.add_parser("table", help="a table a run recorded")
    t.add_argument("run_id", help="the run's id (a unique prefix is enough)")
    t.add_argument("name", help="the table's name (kit runs show lists them)")
    b = rsub.add_parser("baseline", help="name a run as a baseline (without RUN_ID: show the baseline)")
    b.add_argument("name", help="the baseline's name (letters, digits, '.', '_', '-')")
    b.add_argument("run_id", nargs="?", help="the run to name (a unique prefix is enough)")
    b.add_argument("--note", help="why this run is the baseline")
    bs = rsub.add_parser("baselines", help="every named baseline")
    e = rsub.add_parser("export", help="copy runs and their tables into a new store to hand to someone")
    e.add_argument("dest", help="a new or empty directory")
    e.add_argument("--where", help="SQL condition on the runs view, e.g. \"kind = 'summary'\"")
    c = rsub.add_parser("compact", help="merge the loose run files into one pack")
    for p in (lst, show, q, t, b, bs, e):
        p.add_argument("--store", action="append", metavar="DIR",
                       help="read this store instead of one's own and $KIT_RUNS_SHARED (repeatable)")
    for p in (lst, show, q, t, bs):
        p.add_argument("--json", action="store_true", help="print JSON")
    for p, fn in ((lst, _list), (show, _show), (q, _query), (t, _table), (b, _baseline), (bs, _baselines),
                  (e, _export), (c, _compact)):
        p.set_defaults(func=fn)


def _print_frame(df, as_json: bool) -> int:
    if as_json:
        print_json(frame_records(df))
    elif not len(df):
        print("(no rows)")
    else:
        with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                               "display.max_colwidth", 60):
            # a missing value prints as '-', not NaN/None
            print(df.astype(object).where(df.notna(), "-").to_string(index=False))
    return 0


def _list(args) -> int:
    df = runs.runs(args.kind, limit=args.limit, stores=args.store)
    if not args.json and len(df):
        df = df.assign(created=df["created"].dt.strftime("%Y-%m-%d %H:%M:%S"),
                       tables=df["tables"].map(lambda t: ",".join(t) if t is not None else ""))
    rc = _print_frame(df, args.json)
    lost = runs.failures()
    if lost:   # on stderr: the table (or JSON) on stdout stays what a script reads
        last = lost[-1]
        print(f"kit: {len(lost)} run{'s' if len(lost) > 1 else ''} not recorded in this store "
              f"(last {last.get('when')}, {last.get('kind')}: {last.get('error')})", file=sys.stderr)
    return rc


def _show(args) -> int:
    run = runs.get(args.run_id, stores=args.store)
    if args.json:
        print_json(run)
        return 0
    for k in ("run_id", "kind", "created", "user", "machine", "host", "label", "command", "kit_version", "input_hash"):
        print(f"{k:<12} {run[k]}")
    for i in run["inputs"] or []:
        print(f"input        {i['role'] + ': ' if i['role'] else ''}{i['host']}:{i['path']}  "
              f"{'sha256 ' + i['sha256'][:16] if i['sha256'] else '(not hashed: not a local file)'}")
    print(f"settings     {json.dumps(json.loads(run['settings'] or '{}'), sort_keys=True)}")
    for f in run["facts"] or []:
        print(f"fact         {f['name']}: {f['value']}")
    for f in run["figures"] or []:
        item = f" [{f['item']}]" if f["item"] is not None else ""
        print(f"figure       {f['name']}{item} = {f['value']:g} {f['unit']}")
    print(f"tables       {', '.join(run['tables'] or []) or '-'}")
    for w in run["warnings"] or []:
        print(f"warning      {w}")
    return 0


def _query(args) -> int:
    cols, data = runs.rows(args.sql, stores=args.store)
    if args.json:
        print_json([dict(zip(cols, r)) for r in data])
        return 0
    if not data:
        print("(no rows)")
        return 0
    text = [[_cell(v) for v in r] for r in data]
    widths = [max(len(c), *(len(r[i]) for r in text)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for r in text:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    return 0


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return clip("" if v is None else str(v), 60)


def _table(args) -> int:
    return _print_frame(runs.table(args.run_id, args.name, stores=args.store), args.json)


def _baseline(args) -> int:
    if args.run_id is None:
        b = runs.baseline(args.name, stores=args.store)
        ptr = b["baseline"]
        print(f"baseline {args.name}: run {b['run_id']} ({b['kind']}, {b['created']:%Y-%m-%d %H:%M}), named by "
              f"{ptr['by']} at {ptr['at']}{' - ' + ptr['note'] if ptr['note'] else ''}")
        return 0
    ptr = runs.set_baseline(args.name, args.run_id, note=args.note, root=(args.store or [None])[0])
    print(f"baseline {ptr['name']} -> run {ptr['run_id']} ({ptr['kind']})")
    return 0


def _baselines(args) -> int:
    return _print_frame(runs.baselines(stores=args.store), args.json)


def _export(args) -> int:
    n = runs.export(args.dest, args.where, stores=args.store)
    print(f"{n} runs copied to {args.dest}")
    return 0


def _compact(args) -> int:
    print(f"{runs.compact()} loose run files merged")
    return 0
