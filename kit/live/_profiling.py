"""Profiling a live engine through its own HTTP endpoints (``Server.profile``, and ``kit profile capture`` of an
engine on this machine): start and stop the torch profiler, keep requests flowing while it records, wait for
complete trace files and pull them into the session.

A POST goes through the engine's host (curl, else python3: the engine may listen on its loopback only), or
through the SSH forward when the server is reached through one. The endpoints, as read from the engines' source:

- **SGLang** (0.5.9 ``srt/entrypoints/http_server.py`` ``/start_profile`` GET|POST, body
  ``ProfileReqInput`` in ``srt/managers/io_struct.py``): ``output_dir`` (default
  ``$SGLANG_TORCH_PROFILER_DIR`` or ``/tmp``), ``start_step``, ``num_steps`` (stops by itself
  after that many forward steps), ``activities`` (``CPU``, ``GPU``, ``MEM``, ``RPD``),
  ``profile_by_stage``, ``with_stack``, ``record_shapes``, ``merge_profiles``, ``profile_prefix``,
  ``profile_stages``; ``/stop_profile`` takes no body. Files
  ``{output_dir}/{profile_id}-TP-{rank}[-DP-..][-PP-..][-EP-..].trace.json.gz`` where
  ``profile_id`` is ``str(time.time())`` (``managers/scheduler_profiler_mixin.py``).
- **vLLM** (``entrypoints/openai/api_server.py``, vllm-project/vllm at commit 048027f, and the later
  ``entrypoints/serve/profile`` router): ``POST /start_profile`` and ``POST /stop_profile``, no
  body; the routes exist only when ``VLLM_TORCH_PROFILER_DIR`` is set at start (newer releases:
  ``--profiler-config``); traces ``*.pt.trace.json.gz`` land in that directory. There is no step
  count, so ``profile(steps=...)`` is refused for vLLM: use ``seconds=``.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import kit.engines
from kit import profile as _profile
from kit.bench import list_models, stream_request
from kit.errors import KitError, ServerError, UsageError
from kit.live import _reach
from kit.util import clip
from kit.util import quote as _q

_PY_POST = resources.files("kit.live").joinpath("_host", "post.py").read_text(encoding="utf-8")
"""The POST program for a host without curl (``_host/post.py``)."""


def post(server, path: str, body: dict | None) -> tuple[int, str]:
    """POST on the host itself (the engine may listen on its loopback only): curl, else python3;
    through the forward when there is one."""
    if server._forward is not None:
        return _reach.post(server.url, path, body)
    data = json.dumps(body) if body is not None else ""
    url = _q(server.local_url + path)
    cmd = ("if command -v curl >/dev/null 2>&1; then "
           "curl -s -X POST --max-time 600 -H 'Content-Type: application/json' "
           + (f"-d {_q(data)} " if body is not None else "")
           + f"-w '\\n%{{http_code}}' {url}; else python3 -c {_q(_PY_POST)} {url} {_q(data)}; fi")
    res = server.host.run(cmd, timeout=630)
    out, _, code = res.stdout.rpartition("\n")
    return (int(code) if code.strip().isdigit() else 0), out

def _list_traces(server, d: str) -> dict[str, int]:
    res = server.host.run(f"find {_q(d)} -maxdepth 1 -type f \\( -name '*.json' -o -name '*.json.gz' \\) "
                        f"-printf '%s %p\\n' 2>/dev/null; true", timeout=30)
    out = {}
    for line in res.stdout.splitlines():
        size, _, path = line.partition(" ")
        if size.isdigit():
            out[path] = int(size)
    return out


def profile(server, steps: int | None = None, seconds: float | None = None, *, load: bool | Callable[[], Any] = True,
            activities: tuple[str, ...] = ("CPU", "GPU"), name: str, timeout: float = 300.0,
            parse: bool = True, max_tokens: int = 256, into: str | Path | None = None):
    """``Server.profile`` (its docstring says what the arguments do): the endpoints, the load, the trace files
    pulled into the session."""
    if (steps is None) == (seconds is None):
        raise ServerError("profile(): give exactly one of steps= or seconds=")
    if not server.engine_def.profile_steps and steps is not None:
        raise ServerError(f"profile(): {server.engine_def.title}'s /start_profile takes no step count; use seconds=")
    if server.job is None or server.stopped is not None:
        raise ServerError(f"profile(): server {server.name} is not running")
    d = server._profile_dir if server.engine_def.profile_dir_env else f"{server._profile_dir}/{name}"
    server.host.run(f"mkdir -p {_q(d)}", timeout=30, check=True)
    before = _list_traces(server, d)
    body = None
    if not server.engine_def.profile_dir_env:   # the directory and the step count go in the request's body
        body = {"output_dir": d, "activities": list(activities)}
        if steps is not None:
            body["num_steps"] = int(steps)
    stop_load = threading.Event()
    loader = None
    if load:
        loader = threading.Thread(target=_drive if load is True else load,
                                  args=(server.url, stop_load, max_tokens) if load is True else (), daemon=True)
    code, text = post(server, "/start_profile", body)
    if code != 200:
        raise server._error(f"{server.local_url}/start_profile answered HTTP {code}: {clip(text.strip(), 200)!r}",
                            tail=server.tail(15))
    if loader is not None:
        loader.start()
    try:
        if seconds is not None:
            time.sleep(float(seconds))
            code, text = post(server, "/stop_profile", None)
            if code != 200:
                raise server._error(f"{server.local_url}/stop_profile answered HTTP {code}: "
                                    f"{clip(text.strip(), 200)!r}", tail=server.tail(15))
        files = _wait_traces(server, d, before, timeout)
    finally:
        stop_load.set()
        if loader is not None:
            loader.join(30)
    out_dir = (Path(into) if into is not None else server.session.path("traces", name)).resolve()
    local = _pull(server, files, out_dir)
    how = (f"kit.live Server.profile: POST {server.local_url}/start_profile "
           f"{json.dumps(body) if body else '(no body)'}" + (" + /stop_profile" if seconds else ""))
    server._record(str(out_dir), how)
    if not parse:
        return local
    return _profile.load(local)

def _drive(url: str, stop: threading.Event, max_tokens: int) -> None:
    """Keep the engine busy while it records: streamed requests, one after another, until ``stop``."""
    try:
        model = list_models(url)[0]
    except Exception:  # noqa: BLE001 - the engine may not list models; send without a name
        model = ""
    while not stop.is_set():
        stream_request(url, model=model, prompt="profile " * 16, max_tokens=max_tokens, timeout=60)


def _settled(listing: Callable[[], dict[str, int]], before: dict[str, int], whole: Callable[[list[str]], bool],
            timeout: float, poll: float, check: Callable[[], None] = lambda: None) -> list[str] | None:
    """The new trace files (``listing()``'s paths not in ``before``) once their sizes stood still for one poll
    and ``whole`` says each is complete; None after ``timeout`` s. ``check`` runs each poll (it may raise)."""
    deadline, last = time.monotonic() + timeout, None
    while True:
        now = {p: s for p, s in listing().items() if p not in before}
        if now and now == last and all(s > 0 for s in now.values()) and whole(sorted(now)):
            return sorted(now)
        last = now
        check()
        if time.monotonic() > deadline:
            return None
        time.sleep(poll)


def _rank_name(path: str, i: int) -> str:
    """The name a trace file gets in the session: ``rank<N>.trace.json.gz``, N from the engine's ``TP-<N>``
    (SGLang), else the file's place ``i``."""
    m = re.search(r"TP-(\d+)", os.path.basename(path))
    return f"rank{int(m.group(1)) if m else i}.trace.json.gz"


def _wait_traces(server, d: str, before: dict[str, int], timeout: float) -> list[str]:
    def whole(paths: list[str]) -> bool:
        gz = [p for p in paths if p.endswith(".gz")]
        return server.host.run("gzip -t -- " + " ".join(_q(p) for p in gz), timeout=120).ok if gz else True

    def check() -> None:
        if not server.alive:
            raise server._error(f"server {server.name} died while profiling; log ends: "
                                f"{clip(' | '.join(list(server._tail)[-3:]), 300)}", tail=server.tail(15))

    files = _settled(lambda: _list_traces(server, d), before, whole, timeout, max(server.poll, 0.5), check)
    if files is None:
        raise server._error(f"no complete trace in {d} after {timeout:g} s (server {server.name}); last log "
                            f"line: {clip(server.tail(1), 200)!r}", tail=server.tail(15))
    return files


def _pull(server, files: list[str], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    local = []
    for i, remote in enumerate(files):
        name = _rank_name(remote, i)
        if not remote.endswith(".gz"):
            server.host.run(f"gzip -f -- {_q(remote)}", timeout=300, check=True)
            remote += ".gz"
        dest = out_dir / name
        server.host.get(remote, str(dest))
        local.append(dest)
    return sorted(local)


def _local(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host in ("localhost", "127.0.0.1", "::1", socket.gethostname()):
        return True
    try:
        return socket.gethostbyname(host).startswith("127.")
    except OSError:
        return False


def _post(url: str, path: str, body: dict | None) -> tuple[int, str]:
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(body or {}).encode() if body else b"",
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"


def _traces(d: str) -> dict[str, int]:
    try:
        names = os.listdir(d)
    except OSError:
        return {}
    return {os.path.join(d, n): os.path.getsize(os.path.join(d, n)) for n in names
            if n.endswith((".json", ".json.gz")) and os.path.isfile(os.path.join(d, n))}


def _whole(paths: list[str]) -> bool:
    try:
        for path in (p for p in paths if p.endswith(".gz")):
            with gzip.open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
        return True
    except (OSError, EOFError, zlib.error):
        return False


def _abandon(url: str, d: str, before: dict[str, int]) -> None:
    """Stop a recording given up on (Ctrl-C): ``/stop_profile``, one short request so that an engine
    which closes the profile at its next step takes one, and a few seconds for its file to land, so
    the directory is not removed under the engine's writer. Best effort: the interrupt goes on."""
    _post(url, "/stop_profile", None)
    stream_request(url, model="", prompt="stop", max_tokens=2, timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not {p for p in _traces(d) if p not in before}:
        time.sleep(0.1)


def _place(files: list[str], out: str) -> list[str]:
    """Each trace into ``out`` as ``rank<N>.trace.json.gz`` (gzipped if it was not), through a temporary
    name and a rename, so an interrupted copy leaves no file that reads as a trace."""
    os.makedirs(out, exist_ok=True)
    placed = []
    for i, src in enumerate(files):
        dest = os.path.join(out, _rank_name(src, i))
        fd, tmp = tempfile.mkstemp(prefix=".capture.", suffix=".tmp", dir=out)
        try:
            with os.fdopen(fd, "wb") as w, open(src, "rb") as r:
                if src.endswith(".gz"):
                    shutil.copyfileobj(r, w)
                else:
                    with gzip.GzipFile(fileobj=w, mode="wb") as gz:
                        shutil.copyfileobj(r, gz)
            os.replace(tmp, dest)
        except BaseException:
            os.unlink(tmp)
            raise
        placed.append(dest)
    return placed


def capture(args) -> int:
    """``kit profile capture URL --steps N [--out DIR]`` (its options: ``kit.cli._profile``): the engine's own
    torch profile of N forward steps, through its profiler endpoints, while the kit's client keeps it busy; the
    traces land in ``DIR`` as ``rank<N>.trace.json.gz`` (what ``kit profile summary`` reads).

    The engine must run on this machine (the URL's host is this one): it writes the trace files itself, into a
    private directory the kit names in ``/start_profile`` (SGLang's body: ``output_dir``, ``num_steps``,
    ``activities``; tinyserve speaks the same). An engine whose profiler directory is set at its start (the
    registry's ``Engine.profile_dir_env``: vLLM's ``VLLM_TORCH_PROFILER_DIR``) takes neither a directory nor a
    step count: give ``--seconds`` and ``--trace-dir``. An engine on another host is profiled by the kit that
    started it (``kit.server(...).profile()``). Files appear in ``DIR`` whole or not at all (each is copied
    beside its name and renamed).
    """
    if (args.steps is None) == (args.seconds is None):
        raise UsageError("kit profile capture: give --steps N or --seconds S")

    eng = kit.engines.engine(args.engine)
    fixed_dir = eng.profile_dir_env  # the engine writes where a variable set at its start says (vLLM)
    if fixed_dir and not args.trace_dir:
        raise UsageError(f"kit profile capture --engine {eng.name}: give --trace-dir (its {fixed_dir}: "
                         f"{eng.title}'s /start_profile names no directory)")
    if args.steps is not None and not eng.profile_steps:
        raise UsageError(f"kit profile capture --engine {eng.name}: {eng.title}'s /start_profile takes no step "
                         "count; give --seconds")
    if not _local(args.url):
        raise UsageError(f"kit profile capture: {args.url} is not on this machine: the engine writes its traces "
                         "on its own host (profile it with the kit that started it: kit.server(...).profile())")
    own = None if fixed_dir else tempfile.mkdtemp(prefix="kit-capture-")
    d = args.trace_dir if fixed_dir else own
    stop = threading.Event()
    recording = finished = False
    try:
        before = _traces(d)
        body = None if fixed_dir else {"output_dir": d, "activities": ["CPU", "GPU"],
                                       **({"num_steps": args.steps} if args.steps else {})}
        recording = True  # from the request on: an interrupt stops the engine's profile, whatever its answer
        code, text = _post(args.url, "/start_profile", body)
        if code != 200:
            recording = False
            raise KitError(f"{args.url}/start_profile answered {code or 'nothing'}: {text.strip()[:200]}")
        what = f"{args.steps} steps" if args.steps is not None else f"{args.seconds:g} s"
        print(f"kit: recording {what} of {args.url} into {d}", file=sys.stderr, flush=True)
        if not args.no_load:
            threading.Thread(target=_drive, args=(args.url, stop, 128), daemon=True).start()
        if args.seconds is not None:
            stop.wait(args.seconds)
            code, text = _post(args.url, "/stop_profile", None)
            if code != 200:
                raise KitError(f"{args.url}/stop_profile answered {code or 'nothing'}: {text.strip()[:200]}")
        files = _settled(lambda: _traces(d), before, _whole, args.timeout, 0.5)
        if files is None:
            raise KitError(f"kit profile capture: no complete trace in {d} after {args.timeout:g} s")
        finished = True
        placed = _place(files, args.out)
    finally:
        stop.set()
        if recording and not finished:  # interrupted or failed while recording: the engine is not left profiling
            _abandon(args.url, d, before)
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
    for p in placed:
        print(p)
    print(f"kit: {len(placed)} trace(s) in {args.out}; next: kit profile summary {' '.join(placed)}", file=sys.stderr)
    return 0
