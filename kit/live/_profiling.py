"""Profiling a live engine through its own HTTP endpoints (``Server.profile``): start and stop the torch
profiler, keep requests flowing while it records, wait for complete trace files and pull them into the session.

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

import json
import os
import re
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from kit import profile as _profile
from kit.bench import list_models, stream_request
from kit.errors import ServerError
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
        loader = threading.Thread(target=drive if load is True else load,
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

def drive(url: str, stop: threading.Event, max_tokens: int) -> None:
    """Keep the engine busy while it records: streamed requests, one after another, until ``stop``."""
    try:
        model = list_models(url)[0]
    except Exception:  # noqa: BLE001 - the engine may not list models; send without a name
        model = ""
    while not stop.is_set():
        stream_request(url, model=model, prompt="profile " * 16, max_tokens=max_tokens, timeout=60)


def settled(listing: Callable[[], dict[str, int]], before: dict[str, int], whole: Callable[[list[str]], bool],
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


def rank_name(path: str, i: int) -> str:
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

    files = settled(lambda: _list_traces(server, d), before, whole, timeout, max(server.poll, 0.5), check)
    if files is None:
        raise server._error(f"no complete trace in {d} after {timeout:g} s (server {server.name}); last log "
                            f"line: {clip(server.tail(1), 200)!r}", tail=server.tail(15))
    return files


def _pull(server, files: list[str], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    local = []
    for i, remote in enumerate(files):
        name = rank_name(remote, i)
        if not remote.endswith(".gz"):
            server.host.run(f"gzip -f -- {_q(remote)}", timeout=300, check=True)
            remote += ".gz"
        dest = out_dir / name
        server.host.get(remote, str(dest))
        local.append(dest)
    return sorted(local)
