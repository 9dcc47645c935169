"""What a tool call may touch: hosts, local paths, patterns, environment names; refused before anything runs.

A tool argument comes from a model, which may have read a hostile log or web page: every argument that
reaches a file system or a host is checked here, on the server, before the kit's function is called (host
names against the server's hosts, local paths against its roots after resolving symlinks and ``..``, host
paths and patterns for characters that have no business in them)."""
from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.errors import UsageError

# directories whose files are credentials: never a root, never read through a root
_CREDENTIALS = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store", ".netrc",
                          ".pgpass", ".git-credentials", "gcloud", ".vault-token", ".pypirc", ".npmrc"})
_MAX_TREE = 20_000                # entries of one directory argument checked before it is refused

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_OUTPUT = 256_000      # characters of one tool result's JSON
DEFAULT_PAGE = 200                # rows of a table per call unless the caller asks for fewer

# ``local`` or an ~/.ssh/config alias / user@host[:port]: no leading dash (an ssh option), no spaces,
# no shell or glob characters
_HOST = re.compile(r"(?!-)[A-Za-z0-9_.@:\[\]-]{1,253}")
_NEW_NAME = re.compile(r"(?!-)[\w.@+=,-]{1,255}")   # what a tool may name a file it creates
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# environment a run tool may set on a host: the engines' own switches and the kit's, never the
# loader's or the interpreter's (LD_PRELOAD, PYTHONSTARTUP, PATH ... are refused by not matching)
_ENV_NAME = re.compile(r"(?:KIT|SGLANG|VLLM|TRTLLM|NCCL|CUDA|TORCH)_[A-Z0-9_]{1,64}")
_ENV_DENY = {"CUDA_HOME", "TORCH_HOME"}


@dataclass(frozen=True)
class Policy:
    """The server's start-up choices: which hosts read tools reach (``hosts``), which run tools may use
    (``run_hosts``), whether write tools exist (``write``), which local directories paths must lie in
    (``roots``), and the per-call timeout and output cap."""

    roots: tuple[Path, ...] = field(default_factory=lambda: (Path.cwd().resolve(),))
    hosts: tuple[str, ...] = ("local",)
    run_hosts: tuple[str, ...] = ()
    write: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output: int = DEFAULT_MAX_OUTPUT
    host_roots: tuple[tuple[str, str], ...] = ()   # (host, directory): where that host's paths must lie

    def __post_init__(self) -> None:
        for h in (*self.hosts, *self.run_hosts):
            host_name(h)
        object.__setattr__(self, "roots", tuple(_root(r) for r in self.roots))
        object.__setattr__(self, "hosts", tuple(dict.fromkeys((*self.hosts, *self.run_hosts))))
        for h, r in self.host_roots:
            if h not in self.hosts or not r.startswith("/"):
                raise UsageError(f"--host-root {h}={r}: name a host the server reaches and an absolute directory")
        if self.timeout_s <= 0 or self.max_output < 1000:
            raise UsageError(f"kit mcp: timeout {self.timeout_s} s and output cap {self.max_output} must be positive "
                             "(the cap at least 1000 characters)")

    def allows(self, mode: str) -> bool:
        """Whether tools of ``mode`` ('read', 'write', 'run') exist on this server at all."""
        return mode == "read" or (mode == "write" and self.write) or (mode == "run" and bool(self.run_hosts))

    def host(self, name: str, mode: str = "read") -> str:
        """``name`` if a tool of ``mode`` may reach it, else UsageError naming the hosts it may."""
        allowed = self.run_hosts if mode == "run" else self.hosts
        if host_name(name) not in allowed:
            what = "run tools" if mode == "run" else "this server"
            raise UsageError(f"host {name!r}: {what} may reach only {', '.join(allowed) or 'no host'} "
                             f"(start kit mcp with {'--allow-run' if mode == 'run' else '--host'} {name} to allow it)")
        return name

    def local_path(self, value: str, *, must_exist: bool = True) -> Path:
        """A local path inside one of the roots (symlinks and ``..`` resolved first), else UsageError.
        Refused also: anything under a credentials directory (``.ssh``, ``.aws`` ...) and what is neither
        a regular file nor a directory (a FIFO or a device would hold the call forever)."""
        text = _plain(value, "path")
        p = Path(text).expanduser()
        p = (self.roots[0] / p) if not p.is_absolute() else p
        real = Path(os.path.realpath(p))
        self._inside(real, value)
        if must_exist and not real.exists():
            raise UsageError(f"path {value!r}: no such file or directory ({real})")
        if not real.exists() and (not real.parent.is_dir() or not _NEW_NAME.fullmatch(real.name)):
            raise UsageError(f"path {value!r}: a file or directory the server creates needs an existing parent "
                             "and a plain name (letters, digits, . _ - + = , @)")
        if real.exists() and not (real.is_file() or real.is_dir()):
            raise UsageError(f"path {value!r}: {real} is neither a regular file nor a directory (a FIFO, socket "
                             "or device); refused")
        return real

    def _inside(self, real: Path, value: str) -> None:
        if not any(real == r or r in real.parents for r in self.roots):
            raise UsageError(f"path {value!r} resolves to {real}, outside the server's roots "
                             f"({', '.join(str(r) for r in self.roots)})")
        if _CREDENTIALS & set(real.parts):
            raise UsageError(f"path {value!r}: {real} lies in a credentials directory; refused")

    def tree(self, value: str) -> Path:
        """An existing local file or directory inside the roots whose every entry (what a tool walking it
        opens) resolves inside the roots too: a symlink in the directory that points out, or a FIFO in
        it, refuses the whole argument. At most 20,000 entries are checked; more are refused."""
        real = self.local_path(value)
        if real.is_file():
            return real
        seen = 0
        for top, dirs, files in os.walk(real):
            for name in dirs + files:
                seen += 1
                if seen > _MAX_TREE:
                    raise UsageError(f"path {value!r}: more than {_MAX_TREE:,} entries; name a smaller directory")
                entry = Path(top) / name
                target = Path(os.path.realpath(entry))
                if entry.is_symlink():
                    try:
                        self._inside(target, str(entry))
                    except UsageError as exc:
                        raise UsageError(f"path {value!r}: {entry.relative_to(real)} is a symlink to {target}, "
                                         "outside the server's roots") from exc
                if target.exists() and not (target.is_file() or target.is_dir()):
                    raise UsageError(f"path {value!r}: {entry.relative_to(real)} is a FIFO, socket or device; "
                                     "refused")
        return real

    def host_path(self, host: str, value: str) -> str:
        """A path on ``host``: on ``local`` a file or directory tree inside the roots (:meth:`tree`);
        elsewhere an absolute path without control characters, a leading dash or ``..``, inside the host's
        ``host_roots`` where it has any (checked on the name: a symlink on the host is not resolved here).
        The kit quotes it on the way."""
        if host == "local":
            return str(self.tree(value))
        text = _plain(value, "path")
        if not text.startswith("/") or ".." in text.split("/"):
            raise UsageError(f"path {value!r} on {host}: give an absolute path without '..'")
        roots = [r for h, r in self.host_roots if h == host]
        norm = posixpath.normpath(text)
        if roots and not any(norm == r or norm.startswith(r.rstrip("/") + "/") for r in roots):
            raise UsageError(f"path {value!r} on {host}: outside the server's roots there ({', '.join(roots)})")
        return norm

    # ---------------------------------------------------------------- path-typed schema fields
    def resolve(self, properties: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        """``args`` with every path-typed field (``x-path`` in its schema, or in its items') replaced by
        the checked, resolved path(s), before the tool function sees them; a refusal is a UsageError."""
        out = dict(args)
        for key, prop in properties.items():
            if args.get(key) is None:
                continue
            kind = prop.get("x-path")
            items = prop.get("items") or {}
            if kind is not None:
                out[key] = self._resolve(kind, args[key], args.get("host"))
            elif items.get("x-path") is not None:
                vals = [None if v is None else self._resolve(items["x-path"], v, args.get("host")) for v in args[key]]
                flat = items["x-path"] == "traces" and items.get("type") == "string"
                out[key] = [f for v in vals for f in v] if flat else vals
        return out

    def _resolve(self, kind: str, value: str, host: str | None):
        if kind == "host":
            return self.host_path(host or "local", value)
        if kind == "traces":
            return _trace_files(self.tree(value))
        if kind == "file":
            real = self.local_path(value)
            if not real.is_file():
                raise UsageError(f"path {value!r}: {real} is a directory; name a file")
            return str(real)
        if kind == "tree":
            return str(self.tree(value))
        if kind == "new":
            real = self.local_path(value, must_exist=False)
            if real.exists():
                raise UsageError(f"path {value!r}: {real} exists; name a new file or directory")
            return str(real)
        if kind == "ledger":
            return str(self._ledger(value))
        raise AssertionError(f"unknown path kind {kind!r}")

    def _ledger(self, value: str) -> Path:
        """What a ledger argument names: a session directory (checked as a tree) or a ``ledger.json`` file
        that exists; no tool creates a file of another name."""
        real = self.tree(value)
        if real.is_file() and real.name != "ledger.json":
            raise UsageError(f"ledger {value!r}: {real.name} is not a ledger.json; name a session directory "
                             "or its ledger.json")
        return real


def _trace_files(real: Path) -> list[str]:
    """Trace files: a file as it is, or a directory's ``rank*`` traces (sorted; the directory itself
    when it has none, for the loader to say so)."""
    if real.is_dir():
        found = sorted(x for x in real.iterdir() if x.name.startswith("rank") and x.is_file())
        return [str(x) for x in found] or [str(real)]
    return [str(real)]


def _root(value) -> Path:
    """A root as given to the server, resolved: never ``/``, the home directory (or a directory above it)
    or a credentials directory, where a path argument would reach keys."""
    real = Path(os.path.realpath(Path(value).expanduser()))
    home = Path(os.path.realpath(Path.home()))
    if real == Path(real.anchor) or real == home or real in home.parents:
        raise UsageError(f"--root {value}: {real} is / or a home directory (or holds one); name the directory "
                         "of the investigation")
    if _CREDENTIALS & set(real.parts):
        raise UsageError(f"--root {value}: {real} is a credentials directory; refused")
    return real


def host_name(value: str) -> str:
    """``value`` if it reads as a host name, else UsageError (no spaces, shell characters, leading dash)."""
    if not isinstance(value, str) or not _HOST.fullmatch(value):
        raise UsageError(f"host {value!r}: not a host name (local, an ssh alias or user@host[:port])")
    return value


def pattern(value: str, what: str = "pattern") -> str:
    """A search pattern: any text a regex takes, but one line, no NUL, no leading dash, at most 500 characters."""
    text = _plain(value, what)
    if len(text) > 500:
        raise UsageError(f"{what} of {len(text)} characters: at most 500")
    return text


def identifier(value: str, what: str = "name") -> str:
    """A Python identifier (a dotted name allowed): what definition and find look for."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", value):
        raise UsageError(f"{what} {value!r}: not a Python identifier")
    return value


def environment(values: dict | None) -> dict[str, str]:
    """Variables a run tool may set: engine and kit switches only, values without control characters."""
    out: dict[str, str] = {}
    for k, v in (values or {}).items():
        if not isinstance(k, str) or not _ENV_NAME.fullmatch(k) or k in _ENV_DENY:
            raise UsageError(f"environment variable {k!r}: a run tool sets only KIT_/SGLANG_/VLLM_/TRTLLM_/NCCL_/"
                             "CUDA_/TORCH_ switches")
        out[k] = _plain(str(v), f"value of {k}", dash=True) if v != "" else ""
    return out


def _plain(value: str, what: str, *, dash: bool = False) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{what} {value!r}: give a non-empty string")
    if _CONTROL.search(value):
        raise UsageError(f"{what} {value!r}: control characters (newline, NUL ...) are refused")
    if not dash and value.startswith("-"):
        raise UsageError(f"{what} {value!r}: a leading '-' would read as an option; refused")
    return value
