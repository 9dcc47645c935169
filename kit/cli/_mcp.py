"""``kit mcp``: the kit's analyses as MCP tools over stdio, or streamable HTTP on 127.0.0.1 (``--http PORT``)."""
from __future__ import annotations

import argparse
import atexit
import os
import sys
from pathlib import Path

from kit.errors import UsageError
from kit.mcp import Policy, serve_http, serve_stdio


def register(p) -> None:
    p.description = ("Read-only unless allowed: tools that write (ledger_record) are listed only with "
                     "--allow-write, tools that run code (source_evaluate, report_build) only with --allow-run "
                     "HOST, and then for the hosts named.")
    p.add_argument("--http", type=int, metavar="PORT", default=None,
                   help="serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (0: a free port)")
    p.add_argument("--root", action="append", default=[], metavar="DIR",
                   help="directory local paths must lie in (repeatable; default: --session's directory; never "
                        "/, a home directory or a credentials directory)")
    p.add_argument("--host", action="append", default=[], metavar="HOST", dest="hosts",
                   help="host the read tools may reach besides local (repeatable)")
    p.add_argument("--host-root", action="append", default=[], metavar="HOST=DIR",
                   help="directory on HOST its paths must lie in (repeatable; without one: any absolute path "
                        "its login user can read)")
    p.add_argument("--allow-run", action="append", default=[], metavar="HOST",
                   help="list the run tools, for this host only (repeatable; 'local' also allows report_build)")
    p.add_argument("--allow-write", action="store_true", help="list the write tools (ledger_record)")
    p.add_argument("--session", default=None, metavar="DIR",
                   help="session the resources and prompt describe (default: the bundled notebooks/sample)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="per-call timeout in seconds (default 120)")
    p.add_argument("--token-file", default=None, metavar="FILE",
                   help="with --http: where the bearer token every request needs is written (mode 0600; default "
                        "a new private directory, named when the server starts)")
    p.add_argument("--session-idle", type=float, default=None, metavar="S",
                   help="with --http: close a client session unused this long (default 600 s)")
    p.add_argument("--max-output", type=int, default=None, metavar="CHARS",
                   help="largest tool result in characters of JSON (default 256000); larger pages shrink")
    p.set_defaults(func=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    extra = {k: v for k, v in (("timeout_s", args.timeout), ("max_output", args.max_output)) if v is not None}
    host_roots = tuple(tuple(x.split("=", 1)) for x in args.host_root if "=" in x)
    if len(host_roots) != len(args.host_root):
        raise UsageError(f"--host-root {args.host_root}: expected HOST=DIR")
    roots = tuple(Path(r) for r in args.root) or ((Path(args.session),) if args.session else ())
    if not roots:
        raise UsageError("kit mcp: name the directory tools may read with --root DIR (or --session DIR)")
    policy = Policy(roots=roots, hosts=("local", *args.hosts),
                    run_hosts=tuple(args.allow_run), write=args.allow_write, host_roots=host_roots, **extra)
    for r in policy.roots:
        if not r.is_dir():
            raise UsageError(f"--root {r}: not a directory")
    session = Path(args.session) if args.session else None
    if args.http is None:
        serve_stdio(policy, session)
    else:
        def ready(url: str, token_file: Path) -> None:
            print(f"kit mcp: serving {url} (bearer token in {token_file})", file=sys.stderr, flush=True)

        token = Path(args.token_file) if args.token_file else None
        idle = {"session_idle_s": args.session_idle} if args.session_idle else {}
        serve_http(policy, args.http, session, ready=ready, token_file=token, **idle)
    _exit()


def _exit() -> None:
    """End the process now that the client has gone: a call abandoned at its timeout may still hold a
    worker thread, which the interpreter's normal exit would wait for. Exit handlers run first."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(0)
