"""``kit serve ENGINE [ARGS...]``: start a serving engine on a host, wait until it serves, print its
address, keep it until Ctrl-C (or SIGTERM), then stop it and everything it started.

    kit serve tinyserve                       # the project's small CPU engine, for trying the kit
    kit serve --host gpu-box sglang --model-path M --tp 8
    kit serve --host gpu-box --port 8000 vllm Qwen/Qwen3-8B

The kit's options come before ENGINE; everything after it is the engine's own command line.
The line ``kit: serving ENGINE at URL`` (stderr, flushed) is printed once the engine's own process
listens and answers; wrappers and tests wait for it, never for a fixed time. The engine's command
line comes from the engine registry (``kit.engines``: ``Engine.launch``), through :func:`engine_command`.
"""
from __future__ import annotations

import argparse
import re
import shlex
import signal
import sys
import threading
from pathlib import Path

import kit.engines
from kit.errors import UsageError


def engine_names() -> list[str]:
    """The engines ``kit serve`` can start by name: those of the registry (``kit.engines``) with a launch command."""
    return [e.name for e in kit.engines.engines() if e.launch]


def engine_command(name: str, args: list[str]) -> tuple[str, dict, str]:
    """(command line, environment, engine name) that start engine ``name`` with ``args`` appended (each
    shell-quoted), from its registry entry (``Engine.launch``; ``Engine.bundled``: the repository directory
    put on ``PYTHONPATH``). UsageError for an engine without a launch command or a missing bundled one."""
    eng = kit.engines.engine(name)
    if not eng.launch:
        raise UsageError(f"kit serve: {name} has no launch command (known: {', '.join(engine_names())})")
    env = {}
    if eng.bundled:
        where = Path(kit.__file__).resolve().parents[1] / eng.bundled
        if not where.is_dir():
            raise UsageError(f"kit serve {name}: the bundled engine is not here ({where}): "
                             "run the kit from its source checkout")
        env["PYTHONPATH"] = str(where)
    return " ".join([eng.launch, *(shlex.quote(a) for a in args)]), env, eng.name


def add_engine_options(p) -> None:
    """The options of starting an engine, shared by ``kit serve`` and ``kit bench run --serve``."""
    p.add_argument("--host", default="local", help="where to start it: 'local' or an SSH target (default local)")
    p.add_argument("--port", type=int, help="its port (default: a free one; an engine argument --port wins)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for the engine (repeatable)")
    p.add_argument("--ready-timeout", type=float, default=900.0, metavar="S",
                   help="seconds to wait for the engine to serve (default 900)")
    p.add_argument("--session", default="live-session", metavar="DIR",
                   help="where its log and records go (default ./live-session)")


def register(s) -> None:
    s.usage = "kit serve [--host H] [--port P] [--env NAME=VALUE] ... ENGINE [ARG ...]"
    s.add_argument("engine", choices=engine_names(), metavar="ENGINE",
                   help=f"the engine: {', '.join(engine_names())} (tinyserve needs no arguments)")
    s.add_argument("args", nargs=argparse.REMAINDER, metavar="ARG",
                   help="the engine's own arguments: everything after ENGINE (kit's options go before it)")
    add_engine_options(s)
    s.set_defaults(func=_serve)


def start_engine(args, engine: str, engine_args: list[str]):
    """A started :class:`kit.live.Server` for ``engine`` with the shared options of ``args``."""
    from kit.live import server  # deferred: kit bench's parser takes this module's options, not kit.live (HTTP)

    cmd, env, kind = engine_command(engine, engine_args)
    for item in args.env:
        name, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    port = args.port if args.port is not None or re.search(r"--port[= ]\d+", cmd) else "free"
    return server(args.host, cmd, env=env, port=port, engine=kind, session=args.session, name=f"kit-serve-{engine}",
                  ready_timeout=args.ready_timeout, progress=sys.stderr.isatty())


def ready_line(srv, engine: str) -> str:
    """What ``kit serve`` says once the engine serves: the address, and the forward when there is one."""
    fwd = getattr(srv, "_forward", None)
    via = f" (forwarded from {srv.host.name}:{srv.port})" if fwd is not None else ""
    where = "" if srv.host.name == "local" else f"{srv.host.name}:"
    return f"kit: serving {engine} at {srv.url}{via}; log {where}{srv.job.log}"


def _serve(args) -> int:
    stop = threading.Event()

    def on_term(signum, frame):  # SIGTERM as Ctrl-C: the engine is stopped on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    srv = start_engine(args, args.engine, args.args[1:] if args.args[:1] == ["--"] else args.args)
    try:
        print(ready_line(srv, args.engine), file=sys.stderr, flush=True)
        print(srv.url, flush=True)
        print("kit: Ctrl-C stops it", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            if not srv.alive:
                print(f"kit: error: {args.engine} exited by itself; log {srv.log_path}", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        return 130
    finally:
        how = srv.stop()
        print(f"kit: {args.engine} stopped ({how})", file=sys.stderr, flush=True)
    return 0
