"""Engine identity on the host: who the engine's processes are, who holds a port, leftovers, signals.

An engine started by :class:`kit.live.Server` carries two environment variables that every process
it starts inherits, even one that calls ``setsid`` and leaves the session: ``KIT_ENGINE_TAG`` (this
engine) and ``KIT_ENGINE_GROUP`` (the experiment it belongs to, if any). Processes are found by
those in ``/proc/<pid>/environ`` (one ``grep -z`` on the host) together with the session id, so
``stop()`` reaches setsid descendants and a re-run finds the engines a killed driver left.

Readiness is tied to the engine's own process: the listening socket on the port (``/proc/net/tcp``
and ``tcp6``, state 0A) must be an open file of one of the engine's processes (``/proc/<pid>/fd``).
When another process holds the port, :func:`port_holder` names it (``ss -ltnp`` where present,
else a scan of ``/proc/*/fd``). Every snippet here is POSIX shell with coreutils, grep and awk.

The driver side: :func:`guard_signals` makes SIGTERM and SIGHUP of this Python stop every engine
it started before the process ends (SIGINT already raises KeyboardInterrupt, whose unwinding and
``atexit`` stop them).
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Callable

from kit.util import quote as _q

TAG_VAR = "KIT_ENGINE_TAG"
GROUP_VAR = "KIT_ENGINE_GROUP"


def _env_pids(var: str, value: str) -> str:
    """Shell: the pids (one per line) of processes whose environment holds ``var=value``."""
    return (f"grep -l -s -z -x -F -e {_q(f'{var}={value}')} /proc/[0-9]*/environ 2>/dev/null "
            "| sed -n 's#^/proc/\\([0-9]*\\)/environ$#\\1#p'")


def members_script(tag: str, sid: int | None) -> str:
    """Shell: pids of the engine (its session and every process carrying its tag), non-zombie, sorted."""
    sess = (f"if command -v ps >/dev/null 2>&1; then ps -o pid=,stat= -s {int(sid)} | "
            "awk '$2 !~ /^Z/ {print $1}'; fi; "
            if sid else "")
    return f"{{ {sess}{_env_pids(TAG_VAR, tag)}; }} | sort -un"


def _listen_inodes(port: int) -> str:
    hexport = f"{int(port):04X}"
    return ("awk 'FNR>1 { n=split($2,a,\":\"); if (a[n]==\"" + hexport + "\" && $4==\"0A\") print $10 }' "
            "/proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u")


def owner_script(port: int, tag: str, sid: int | None) -> str:
    """Shell that sets ``o`` to ``own`` (an engine process holds the listening socket on ``port``),
    ``other`` (someone else does), ``none`` (nobody listens) or ``unknown`` (no /proc/net/tcp)."""
    return (
        "if [ ! -r /proc/net/tcp ]; then o=unknown; else\n"
        f"  inos=$({_listen_inodes(port)}); o=none\n"
        "  if [ -n \"$inos\" ]; then o=other\n"
        f"    for p in $({members_script(tag, sid)}); do\n"
        "      l=$(ls -l /proc/$p/fd 2>/dev/null)\n"
        "      for i in $inos; do case \"$l\" in *\"socket:[$i]\"*) o=own;; esac; done\n"
        "      [ \"$o\" = own ] && break\n"
        "    done\n"
        "  fi\n"
        "fi\n")


def port_holder(host, port: int) -> list[tuple[str, str]]:
    """[(pid, command)] of the processes listening on ``port`` on ``host``; [] when it is free (``?`` and the
    reason when the holder cannot be seen)."""
    script = (
        f"inos=$({_listen_inodes(port)})\n"
        "[ -z \"$inos\" ] && exit 0\n"
        "found=0\n"
        "for d in /proc/[0-9]*; do\n"
        "  l=$(ls -l $d/fd 2>/dev/null) || continue\n"
        "  for i in $inos; do case \"$l\" in *\"socket:[$i]\"*)\n"
        "    p=${d#/proc/}; c=$(tr '\\0' ' ' < $d/cmdline 2>/dev/null | cut -c1-160)\n"
        "    printf '%s\\t%s\\n' \"$p\" \"$c\"; found=1; break;; esac; done\n"
        "done\n"
        "[ $found = 0 ] && printf '?\\t%s\\n' 'a process this user cannot see (another user, or a container)'\n"
        "exit 0\n")
    lines = (line.partition("\t") for line in host.run(script, timeout=60).stdout.splitlines())
    return [(pid, cmd.strip()) for pid, _, cmd in lines if pid]


def describe_holders(holders: list[tuple[str, str]]) -> str:
    return "; ".join(f"pid {p} ({c})" if p != "?" else c for p, c in holders) or "nobody"


def kill_tagged(host, var: str, value: str, grace: float = 5.0) -> tuple[list[int], str]:
    """Stop every process on ``host`` whose environment holds ``var=value`` (TERM, then KILL what is left after
    ``grace`` s): (pids found, ``terminated``/``killed``/``none``)."""
    steps = max(1, int(round(grace / 0.1)))
    find = _env_pids(var, value)
    script = (
        f"p=$({find} | tr '\\n' ' ')\n"
        "echo \"$p\"\n"
        "[ -z \"$p\" ] && { echo none; exit 0; }\n"
        "kill -TERM $p 2>/dev/null\n"
        f"i=0; while [ $i -lt {steps} ]; do q=$({find}); [ -z \"$q\" ] && break; sleep 0.1; i=$((i+1)); done\n"
        f"q=$({find} | tr '\\n' ' ')\n"
        "if [ -n \"$q\" ]; then kill -KILL $q 2>/dev/null; echo killed; else echo terminated; fi\n")
    res = host.run(script, timeout=grace + 60)
    lines = res.stdout.splitlines()
    pids = [int(x) for x in (lines[0].split() if lines else []) if x.isdigit()]
    return pids, (lines[-1].strip() if len(lines) > 1 else "none")


def tagged_pids(host, var: str, value: str) -> list[int]:
    res = host.run(_env_pids(var, value), timeout=60)
    return sorted(int(x) for x in res.stdout.split() if x.isdigit())


# shell printing a TCP port nobody listens on (python3 binds port 0; else a scan of /proc/net/tcp)
FREE_PORT = (
    "if command -v python3 >/dev/null 2>&1; then "
    "python3 -c 'import socket; s=socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])'; exit; fi\n"
    "used=$(awk 'FNR>1 {n=split($2,a,\":\"); print a[n]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null)\n"
    "p=$(( 20000 + $$ % 30000 ))\n"
    "while echo \"$used\" | grep -qix \"$(printf '%04X' $p)\"; do p=$((p+1)); done\n"
    "echo $p\n")


# -- the driver: SIGTERM / SIGHUP stop every engine ---------------------------------------------

_installed: dict[int, object] = {}
_lock = threading.Lock()


def guard_signals(stop_all: Callable[[], None]) -> None:
    """Install (once, from the main thread) SIGTERM and SIGHUP handlers that call ``stop_all`` and
    then let the signal end the process as it would have (the previous handler, or the default
    action, so the exit status still says "killed by SIGTERM"). Handlers a program set itself are
    kept and called after the engines are stopped."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is None or sig in _installed:
                continue
            try:
                prev = signal.getsignal(sig)
                if prev == signal.SIG_IGN:
                    continue
                signal.signal(sig, _make_handler(sig, prev, stop_all))
                _installed[sig] = prev
            except (ValueError, OSError):  # not the main interpreter, or signals unavailable
                continue


def _make_handler(sig, prev, stop_all):
    def handler(signum, frame):
        try:
            stop_all()
        finally:
            if callable(prev) and prev not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler):
                prev(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
    return handler
