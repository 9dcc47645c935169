"""``kit report``: execute the notebooks on a session and write the offline HTML report."""
from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="run every notebook on a session and export the offline HTML report",
        description="Execute every notebook (papermill parameters: session, host, ledger_path), redact "
                    "secrets, export HTML with local assets, and write index.html with the ledger. "
                    "Exits 1 naming the notebook and cell when a notebook fails (its page is still written).",
    )
    p.add_argument("--session", default="notebooks/sample", help="session directory (default: notebooks/sample)")
    p.add_argument("--out", default="report", help="report directory, replaced as a whole (default: report)")
    p.add_argument("--no-input", action="store_true", help="hide code cells in the exported pages")
    p.add_argument("--host", default="local", help="host target passed to the notebooks (default: local)")
    p.add_argument("--notebooks", default=None,
                   help="directory of notebooks (default: the one holding the session, else ./notebooks)")
    p.add_argument("--timeout", type=float, default=300.0, help="per-cell timeout in seconds (default: 300)")
    p.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    from kit import report

    rep = report.build(args.session, args.out, notebooks=args.notebooks, host=args.host,
                       no_input=args.no_input, cell_timeout=args.timeout)
    if rep.failed:
        for r in rep.failed:
            print(f"kit report: notebook {r.name} failed at cell In[{r.failed_cell}]: {r.error} "
                  f"(see {rep.out / r.page})", file=sys.stderr)
        return 1
    return 0
