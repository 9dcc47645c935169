"""Server: a serving engine started on a host, followed until ready, profiled over HTTP, always stopped.

Built on :class:`kit.remote.Job` (``host.spawn``): the engine runs detached in its own session, so
``stop()`` can TERM then KILL everything it started. While it loads, one short shell snippet per
poll returns the new log bytes, whether the job is alive and the health endpoint's status; the log
is appended to the session (``logs/<name>.log``), the phase (weights, KV cache, graph capture,
ready) is read from it and shown in a tqdm bar. A process that dies raises ServerError with the
log's last lines. ``stop()`` runs from the context manager, on any exception while starting, and at
interpreter exit, so no engine is left behind. The profiler endpoints: ``_profiling.py``.
"""
from __future__ import annotations

import atexit
import base64
import binascii
import datetime as _dt
import html
import json
import os
import re
import socket
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Callable

import kit.engines
from kit import session as _session
from kit.bench import single_stream, sweep
from kit.errors import CommandTimeout, RemoteError, ServerError, UsageError
from kit.live import _engine, _profiling, _reach
from kit.remote import Host, connect
from kit.session import Provenance
from kit.util import clip, progress_wanted, write_atomic
from kit.util import quote as _q

# engine -> (phase, regex that starts it), in load order, each engine's from its module (kit.engines);
# "ready" is also reached by the health check. "" is the unknown engine (SGLang's words, the most common).
PHASES: dict[str, list[tuple[str, str]]] = {e.name: list(e.phases) for e in kit.engines.engines()}
PHASES[""] = PHASES["unknown"]
_PCT = re.compile(r"(\d{1,3})%")
# Every started, not yet stopped Server, held strongly: one the caller did not keep in a variable is
# still stopped at exit (atexit), on SIGTERM/SIGHUP (kit.live._engine.guard_signals) and on Ctrl-C.
_LIVE: dict[int, "Server"] = {}
_ALIVE = ("{{ if command -v ps >/dev/null 2>&1; then ps -o stat= -s {pid} | grep -qv '^Z'; "
          "else kill -0 -- -{pid} 2>/dev/null; fi; }}")


def _stop_all() -> None:  # atexit and SIGTERM: never leave an engine behind
    for s in list(_LIVE.values()):
        try:
            s.stop(grace=5)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_stop_all)


def _host_address(host) -> str:
    params = getattr(host, "params", None)
    name = getattr(params, "hostname", None) or (params.get("hostname") if isinstance(params, dict) else None)
    if name:
        return name
    target = getattr(host, "target", "local")
    if target in ("local", "localhost", ""):
        return "127.0.0.1"
    return target.rsplit("@", 1)[-1].split(":")[0]


def _open_session(session):
    if session is None:
        session = Path("live-session")
    if isinstance(session, (str, Path)):
        Path(session).mkdir(parents=True, exist_ok=True)
        return _session.open(session)
    return session


def _stamp() -> str:
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


class Server:
    """A serving engine on a host. Use :func:`server` to make one. ``url`` is where clients reach it;
    ``phases`` maps each load phase to the seconds after start it began; ``ready_s`` the load time."""

    def __init__(self, host, cmd: str, *, env: dict | None = None, port: int | None = None, engine: str | None = None,
                 session=None, name: str | None = None, url: str | None = None, workdir: str | None = None,
                 cwd: str | None = None, ready_timeout: float = 900.0, poll: float = 0.25,
                 progress: bool = True, grace: float = 15.0, log: str | Path | None = None,
                 group: str | None = None, record: str | Path | None = None, check_port: bool = True,
                 forward: bool | None = None) -> None:
        self.host = host if isinstance(host, Host) else connect(host)
        try:
            self.engine_def = kit.engines.guess(cmd) if engine is None else kit.engines.engine(engine)
        except UsageError as exc:
            raise ServerError(f"{exc} (or None: guessed from the command)") from None
        self.engine = "" if self.engine_def.name == "unknown" else self.engine_def.name
        m = re.search(r"--port[= ](\d+)", cmd)
        if port == "free":
            if m:
                raise ServerError(f"port='free' but the command already has {m.group(0)!r}")
            port = self._pick_free_port()
        if port is None:
            port = int(m.group(1)) if m else self.engine_def.port
        elif not m:
            cmd = f"{cmd} --port {int(port)}"
        self.port = int(port)
        self.cmd = cmd
        self.tag = f"kit-{uuid.uuid4().hex[:16]}"
        self.group = group
        self.check_port = check_port
        self.owner = "not checked"
        self.env = {k: str(v) for k, v in (env or {}).items() if v is not None}
        self.name = name or f"server-{_stamp()}"
        self.session = _open_session(session)
        self.workdir = workdir or self.host.private_dir("live")  # per-user, 0700: shared hosts
        self.forward, self._forward, self._url_given = forward, None, url is not None
        self.cwd = cwd
        self.url = url or f"http://{_host_address(self.host)}:{self.port}"
        self.local_url = f"http://127.0.0.1:{self.port}"  # as seen from the host itself
        self.ready_timeout = ready_timeout
        self.poll = poll
        self.progress = progress
        self.grace = grace
        self.job = None
        self.phases: dict[str, float] = {}
        self.ready_s: float | None = None
        self.stopped: str | None = None
        self.log_path = (Path(log) if log is not None else self.session.path("logs", f"{self.name}.log")).resolve()
        self.record_path = (Path(record) if record is not None else
                            self.log_path.with_name(f"{self.log_path.stem}.engine.json")).resolve()
        self._pos = 0
        self._tail: deque[str] = deque(maxlen=60)
        self._pending = b""
        self._t0 = 0.0
        self._profile_dir = f"{self.workdir}/{self.name}-profiles"
        var = self.engine_def.profile_dir_env   # an engine whose profiler directory is set at start (vLLM)
        if var:
            self._profile_dir = self.env.setdefault(var, self._profile_dir)

    # -- lifecycle ------------------------------------------------------------------------------
    def _pick_free_port(self) -> int:
        res = self.host.run(_engine.FREE_PORT, timeout=30)
        out = res.stdout.strip().splitlines()
        if not res.ok or not out or not out[-1].isdigit():
            raise self._error(f"cannot find a free port ({clip(res.stderr.strip(), 200)!r})", tail="")
        return int(out[-1])

    def _refuse_busy_port(self) -> None:
        """A clear error, before anything starts, when another process already listens on the port."""
        if not self.check_port:
            return
        holders = _engine.port_holder(self.host, self.port)
        if holders:
            raise self._error(f"port {self.port} is already in use by {_engine.describe_holders(holders)}; server "
                              f"{self.name} not started (stop that process, or use another port, e.g. port='free')",
                              tail="")

    def start(self) -> "Server":
        """Start the command and wait until its own process listens on the port and answers
        ``/health`` or ``/v1/models``. ServerError (nothing started) when the port is taken."""
        if self.job is not None:
            return self
        self._refuse_busy_port()
        self.host.run(f"mkdir -p {_q(self.workdir)}", timeout=30, check=True)
        remote_log = f"{self.workdir}/{self.name}-{self.tag[4:12]}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_bytes(b"")
        wrapped = f"{self.cmd}\nrc=$?; echo \"[kit] server process exited with status $rc\"; exit $rc"
        env = dict(self.env)
        env[_engine.TAG_VAR] = self.tag
        if self.group:
            env[_engine.GROUP_VAR] = self.group
        _engine.guard_signals(_stop_all)
        self._t0 = time.monotonic()
        self.job = self.host.spawn(wrapped, log=remote_log, env=env, cwd=self.cwd)
        _LIVE[id(self)] = self
        self._pos = self.job.offset
        try:
            self._write_record()
            self._record(str(self.log_path), "kit.live server log (followed from the host)")
            self._wait_ready()
            if not self._url_given:  # reached from here directly, or through a forward (kit/live/_reach.py)
                self.url, self._forward = _reach.reach(self.host, self.port, self.url, self.forward, self.name)
        except BaseException:
            self.stop()
            raise
        return self

    def _write_record(self) -> None:
        """``<log>.engine.json`` (or ``record=``): the engine's pid, process group, session, tag and the
        driver that started it, so a later run can find it if this Python dies without stopping it."""
        res = self.host.run(f"ps -o pgid=,sid= -p {self.job.pid} 2>/dev/null || true", timeout=30)
        ids = res.stdout.split()
        rec = {"host": self.host.name, "pid": self.job.pid,
               "pgid": int(ids[0]) if len(ids) == 2 and ids[0].isdigit() else self.job.pid,
               "sid": int(ids[1]) if len(ids) == 2 and ids[1].isdigit() else self.job.pid,
               "tag": self.tag, "group": self.group, "tag_var": _engine.TAG_VAR, "group_var": _engine.GROUP_VAR,
               "port": self.port, "cmd": self.cmd, "remote_log": self.job.log,
               "started": _dt.datetime.now().isoformat(timespec="seconds"),
               "driver": {"host": socket.gethostname(), "pid": os.getpid()}, "stopped": None}
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.record_path, json.dumps(rec, indent=1) + "\n")
        self.record = rec

    def _update_record(self, **fields) -> None:
        rec = getattr(self, "record", None)
        if rec is None:
            return
        rec.update(fields)
        try:
            write_atomic(self.record_path, json.dumps(rec, indent=1) + "\n")
        except OSError:
            pass

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        return self.job is not None and self.stopped is None and self.job.alive

    def pids(self) -> list[int]:
        """The engine's processes on the host now: its session and every process carrying its tag
        (a descendant that called ``setsid`` included)."""
        if self.job is None:
            return []
        res = self.host.run(_engine.members_script(self.tag, self.job.pid), timeout=30)
        return [int(x) for x in res.stdout.split() if x.isdigit()]

    def stop(self, grace: float | None = None) -> str:
        """SIGTERM the engine's process group and session, SIGKILL after ``grace`` s; then the same for
        any process still carrying the engine's tag (setsid descendants); pull the rest of the log.
        Returns ``"terminated"``, ``"killed"``, ``"not running"`` (idempotent)."""
        if self.job is None or self.stopped is not None:
            return self.stopped or "not started"
        g = self.grace if grace is None else grace
        try:
            how = self.job.stop(grace=g)
            _, how_tagged = _engine.kill_tagged(self.host, _engine.TAG_VAR, self.tag, grace=g)
            if how_tagged == "killed" or (how_tagged == "terminated" and how == "not running"):
                how = how_tagged if how != "killed" else how
        finally:
            _LIVE.pop(id(self), None)
            if self._forward is not None:
                self._forward.close()
        self.stopped = how
        try:
            self.sync_log()
        except RemoteError:
            pass
        left = self.pids()
        self._update_record(stopped=how, left=left)
        if left:
            raise self._error(f"server {self.name} (pid {self.job.pid}) still running after kill: pids {left}", tail="")
        return how

    # -- log ------------------------------------------------------------------------------------
    def sync_log(self, limit: int = 1 << 20) -> str:
        """Append what the engine logged since the last call to the session's copy; returns it."""
        if self.job is None:
            return ""
        _, _, _, text = self._poll(with_health=False, limit=limit)
        return text

    def tail(self, n: int = 20) -> str:
        self.sync_log()
        return "\n".join(list(self._tail)[-n:])

    def _error(self, msg: str, tail: str | None = None) -> ServerError:
        """A ServerError naming the host, with the log's last 15 lines (as read so far) unless ``tail`` is given."""
        return ServerError(f"{self.host.name}: {msg}", host=self.host.name,
                           tail="\n".join(list(self._tail)[-15:]) if tail is None else tail)

    def _poll(self, *, with_health: bool, limit: int = 1 << 20) -> tuple[int, bool, bool, str]:
        """One round trip: log size, alive, healthy (and, when healthy, who owns the port, in
        ``self.owner``), and the new log bytes. The bytes come base64-encoded, exactly ``size - pos``
        of them at most, so the session's copy is the host's log byte for byte."""
        log = _q(self.job.log)
        health = "c=0\n"
        owner = "o=-\n"
        if with_health:
            owner = (f'if [ "$c" = 200 ]; then\n{_engine.owner_script(self.port, self.tag, self.job.pid)}else o=-; fi\n'
                     if self.check_port else "o=unchecked\n")
            urls = " ".join(_q(f"{self.local_url}{p}") for p in _reach.HEALTH_PATHS)
            health = ("c=0; for u in " + urls + "; do "
                      "if command -v curl >/dev/null 2>&1; then "
                      "k=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \"$u\" 2>/dev/null); "
                      "else k=$(python3 -c 'import sys,urllib.request as r\n"
                      "try: print(r.urlopen(sys.argv[1], timeout=2).status)\n"
                      "except Exception: print(0)' \"$u\"); fi; "
                      "if [ \"$k\" = 200 ]; then c=200; break; fi; done\n")
        pos = int(self._pos)
        script = (f"if {_ALIVE.format(pid=self.job.pid)}; then a=1; else a=0; fi\n" + health + owner
                  + f"s=$(stat -c %s -- {log} 2>/dev/null || echo 0)\n"
                  + 'echo "$s $a $c $o"\n'
                  f'n=$((s - {pos})); [ $n -gt {int(limit)} ] && n={int(limit)}\n'
                  f'if [ $n -gt 0 ]; then tail -c +{pos + 1} -- {log} | head -c $n | base64 | tr -d "\\n"; fi\n')
        try:
            res = self.host.run(script, timeout=30)
        except CommandTimeout as exc:
            raise self._error(f"polling server {self.name} timed out", tail="") from exc
        head, _, body = res.stdout.partition("\n")
        try:
            size, alive, code, owner = head.split()
            size = int(size)
            data = base64.b64decode(body.strip(), validate=True) if body.strip() else b""
        except (ValueError, binascii.Error):
            raise self._error(f"cannot poll server {self.name} (log {self.job.log}): "
                              f"{clip(res.stderr.strip() or head, 200)!r}", tail="") from None
        if owner != "-":
            self.owner = owner
        if data:
            self._pos = pos + len(data)
            with self.log_path.open("ab") as f:
                f.write(data)
            chunk = self._pending + data
            raw_lines = chunk.split(b"\n")
            self._pending = raw_lines.pop()
            if len(self._pending) > 65536:
                self._pending = self._pending[-65536:]
            lines = [x.decode("utf-8", errors="replace") for x in raw_lines]
            for line in lines:
                if line.strip():
                    self._tail.append(line.rstrip("\r"))
            return size, alive == "1", code == "200", "\n".join(lines)
        return size, alive == "1", code == "200", ""

    # -- readiness ------------------------------------------------------------------------------
    def _wait_ready(self) -> None:
        phases = [p for p, _ in self.engine_def.phases]
        bar = _bar(self, len(phases)) if self.progress else None
        shown = 0
        try:
            while True:
                _, alive, healthy, text = self._poll(with_health=True)
                now = time.monotonic() - self._t0
                self.phases.update({ph: round(now, 3) for ph, rx in self.engine_def.phases
                                    if ph not in self.phases and re.search(rx, text)})
                ready = healthy and alive and self.owner in ("own", "unknown", "unchecked")
                if ready and "ready" not in self.phases:
                    self.phases["ready"] = round(now, 3)
                current = max((phases.index(p) for p in self.phases), default=-1)
                if bar is not None:
                    if current + 1 > shown:
                        bar.update(current + 1 - shown)
                        shown = current + 1
                    bar.set_description_str(f"{self.name}: {phases[current] if current >= 0 else 'starting'}")
                    last = self._tail[-1] if self._tail else ""
                    pct = _PCT.search(last) if "shard" in last.lower() else None
                    bar.set_postfix_str(f"{pct.group(1)}% of weights" if pct else clip(last, 70), refresh=True)
                if ready:
                    self.ready_s = round(now, 3)
                    self._update_record(ready_s=self.ready_s, port_owner=self.owner)
                    return
                if not alive:
                    self.sync_log()
                    phase = phases[current] if current >= 0 else "start-up"
                    holders = _engine.port_holder(self.host, self.port) if self.check_port else []
                    last = " | ".join(list(self._tail)[-3:])
                    if holders:
                        raise self._error(
                            f"server {self.name} died after {now:.1f} s and port {self.port} is held by "
                            f"{_engine.describe_holders(holders)}, not by this engine; nothing was measured "
                            f"(log {self.log_path}); last lines: {clip(last, 300)}")
                    raise self._error(f"server {self.name} died during {phase} after {now:.1f} s "
                                      f"(log {self.log_path}); last lines: {clip(last, 400)}")
                if now > self.ready_timeout:
                    if healthy and self.owner == "none":
                        raise self._error(
                            f"server {self.name}: {self.local_url} answers but no process listens on port "
                            f"{self.port} in the host's /proc/net/tcp (an engine in a container or another network "
                            f"namespace?); stopped after {self.ready_timeout:g} s; if a proxy of this engine holds "
                            "the port, pass check_port=False")
                    if healthy and self.owner == "other":
                        raise self._error(
                            f"server {self.name}: port {self.port} answers but is held by "
                            f"{_engine.describe_holders(_engine.port_holder(self.host, self.port))}, not by this "
                            f"engine (after {self.ready_timeout:g} s); stopped, nothing measured")
                    raise self._error(
                        f"server {self.name} not ready after {self.ready_timeout:g} s (phase "
                        f"{phases[current] if current >= 0 else 'start-up'}); stopped; last line: "
                        f"{clip(self._tail[-1] if self._tail else '', 200)!r}")
                time.sleep(self.poll)
        finally:
            if bar is not None:
                bar.close()

    # -- HTTP on the host -------------------------------------------------------------------------
    def profile(self, steps: int | None = None, seconds: float | None = None, *, load: bool | Callable[[], Any] = True,
                activities: tuple[str, ...] = ("CPU", "GPU"), name: str | None = None, timeout: float = 300.0,
                parse: bool = True, max_tokens: int = 256, into: str | Path | None = None):
        """Record the engine's own torch profile through its HTTP endpoints while it serves
        (``kit/live/_profiling.py``: the endpoints, the load, the trace files pulled into the session).

        ``steps`` (SGLang: ``num_steps``, the engine stops itself) or ``seconds`` (then
        ``/stop_profile``). ``load``: True sends streamed requests to ``url`` while recording; a
        callable is run in a thread instead; False records whatever traffic there is. Waits until
        the new trace files are complete (size stable, gzip intact), pulls them into the session
        (``traces/<name>/rank<N>.trace.json.gz``) and returns ``kit.profile.load`` of them (or the
        paths with ``parse=False``). ServerError (with the log tail) when nothing arrives in time.
        """
        return _profiling.profile(self, steps, seconds, load=load, activities=activities, timeout=timeout,
                                  name=name or f"{self.name}-profile-{_stamp()}", parse=parse, max_tokens=max_tokens,
                                  into=into)

    # -- bench ----------------------------------------------------------------------------------
    def bench(self, *, name: str | None = None, **kwargs):
        """``kit.bench.single_stream`` against this server, saved to ``bench/<name>.json`` with provenance."""
        return self._bench(single_stream, name or f"{self.name}-bench", kwargs)

    def load(self, *, name: str | None = None, **kwargs):
        """``kit.bench.sweep`` (request rates and/or concurrencies) against this server, every request
        saved to ``bench/<name>.json`` with provenance; returns the :class:`kit.bench.LoadResult`."""
        return self._bench(sweep, name or f"{self.name}-load", kwargs)

    def _bench(self, run: Callable, name: str, kwargs: dict):
        res = run(self.url, save=self.session.path("bench", f"{name}.json"), **kwargs)
        self._record(f"bench/{name}.json", f"kit.bench.{run.__name__} " + json.dumps(
            {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, list, tuple, dict))}))
        return res

    # -- provenance -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The command, environment, host and timings, as stored beside every artefact."""
        return {"host": self.host.name, "cmd": self.cmd, "env": dict(self.env), "engine": self.engine,
                "port": self.port, "url": self.url, "phases": dict(self.phases), "ready_s": self.ready_s,
                "stopped": self.stopped, "pid": self.job.pid if self.job else None, "tag": self.tag,
                "port_owner": self.owner, "forward": repr(self._forward) if self._forward is not None else None,
                "log": self.log_path.relative_to(self.session.root.resolve()).as_posix()
                if self.log_path.is_relative_to(self.session.root.resolve()) else self.log_path.name}

    def _record(self, rel: str, how: str) -> None:
        env = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))
        self.session.record(rel, Provenance.measured(host=self.host.name, how=how,
                                                     note=f"server: {(env + ' ') if env else ''}{self.cmd}"))

    def __repr__(self) -> str:
        state = self.stopped or ("ready" if self.ready_s is not None else "starting" if self.job else "not started")
        return f"Server(host={self.host.name!r}, name={self.name!r}, url={self.url!r}, state={state!r})"

    def _repr_html_(self) -> str:
        ph = ", ".join(f"{k} @ {v:.1f} s" for k, v in self.phases.items())
        return (f"<div><b>server</b> <code>{html.escape(self.name)}</code> on <b>{html.escape(self.host.name)}</b> "
                f"<code>{html.escape(self.url)}</code><br><code>{html.escape(clip(self.cmd, 200))}</code><br>"
                f"phases: {html.escape(ph)}</div>")


def _bar(s: Server, total: int):
    """The start-up bar, where a bar is wanted (a terminal or a notebook; never a pipe or KIT_PROGRESS=off)."""
    if not progress_wanted():
        return None
    try:
        from tqdm.auto import tqdm  # deferred: optional, and tqdm.auto probes for a notebook front end
    except ImportError:
        return None
    return tqdm(total=total, desc=f"{s.name}: starting", unit="phase", leave=False,
                bar_format="{desc} {n_fmt}/{total_fmt} phases {elapsed} {postfix}")


def server(host, cmd: str, *, env: dict | None = None, port: int | None = None, engine: str | None = None,
           start: bool = True, **kwargs) -> Server:
    """Start ``cmd`` (a serving engine) on ``host`` and wait until it serves; returns a :class:`Server`.

    ``host``: a target for :func:`kit.connect` or a Host. ``env``: variables set for the engine
    (None values are left unset). ``port``: appended as ``--port`` unless the command has one.
    ``engine``: a name of ``kit.engines.names()`` or None (guessed from the command) picks the log phases and
    the profiler protocol. Other options: ``session`` (directory or Session; default
    ``./live-session``), ``name``, ``url`` (where this machine reaches the server; default the
    host's address and ``port``), ``forward`` (None: through ``host.forward`` when ``url`` does not
    answer from here; True: always; False: never), ``workdir`` (on the host; default the user's
    private ``host.private_dir("live")``), ``cwd``, ``ready_timeout``, ``grace``,
    ``progress``. Use as a context manager so the engine is stopped whatever happens.
    """
    s = Server(host, cmd, env=env, port=port, engine=engine, **kwargs)
    return s.start() if start else s
