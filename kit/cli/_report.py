"""``kit report``: execute the notebooks on a session and write the offline HTML report."""
from __future__ import annotations

import argparse
import ast
import sys

from kit import report
from kit.errors import ReportError


def register(p: argparse.ArgumentParser) -> None:
    p.description = ("Execute every notebook (papermill parameters: session, host), redact "
                     "secrets, export HTML with local assets (code folded behind 'show code'), and write "
                     "index.html: verdict cards, the run table, the ledger; --pdf adds the whole report as one PDF. "
                     "Exits 1 naming the notebook and cell when a notebook fails (its page is still written).")
    p.add_argument("--session", default="notebooks/sample", help="session directory (default: notebooks/sample)")
    p.add_argument("--out", default="report", help="report directory, replaced as a whole (default: report)")
    p.add_argument("--no-input", action="store_true",
                   help="leave code cells out of the exported pages (by default each is folded behind 'show code')")
    p.add_argument("--pdf", action="store_true",
                   help="also write the whole report as one PDF, OUT/report.pdf (headless Chromium; needs pypdf)")
    p.add_argument("--host", default="local", help="host target passed to the notebooks (default: local)")
    p.add_argument("--notebooks", default=None,
                   help="directory of notebooks (default: the project's notebooks/, else ./notebooks)")
    p.add_argument("--timeout", type=float, default=300.0, help="per-cell timeout in seconds (default: 300)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="extra papermill parameter for every notebook (VALUE read as a Python literal, "
                        "else as a string), e.g. -p engine_path=None -p 'gpu_capture=None'; repeatable")
    p.set_defaults(func=_handle)


def _parse_params(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.isidentifier():
            raise ReportError(f"--param {item!r}: expected NAME=VALUE with NAME a Python identifier")
        try:
            out[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name] = raw
    return out


def _handle(args: argparse.Namespace) -> int:
    try:
        rep = report.build(args.session, args.out, notebooks=args.notebooks, host=args.host,
                           no_input=args.no_input, cell_timeout=args.timeout, parameters=_parse_params(args.param),
                           pdf=args.pdf)
    except KeyboardInterrupt:
        print(f"kit report: interrupted; {args.out} left as it was", file=sys.stderr, flush=True)
        raise
    if rep.failed:
        for r in rep.failed:
            print(f"kit report: notebook {r.name} failed at cell In[{r.failed_cell}]: {r.error} "
                  f"(see {rep.out / r.page})", file=sys.stderr)
        return 1
    return 0
