"""Read traces where they lie: parse on the host that holds them, pull back only the raw tables.

``kit.profile.load("gpu-box:/traces/rank*.json.gz")`` or ``load(paths, host=host)``: the kit's own
trace reader (``_read.read_raw`` and every kit module it imports, as they are in this checkout, so
parser changes ship by themselves) is packed into a zipapp at run time, pushed to
``~/.cache/decode-kit/`` on the host on first use (named by its content hash, so an unchanged reader
is never pushed twice) and run there with the host's ``python3``, standard library only (``orjson``
when the host has it; otherwise a ``json`` stand-in with orjson's interface). It parses the ranks in
parallel on the host's cores and writes each file's raw tables (string columns dictionary-encoded,
zlib-compressed JSON) to stdout; hosts are served in parallel. What crosses the network is the
tables, ~1-2% of the trace bytes, not the traces. Back here they go through the same assembly as a
local load (``_profile.load`` hands them to ``_assemble``), so the :class:`~kit.profile.Profile` is the
same. This module never imports the façade.

Only the public ``kit.remote`` API is used (``connect``, ``Host.run/put``, ``Host.transfer.glob``): the
host side is a parser shipped there, not SSH code inside the parsers.
"""
from __future__ import annotations

import ast
import hashlib
import io
import json
import logging
import os
import re
import secrets
import tempfile
import threading
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from kit.errors import RemoteError, TraceError
from kit.util import quote

# The reader's entry point and its siblings; everything they import from ``kit`` is added.
ROOTS = tuple(f"kit.profile.reading.{m}" for m in ("_read", "_io", "_kineto", "_nsys")) + ("kit.errors",)
HOST_DIR = ".cache/decode-kit"
log = logging.getLogger("kit.profile")
_SPEC = re.compile(r"^(?P<target>[^/\s][^\s]*?):(?P<path>/.*)$")
_RAW = b"\x1eKITRAW "

_MAIN = r'''
"""Run by kit.profile.load(host=...) on the host: parse trace files with the kit's reader, print raw tables."""
import json, os, sys, zlib


def _orjson():
    try:
        import orjson  # noqa: F401
        return "orjson " + getattr(orjson, "__version__", "?")
    except ImportError:
        import _kit_orjson_fallback
        sys.modules["orjson"] = _kit_orjson_fallback
        return "json (orjson not installed)"


def _encode(raw):
    tables = {}
    for name in ("kernels", "annotations", "launches", "frames", "comms"):
        if not raw.get(name):
            continue
        cols = {}
        for col, values in raw[name].items():
            if values and all(v is None or type(v) is str for v in values):
                index, codes = {}, []
                for v in values:
                    codes.append(index.setdefault(v, len(index)))
                cols[col] = {"dict": list(index), "codes": codes}
            else:
                cols[col] = values if type(values) is list else list(values)   # typed arrays -> JSON lists
        tables[name] = cols
    out = dict(raw)
    out.update(tables)
    return zlib.compress(json.dumps(out, separators=(",", ":")).encode("utf-8"), 6)


def _one(path):
    from kit.profile.reading._read import read_raw
    try:
        raw = read_raw(path)
    except Exception as exc:  # one clear line per file, back to the caller
        return {"path": path, "ok": False, "error": type(exc).__name__, "message": str(exc)}, b""
    payload = _encode(raw)
    return {"path": path, "ok": True, "len": len(payload)}, payload


def main():
    engine = _orjson()
    paths = sys.argv[1:]
    workers = min(len(paths), os.cpu_count() or 1)
    if workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(workers, mp_context=ctx) as ex:
            results = ex.map(_one, paths)
            _write(results, engine, workers)
    else:
        _write(map(_one, paths), engine, workers)


def _write(results, engine, workers):
    out = sys.stdout.buffer
    for head, payload in results:
        head["json"] = engine
        head["workers"] = workers
        head["python"] = sys.version.split()[0]
        out.write(b"\x1eKITRAW " + json.dumps(head).encode("utf-8") + b"\n")
        out.write(payload)
    out.flush()


main()
'''

_FALLBACK = r'''
"""A stand-in for orjson on hosts without it: the same names, backed by the standard library's json.
Like orjson, NaN and Infinity are rejected."""
import json

JSONDecodeError = json.JSONDecodeError
JSONEncodeError = TypeError
OPT_INDENT_2 = OPT_SORT_KEYS = OPT_NON_STR_KEYS = OPT_SERIALIZE_NUMPY = OPT_APPEND_NEWLINE = 0
__version__ = "json-fallback"


def _no_constant(name):
    raise json.JSONDecodeError(name + " is not valid JSON", name, 0)


def loads(data):
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("utf-8")
    return json.loads(data, parse_constant=_no_constant)


def dumps(obj, default=None, option=None):
    return json.dumps(obj, default=default, separators=(",", ":"), allow_nan=False).encode("utf-8")
'''


def split_spec(spec: str) -> tuple[str, str] | None:
    """``"host:/abs/path"`` -> ``("host", "/abs/path")``; None for a plain local path."""
    m = _SPEC.match(spec)
    if not m or os.path.exists(spec):
        return None
    return m.group("target"), m.group("path")


def is_remote(paths, host) -> bool:
    """True when ``load`` should parse on a host: ``host=`` given, or ``host:/path`` specs."""
    if host is not None:
        return True
    items = [paths] if isinstance(paths, (str, os.PathLike)) else paths
    return bool(items) and all(isinstance(p, str) and split_spec(p) is not None for p in items)


# --- the zipapp ------------------------------------------------------------------------------------
_built: dict[str, tuple[str, bytes]] = {}
_build_lock = threading.Lock()


def _kit_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _module_file(root: Path, name: str) -> Path | None:
    rel = Path(*name.split("."))
    for cand in (root.parent / rel.with_suffix(".py"), root.parent / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def reader_files() -> dict[str, bytes]:
    """Archive name -> bytes: the roots, every kit module they import (at any depth, in functions
    too), stub ``__init__`` files for the packages (the real ones import pandas), the runner."""
    root = _kit_root()
    files: dict[str, bytes] = {}
    todo, seen = list(ROOTS), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(root, name)
        if path is None or path.name == "__init__.py":
            continue
        src = path.read_bytes()
        files[str(PurePosixPath(*name.split("."))) + ".py"] = src
        for node in ast.walk(ast.parse(src, str(path))):
            if isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names if a.name.split(".")[0] == "kit")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "kit":
                todo.append(node.module)
                todo.extend(f"{node.module}.{a.name}" for a in node.names)  # ``from kit.profile import _io``
    for arc in list(files):
        parts = arc.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            files.setdefault("/".join(parts[:i]) + "/__init__.py", b'"""Shipped by kit.profile: reader only."""\n')
    files["__main__.py"] = _MAIN.encode()
    files["_kit_orjson_fallback.py"] = _FALLBACK.encode()
    return files


def build_reader() -> tuple[str, bytes]:
    """(file name with content hash, zipapp bytes), built once per process."""
    files = reader_files()
    h = hashlib.sha256()
    for arc in sorted(files):
        h.update(arc.encode() + b"\0" + files[arc] + b"\0")
    digest = h.hexdigest()[:16]
    with _build_lock:
        if digest not in _built:
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for arc in sorted(files):
                    info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    z.writestr(info, files[arc])
            _built[digest] = (f"kit-reader-{digest}.pyz", buf.getvalue())
        return _built[digest]


def ensure_reader(host) -> tuple[str, int]:
    """The reader's path on ``host`` (pushed if absent) and the bytes pushed (0 when cached there).

    A copy already there is used only when its SHA-256 is that of the zipapp built here: a truncated
    or edited ``kit-reader-*.pyz`` (a full disk, a killed upload, a hand edit) is sent again; the new
    copy is written under a temporary name and renamed into place, so a reader never runs half a file."""
    name, data = build_reader()
    want = hashlib.sha256(data).hexdigest()
    q = quote(name)
    res = host.run(f'mkdir -p "$HOME"/{HOST_DIR} && cd "$HOME"/{HOST_DIR} && pwd && '
                   f'if [ -s {q} ]; then echo "have $( (sha256sum -- {q} || openssl dgst -sha256 -r {q}) '
                   f'2>/dev/null | cut -c1-64)"; fi', timeout=60)
    if not res.ok:
        raise RemoteError(f"{host.name}: cannot create ~/{HOST_DIR} for the trace reader: "
                          f"{res.stderr.strip() or res.exit_code}", host=host.name)
    lines = res.stdout.split("\n")
    remote = f"{lines[0]}/{name}"
    if f"have {want}" in lines[1:]:
        return remote, 0
    if any(x.startswith("have") for x in lines[1:]):
        log.warning("%s: %s differs from the reader built here (corrupted or edited): sent again", host.name, remote)
    part = f"{remote}.part-{os.getpid()}-{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="kit-reader-") as d:
        local = os.path.join(d, name)
        with open(local, "wb") as fh:
            fh.write(data)
        host.put(local, part, progress=False)
    mv = host.run(f"mv -f -- {quote(part)} {quote(remote)}", timeout=60)
    if not mv.ok:
        raise RemoteError(f"{host.name}: cannot place the trace reader at {remote}: "
                          f"{mv.stderr.strip() or mv.exit_code}", host=host.name)
    return remote, len(data)


# --- running it ------------------------------------------------------------------------------------
def decode_raw(payload: bytes) -> dict:
    """Inverse of the runner's encoding: raw tables as ``read_raw`` returned them."""
    raw = json.loads(zlib.decompress(payload))
    for name in ("kernels", "annotations", "launches", "frames", "comms"):
        cols = raw.get(name) or {}
        for col, v in list(cols.items()):
            if isinstance(v, dict) and "codes" in v:
                d = v["dict"]
                cols[col] = [d[i] for i in v["codes"]]
    return raw


class Frames:
    """The one reader of the remote reader's output (``\\x1eKITRAW {head}\\n`` + payload, per file): cuts
    the stream into files as bytes arrive, handing each complete one to ``emit(head, payload)``; keeps at
    most one file's bytes (``ranks`` digests a host's ranks as they come, ``load`` collects them)."""

    def __init__(self, emit, where: str = "remote trace reader"):
        self.buf = bytearray()
        self.head = None
        self.emit = emit
        self.where = where
        self.received = 0

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        self.received += len(chunk)
        while True:
            if self.head is None:
                end = self.buf.find(b"\n")
                if end < 0:
                    return
                line = bytes(self.buf[:end])
                if not line.startswith(_RAW):
                    raise RemoteError(f"{self.where}: remote trace reader output unreadable: {line[:80]!r}")
                self.head = json.loads(line[len(_RAW):])
                del self.buf[:end + 1]
            need = self.head.get("len", 0)   # a file the reader failed on has no payload
            if len(self.buf) < need:
                return
            payload = bytes(self.buf[:need])
            del self.buf[:need]
            head, self.head = self.head, None
            self.emit(head, payload)


def reader_command(host, paths: list[str], python: str) -> tuple[str, int]:
    """The command that runs the kit's reader on ``host`` over ``paths`` (the reader placed there first),
    and the bytes sent to place it."""
    remote, pushed = ensure_reader(host)
    return f"{quote(python)} {quote(remote)} " + " ".join(quote(p) for p in paths), pushed


def checked(host, head: dict, payload: bytes) -> dict:
    """One file's frames from the reader's answer: its error as a one-line ``TraceError`` naming
    ``host:path``, else the decoded raw tables, validated (``_assemble.checked_frames``), never cached."""
    from kit.profile._assemble import checked_frames  # deferred: pandas, only once a host's tables come back

    p = head["path"]
    if not head["ok"]:
        raise TraceError(f"{host.name}:{head['message']}" if head["message"].startswith(p)
                         else f"{host.name}:{p}: {head['message']}", path=f"{host.name}:{p}")
    fr = checked_frames(decode_raw(payload), f"{host.name}:{p}")
    fr["cached"] = False
    return fr


def failed(host, res, python: str) -> RemoteError:
    """The one-line error of a reader run that exited non-zero."""
    why = (res.stderr or "").strip().splitlines()
    reason = (f"{python} not found on the host (the remote reader needs Python >= 3.8)" if res.exit_code == 127
              else why[-1] if why else f"exit code {res.exit_code}")
    return RemoteError(f"{host.name}: remote trace reader failed: {reason}", host=host.name)


def read_on_host(host, paths: list[str], *, python: str = "python3", timeout: float = 600) -> tuple[list[dict], dict]:
    """Checked frames of ``paths`` parsed on ``host``, in order, and stats (bytes moved, reader engine)."""
    cmd, pushed = reader_command(host, paths, python)
    results: list[dict] = []
    stats = {"pushed": pushed, "received": 0, "json": None, "workers": None}

    def emit(head, payload):
        p = paths[len(results)] if len(results) < len(paths) else None
        if head["path"] != p:
            raise RemoteError(f"{host.name}: remote trace reader answered {head['path']} for {p}", host=host.name)
        stats["json"], stats["workers"] = head.get("json"), head.get("workers")
        results.append(checked(host, head, payload))

    frames = Frames(emit, host.name)
    res = host.run(cmd, timeout=timeout, on_stdout=frames.feed)
    if not res.ok:
        raise failed(host, res, python)
    if len(results) != len(paths):
        raise RemoteError(f"{host.name}: the remote reader returned {len(results)} of {len(paths)} files "
                          f"(stderr: {(res.stderr or '').strip()[-200:]!r})", host=host.name)
    stats["received"] = frames.received
    return results, stats


def by_host(paths, host=None) -> tuple[list[tuple[object, str]], list[str]]:
    """``(Host, path)`` for each trace on a host, globs expanded there, and the local files, each in the
    caller's order. ``paths``: a path, a list of paths (``HOST:/path`` specs, or any path with ``host=``),
    ``(Host, path)`` pairs, or ``{Host: path or [paths]}``."""
    import kit.remote  # deferred: paramiko, only for traces on a host

    if isinstance(paths, dict):
        items = [(h, p) for h, ps in paths.items() for p in ([ps] if isinstance(ps, str) else ps)]
    else:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    hosts: dict[str, object] = {}
    remote: list[tuple[object, str]] = []
    local: list[str] = []
    for it in items:
        if isinstance(it, tuple):
            h, pattern = it
        elif host is not None:
            h, pattern = host, str(it)
        elif (spec := split_spec(str(it))) is not None:
            key, pattern = spec
            h = hosts.get(key) or kit.remote.connect(key)
        else:
            local.append(str(it))
            continue
        h = hosts.setdefault(h.name, h)
        found = h.transfer.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]
        if not found:
            raise TraceError(f"{h.name}:{pattern}: no file matches", path=f"{h.name}:{pattern}")
        remote += [(h, p) for p in found]
    return remote, local


def read_remote(paths, *, host=None, python: str = "python3") -> tuple[list[str], list[Path], list[dict], dict]:
    """Traces on hosts parsed there (see the module docstring): ``(labels "host:path", paths, checked
    frames per file, stats per host)``, ready for ``_assemble.assemble``."""
    listed, local = by_host(paths, host)
    if local:
        raise TraceError(f"{local[0]}: neither a local file nor HOST:/PATH (give host= to read it on a host)",
                         path=local[0])
    if not listed:
        raise TraceError("no trace files given")
    per_host: dict[str, tuple[object, list[str]]] = {}
    for h, p in listed:
        per_host.setdefault(h.name, (h, []))[1].append(p)

    def run(h, ps: list[str]):
        return read_on_host(h, list(dict.fromkeys(ps)), python=python)

    with ThreadPoolExecutor(max(1, len(per_host)), thread_name_prefix="kit-remote-load") as pool:
        futures = {key: pool.submit(run, h, ps) for key, (h, ps) in per_host.items()}
        done = {key: f.result() for key, f in futures.items()}
    raws = {(key, p): raw for key, (results, _) in done.items()
            for p, raw in zip(dict.fromkeys(per_host[key][1]), results)}
    stats = {key: {"files": len(dict.fromkeys(per_host[key][1])), **st} for key, (_, st) in done.items()}
    return ([f"{h.name}:{p}" for h, p in listed], [Path(p) for _, p in listed],
            [raws[(h.name, p)] for h, p in listed], stats)
