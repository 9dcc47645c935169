"""``kit profile capture URL --steps N [--out DIR]``: the engine's own torch profile of N forward steps,
through its profiler endpoints, while the kit's client keeps it busy; the traces land in ``DIR`` as
``rank<N>.trace.json.gz`` (what ``kit profile summary`` reads).

The engine must run on this machine (the URL's host is this one): it writes the trace files itself,
into a private directory the kit names in ``/start_profile`` (SGLang's body: ``output_dir``,
``num_steps``, ``activities``; tinyserve speaks the same). An engine whose profiler directory is set at
its start (the registry's ``Engine.profile_dir_env``: vLLM's ``VLLM_TORCH_PROFILER_DIR``) takes neither a
directory nor a step count: give ``--seconds`` and ``--trace-dir``.
An engine on another host is profiled by the kit that started it (``kit.server(...).profile()``).
Files appear in ``DIR`` whole or not at all (each is copied beside its name and renamed).
"""
from __future__ import annotations

import gzip
import json
import os
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

import kit.engines
from kit.bench import stream_request
from kit.errors import KitError, UsageError
from kit.live import _profiling


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


def _whole(path: str) -> bool:
    if not path.endswith(".gz"):
        return True
    try:
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
        dest = os.path.join(out, _profiling.rank_name(src, i))
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
    """``kit profile capture`` (its options: ``kit.cli._profile``)."""
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
            threading.Thread(target=_profiling.drive, args=(args.url, stop, 128), daemon=True).start()
        if args.seconds is not None:
            stop.wait(args.seconds)
            code, text = _post(args.url, "/stop_profile", None)
            if code != 200:
                raise KitError(f"{args.url}/stop_profile answered {code or 'nothing'}: {text.strip()[:200]}")
        files = _profiling.settled(lambda: _traces(d), before, lambda paths: all(map(_whole, paths)), args.timeout, 0.5)
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
