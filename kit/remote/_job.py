"""Job: a long-running command (a serving engine) started detached on a host, watched through its log.

Started with ``setsid`` so it owns a session and process group (pid == pgid == sid): it survives the
SSH connection closing, and ``stop()`` kills the whole group. Everything goes through short snippets
run by ``host.run``, so it works alike on every host kind and re-attaches from its pid and log path.
"""
from __future__ import annotations

import re
import time

from kit.errors import CommandFailed, CommandTimeout, RemoteError
from kit.remote._runner import alive_test, kill_group_script, shell_script
from kit.util import clip, html_fields
from kit.util import progress as progress_bar
from kit.util import quote as _q


def start_job(host, cmd: str, *, log: str, env: dict | None = None, cwd: str | None = None) -> "Job":
    """Start ``cmd`` detached on ``host``; output is appended to ``log`` (earlier content is kept)."""
    script = (
        f"log={_q(log)}\n"
        'case "$log" in /*) ;; *) log="$PWD/$log" ;; esac\n'  # before any cd: the job and Job.tail see one file
        'command -v setsid >/dev/null 2>&1 || { echo "setsid not found (util-linux)" >&2; exit 127; }\n'
        'off=$(stat -c %s -- "$log" 2>/dev/null || echo 0)\n'
        ': >> "$log" || exit 1\n'
        + shell_script(f'setsid bash --norc --noprofile -c {_q(cmd)} >> "$log" 2>&1 < /dev/null &\n'
                       'echo "$! $off"\n'
                       'printf \'%s\\n\' "$log"\n', env, cwd, host.name)
    )
    res = host.run(script, timeout=30)
    if not res.ok:
        raise CommandFailed(f"{host.name}: could not start job {cmd!r} (log {log}): {res.stderr.strip()}",
                            host=host.name, result=res)
    first, _, abs_log = res.stdout.partition("\n")
    pid, off = first.split()
    return Job(host, int(pid), abs_log.removesuffix("\n"), cmd=cmd, offset=int(off))


class Job:
    """A detached command on a host: ``tail``, ``alive``, ``wait_for`` readiness, ``stop``. ``offset``: the
    log's size when the job started (only what the job wrote is read). Re-attach with ``Job(host, pid, log)``."""

    def __init__(self, host, pid: int, log: str, *, cmd: str = "", offset: int = 0) -> None:
        self.host = host
        self.pid = int(pid)
        self.log = log
        self.cmd = cmd
        self.offset = int(offset)

    def __repr__(self) -> str:
        return f"Job(host={self.host.name!r}, pid={self.pid}, log={self.log!r}, cmd={self.cmd!r})"

    def _repr_html_(self) -> str:
        return html_fields("Job", [("host", self.host.name), ("pid", self.pid), ("log", self.log),
                                   ("command", clip(self.cmd or "", 200))])

    @property
    def alive(self) -> bool:
        """True while a (non-zombie) process of the job's session is running."""
        res = self.host.run(f"{alive_test(self.pid)} && echo yes || echo no", timeout=30)
        return res.stdout.strip() == "yes"

    def tail(self, n: int = 20) -> str:
        """The last ``n`` lines this job wrote to its log."""
        res = self.host.run(f"tail -c +{self.offset + 1} -- {_q(self.log)} | tail -n {int(n)}", timeout=30)
        if not res.ok:
            raise RemoteError(f"{self.host.name}: cannot read job log {self.log}: {res.stderr.strip()}",
                              host=self.host.name)
        return res.stdout

    def stop(self, grace: float = 10.0) -> str:
        """SIGTERM the job's process group and session, SIGKILL what is left after ``grace`` s:
        ``"terminated"``, ``"killed"`` or ``"not running"``."""
        res = self.host.run(kill_group_script(self.pid, grace), timeout=grace + 30)
        return res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "unknown"

    def wait_for(self, pattern: str | None = None, url: str | None = None, *, timeout: float = 600,
                 poll: float = 0.5, progress: bool = True) -> str | None:
        """Wait until the job's log matches ``pattern`` (regex) and/or ``url`` answers 2xx/3xx on the host.

        With neither, waits for the job to exit. A progress bar shows the elapsed time and the latest log
        line. Returns the matching log line (or None). CommandFailed if the job exits first (with the log's
        last line), CommandTimeout after ``timeout`` s (the job is left running)."""
        rx = re.compile(pattern) if pattern else None
        pos = self.offset
        pending = ""
        last_line = ""
        matched: str | None = None
        url_ok = url is None
        t0 = time.monotonic()
        with progress_bar(f"{self.host.name}: job {self.pid}", int(timeout), unit="s",
                          show=None if progress else False) as bar:
            while True:
                size, alive, code, new = self._poll(pos, url if not url_ok else None)
                pos = max(pos, size)
                if new:
                    lines = (pending + new).split("\n")
                    pending = lines.pop()
                    for line in lines + ([pending] if pending else []):
                        if line.strip():
                            last_line = line.strip()
                        if rx is not None and matched is None and rx.search(line):
                            matched = line
                    if len(pending) > 65536:
                        pending = pending[-65536:]
                url_ok = url_ok or 200 <= code < 400
                elapsed = time.monotonic() - t0
                bar.update(max(0, int(min(elapsed, timeout)) - bar.n))  # the bar counts seconds
                bar.set_postfix_str(clip(last_line, 80), refresh=True)
                waiting_for_something = rx is not None or url is not None
                if waiting_for_something and (rx is None or matched is not None) and url_ok:
                    return matched
                if not alive:
                    if not waiting_for_something:
                        return None
                    raise CommandFailed(
                        f"{self.host.name}: job {self.pid} ({clip(self.cmd, 60)!r}) exited before "
                        f"{_what(pattern, url)}; log {self.log} ends: {clip(last_line, 200)!r}",
                        host=self.host.name)
                if elapsed >= timeout:
                    raise CommandTimeout(
                        f"{self.host.name}: job {self.pid} not ready after {timeout:g} s (waiting for "
                        f"{_what(pattern, url)}); still running; last log line: {clip(last_line, 200)!r}",
                        host=self.host.name, cmd=self.cmd, stdout=last_line, timeout=timeout)
                time.sleep(poll)

    def _poll(self, pos: int, url: str | None) -> tuple[int, bool, int, str]:
        """One round trip: log size, alive flag, URL status code, and the log bytes after ``pos``."""
        log = _q(self.log)
        check_url = "c=0\n"
        if url:
            u = _q(url)
            check_url = (
                "if command -v curl >/dev/null 2>&1; then "
                f"c=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 2 {u} 2>/dev/null); "
                f"else c=$(python3 -c 'import sys,urllib.request as r\n"
                f"try: print(r.urlopen(sys.argv[1], timeout=2).status)\nexcept Exception: print(0)' {u}); fi\n"
            )
        script = (
            f"s=$(stat -c %s -- {log} 2>/dev/null || echo 0)\n"
            f"if {alive_test(self.pid)}; then a=1; else a=0; fi\n"
            + check_url
            + 'echo "$s $a ${c:-0}"\n'
            f'if [ "$s" -gt {pos} ]; then tail -c +{pos + 1} -- {log} | head -c $((s - {pos})); fi\n'
        )
        res = self.host.run(script, timeout=30)
        head, _, body = res.stdout.partition("\n")
        try:
            s, a, c = head.split()
            return int(s), a == "1", int(c) if c.isdigit() else 0, body
        except ValueError as exc:
            raise RemoteError(f"{self.host.name}: cannot poll job {self.pid} (log {self.log}): "
                              f"{res.stderr.strip() or head!r}", host=self.host.name) from exc


def _what(pattern: str | None, url: str | None) -> str:
    parts = [f"log pattern {pattern!r}"] * bool(pattern) + [f"URL {url}"] * bool(url)
    return " and ".join(parts) or "exit"
