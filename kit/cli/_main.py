"""The ``kit`` command: one sub-command per concern, each registered by its own module."""
from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import signal
import sys
import threading

from kit.errors import KitError
from kit.util import deferred, flush, flush_detached, kit_version, pending, recording_on, set_command_line

# Every command: the function that adds its options to the parser ``kit`` made for it (``module:function``) and
# its one-line help, in the order ``kit --help`` lists them. ``kit --help`` is built from this table alone; a
# command line that names a command imports that command's module only (``kit profile summary`` does not import
# the SSH layer behind ``kit run``), which then imports its work at module level.
COMMANDS = {
    "run": ("kit.cli._remote:register_run", "run a command on a host (local or SSH); exits with its code"),
    "env": ("kit.cli._remote:register_env", "fingerprint a host: OS, GPUs, link matrix, CUDA/NCCL/engine versions"),
    "source": ("kit.cli._source:register", "read, search and navigate source files on a host"),
    "profile": ("kit.cli._profile:register", "decode profiles (Kineto / nsys traces)"),
    "logs": ("kit.cli._logs:register", "parse serving logs (SGLang, vLLM, NCCL_DEBUG)"),
    "bench": ("kit.cli._bench:register", "run a benchmark; parse, reconcile and compare benchmark output"),
    "serve": ("kit.cli._serve:register", "start a serving engine, wait until it serves, stop it on Ctrl-C"),
    "report": ("kit.cli._report:register", "run every notebook on a session and export the offline HTML report"),
    "audit": ("kit.cli._audit:register", "silent slow paths, ignored settings and run validity of engine runs"),
    "mcp": ("kit.cli._mcp:register",
            "serve the kit's analyses as MCP tools (stdio, or HTTP on 127.0.0.1); read-only by default"),
    "runs": ("kit.cli._runs:register", "the run catalogue: list, show and query recorded runs; baselines"),
    "investigate": ("kit.cli._investigate:register", "why is run B slower than run A: ranked causes and experiments"),
}


def load(ref: str):
    """The function ``module:function`` names: a command's ``register`` (:data:`COMMANDS`) or a handler given
    by name (``set_defaults(func="kit.live._profiling:capture")``), whose module then loads only when it runs."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def build_parser(argv: list[str] | None = None, *, options: bool = True) -> argparse.ArgumentParser:
    """The ``kit`` parser: every command, or only the one ``argv`` names (its first word); ``options=False``:
    the commands from :data:`COMMANDS` alone, without their options (what ``kit --help`` prints)."""
    parser = argparse.ArgumentParser(prog="kit", description="decode-kit: LLM-serving decode investigations")
    parser.add_argument("--version", action="version", version=f"decode-kit {kit_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    first = argv[0] if argv else None
    for name, (register, text) in COMMANDS.items():
        if first in COMMANDS and name != first:
            continue
        p = sub.add_parser(name, help=text)
        p.set_defaults(func=lambda a, p=p: (p.print_help(), 2)[1])   # a command group without its sub-command
        if options:
            load(register)(p)
    _describe(sub)
    return parser


def _describe(sub) -> None:
    """A command (or sub-command) registered with a ``help`` only shows it as its ``--help`` description
    too, so that ``kit env --help`` says what the command does (argparse leaves it out otherwise)."""
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, p in sub.choices.items():
        if p.description is None and helps.get(name):
            p.description = helps[name][:1].upper() + helps[name][1:] + "."
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                _describe(action)


def main(argv: list[str] | None = None, detach: bool = False) -> int:
    """Run one ``kit`` command line; its exit code. ``detach``: the runs it recorded are written by a child
    that outlives this process (the ``kit`` program, :func:`run`), else here, after the answer."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv, options=bool(argv) and argv[0] in COMMANDS)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    set_command_line(argv)   # what runs recorded by this command carry
    # the answer first: the runs this command records are written after it is printed
    with deferred() if recording_on() else contextlib.nullcontext():
        code = _answer(args)
        if code != 130:   # the analyses that completed are recorded, also when the reader went away (| head)
            _write_runs(detach)
    return code


def _answer(args) -> int:
    """Run the command; its exit code, with a kit error as one line (1), a reader gone away as 141."""
    try:
        func = load(args.func) if isinstance(args.func, str) else args.func
        code = int(func(args) or 0)
        sys.stdout.flush()  # here, so that a reader gone away (| head) is seen now, not at exit
        return code
    except BrokenPipeError:
        # The reader of our output has gone (``kit ... | head``): stop quietly like other tools.
        # Python's exit flush would fail again on the broken pipe, so stdout goes to /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the broken pipe
    except KitError as exc:
        print(f"kit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _write_runs(detach: bool = False) -> None:
    """The runs this command recorded, written to the catalogue once its answer is out (``detach``: by a
    child that outlives this process, where one can be made)."""
    if pending():
        import kit.runs  # noqa: F401  deferred: the catalogue loads (and installs its writer) only to write a run

        if not (detach and flush_detached()):
            flush()


def run() -> None:
    """The ``kit`` program (``python -m kit`` and the ``kit`` script): :func:`main`, then the exit.

    The exit skips the interpreter's teardown: once pandas and pyarrow are loaded, freeing every module
    and every object of a profile just before the process ends costs ~50 ms, a tenth of a cold
    ``kit profile summary``. Output is flushed and the ``atexit`` handlers run first (temporary files,
    workers); with other Python threads still running the normal exit waits for them instead.

    A Ctrl-C ends it with 130 and no traceback wherever it lands, also where C code turns the interrupt
    into another error (numpy's import reports an ``ImportError`` when interrupted)."""
    interrupted: list[int] = []

    def on_interrupt(signum, frame):
        interrupted.append(signum)
        signal.default_int_handler(signum, frame)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:   # not when started with Ctrl-C ignored
        signal.signal(signal.SIGINT, on_interrupt)
    try:
        if os.environ.get("KIT_ANNOUNCE_READY"):
            # For tests and wrappers that interrupt the program: from this line on, a Ctrl-C is the kit's (exit
            # 130, no traceback). Before it, during the interpreter's own start-up, it is Python's. Printed
            # inside the try: a signal right after the line is the kit's too (it landed before it at load 7).
            print("kit: ready", file=sys.stderr, flush=True)
        code = main(detach=True)
    except KeyboardInterrupt:
        code = 130
    except Exception:
        if not interrupted:
            raise
        code = 130
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):   # a reader gone, a closed stream: let the interpreter cope
        raise SystemExit(code) from None
    except KeyboardInterrupt:
        os._exit(130)
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if others and not interrupted:
        # other (non-daemon) threads finish first; after a Ctrl-C nothing is waited for. Daemon threads (the
        # catalogue's input hashing, whose digests the run written above has waited for) are not waited for.
        raise SystemExit(code)
    try:
        atexit._run_exitfuncs()
    except KeyboardInterrupt:   # a Ctrl-C while the exit handlers run: the exit it asks for, no traceback
        code = 130
    os._exit(code)
