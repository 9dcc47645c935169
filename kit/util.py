"""Small helpers shared by every area, one copy each: ANSI stripping, shell quoting, clipping text,
JSON-ready table rows, pausing the garbage collector, giving re-exported names their public module, and a
progress bar for long work (``progress``)."""
from __future__ import annotations

import contextlib
import contextvars
import gc
import json
import math
import os
import re
import shlex
import tempfile
from typing import TYPE_CHECKING, Any, Iterable, Iterator

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ANSI", "strip_ansi", "quote", "clip", "signed", "percent_text", "jsonable", "frame_records", "no_gc",
           "publish", "html_fields", "secret_name", "mask_secrets", "SECRET_MASK", "progress", "recorded",
           "set_recorder", "set_command_line", "command_line", "kit_version", "progress_wanted"]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""Terminal colour/style escapes (vLLM colours its log level; raw TTY captures of nvidia-smi underline)."""

quote = shlex.quote
"""The one way to put a path, pattern or value into a shell command."""


SECRET_MASK = "***REDACTED***"
"""What stands in place of a secret value in anything the kit prints or stores (as the report's redaction)."""
_SECRET_PART = re.compile(r"(?i)(?:^|[_.-])(?:token|secret|password|passwd|passphrase|pwd|pass|credentials?|apikey|"
                          r"api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|auth|authorization|"
                          r"client[_-]?key(?:[_-]data)?|signature|sig|sas)(?:$|[_.-])|passw(?:or)?d$|PASSWORD|PASSWD")
_NOT_SECRET = re.compile(r"(?i)^(?:eos|bos|pad|unk|sep|cls|mask|max|num|min|start|end)_token|_(?:ids?|len|length|"
                         r"size|count|path|file|dir|limit|usage|budget|map|type|mode)$|^(?:max|num|min)_")


_URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@", re.I)


def secret_name(key: object) -> bool:
    """Is ``key`` the name of a credential (``api_key``, ``HF_TOKEN``, ``NCCL_IB_SECRET_KEY``, ``db-password``)?
    Whole name parts only: ``max_tokens``, ``eos_token``, ``tokenizer_path``, ``password_file`` are not."""
    k = str(key)
    return bool(_SECRET_PART.search(k)) and not _NOT_SECRET.search(k)


def mask_secrets(values: dict) -> dict:
    """``values`` with the value of every credential-named key (:func:`secret_name`) that holds a string
    (not None, "None" or an empty one) replaced by :data:`SECRET_MASK`, and the password of a URL
    (``postgres://u:pw@db``) masked: what an engine's argument dump or environment capture says, fit to print."""
    return {k: (SECRET_MASK if isinstance(v, str) and v.strip() not in ("", "None", "none", "null")
                and secret_name(k) else _URL_CREDENTIALS.sub(r"\1" + SECRET_MASK + "@", v) if isinstance(v, str)
                else v) for k, v in values.items()}


def strip_ansi(text: str) -> str:
    """Remove ANSI colour/style escapes from ``text``."""
    return ANSI.sub("", text)


def signed(x: float, decimals: int = 1) -> str:
    """A difference with its sign and thousands separators (``+1,234.5``, ``-0.3``); one that rounds to
    zero is ``0.0``, never ``-0.0`` or ``+0.0`` (a sign there reads as a difference that is not there)."""
    text = f"{x:+,.{decimals}f}"
    return text[1:] if float(text.replace(",", "")) == 0 else text


def percent_text(fraction: float, decimals: int = 2) -> str:
    """A fraction as a percentage with at most ``decimals`` decimals and no trailing zeros (``55.5%``,
    ``55%``, ``55.25%``), for axis ticks: matplotlib's PercentFormatter prints ``55.50%``."""
    text = f"{100 * fraction:.{decimals}f}".rstrip("0").rstrip(".")
    return ("0" if text in ("-0", "") else text) + "%"


def clip(text: str, n: int = 60, *, ellipsis: str = "...") -> str:
    """``text`` cut to at most ``n`` characters, the cut marked with ``ellipsis``."""
    return text if len(text) <= n else text[: n - len(ellipsis)] + ellipsis


def frame_records(df: "pd.DataFrame") -> list[dict[str, Any]]:
    """A table -> JSON-ready list of dicts (times as printed style strings, NaN -> None)."""
    out = []
    cols = list(df.columns)
    for row in df.itertuples(index=False, name=None):
        out.append({c: jsonable(v) for c, v in zip(cols, row)})
    return out


def jsonable(v: Any) -> Any:
    """One cell or value -> something ``json.dumps`` takes (NaN/NaT -> None, numpy scalars -> Python)."""
    import pandas as pd

    if v is None:
        return None
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, pd.Timestamp):
        return None if pd.isna(v) else (v.strftime("%m-%d %H:%M:%S") if v.year == 1900 else v.isoformat(sep=" "))
    if v is pd.NaT:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, (str, int, float, bool)):
        return v
    try:
        json.dumps(v)
        return v
    except TypeError:
        return str(v)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, then restore its previous state.

    Parsing a large log or building a big AST allocates millions of small objects with no
    reference cycles; each allocation burst triggers full collections that cost a quarter of a log
    parse and 2-3x an ``ast.parse`` of a 270 KB file (measured). Reference counting still frees
    everything as usual.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def publish(namespace: dict, names: Iterable[str]) -> None:
    """Give the classes and functions a package re-exports that package as ``__module__``, so users
    see ``kit.remote.Result`` rather than the private file that defines it."""
    package = namespace["__name__"]
    for name in names:
        obj = namespace.get(name)
        if isinstance(obj, type) or callable(obj):
            try:
                if getattr(obj, "__module__", "").startswith(package + "."):
                    obj.__module__ = package
            except (AttributeError, TypeError):
                pass


def html_fields(title: str, fields: Iterable[tuple[str, Any]]) -> str:
    """A small titled two-column table (name, value), escaped: the HTML view of result objects."""
    import html as _html

    rows = "".join(f"<tr><td style='text-align:left;color:#57606a'>{_html.escape(str(k))}</td>"
                   f"<td style='text-align:left'>{_html.escape(str(v))}</td></tr>" for k, v in fields)
    return (f"<div><b>{_html.escape(title)}</b><table style='font-size:90%'><tbody>{rows}</tbody></table></div>")


def write_atomic(path: "os.PathLike[str] | str", text: str, *, prefix: str | None = None, fsync: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and ``os.replace``:
    readers see the old file or the new one, never half of one, and a failed write leaves the old
    file as it was and no temporary file behind. The file keeps its mode (0644 when new)."""
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def host_program(package: str, name: str, call: str) -> str:
    """The source of a program the kit ships to hosts, ``<package>/_host/<name>``, a real ``.py`` file
    (linted and read like any other), followed by the line ``call`` whose value ``Host.python`` returns."""
    from importlib import resources

    text = resources.files(package).joinpath("_host", name).read_text(encoding="utf-8")
    return text.rstrip("\n") + "\n\n" + call + "\n"


def progress_wanted() -> bool:
    """A bar is shown in a terminal (stderr a TTY) or a notebook kernel, never when ``KIT_PROGRESS=off``
    (every bar of the kit asks this: :func:`progress`, the engine start-up bar of ``kit.server``)."""
    import sys

    if os.environ.get("KIT_PROGRESS", "").strip().lower() in ("0", "off", "no", "false"):
        return False
    try:
        if sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return "ipykernel" in sys.modules


@contextlib.contextmanager
def progress(desc: str, total: float | None = None, *, unit: str = "B", show: bool | None = None,
             delay: float = 2.0) -> Iterator[Any]:
    """A tqdm bar for work that may take more than ``delay`` seconds (it appears only then), kept ticking
    (elapsed time) while the work runs; silent when not in a terminal or notebook, when ``show=False`` or
    ``KIT_PROGRESS=off``. Yields the bar (``bar.update(n)``)."""
    import threading

    from tqdm.auto import tqdm

    on = progress_wanted() if show is None else show
    bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
               leave=False, delay=delay, disable=not on)
    stop = threading.Event()

    def tick():
        while not stop.wait(0.5):
            bar.refresh()
    ticker = threading.Thread(target=tick, daemon=True, name="kit-progress") if on else None
    if ticker:
        ticker.start()
    try:
        yield bar
    finally:
        stop.set()
        if ticker:
            ticker.join()
        bar.close()


# -- the run catalogue's hook ------------------------------------------------------------------------------
# The kit's public entry points (in kit.profile, kit.logs, kit.bench, kit.audit, kit.live) wear
# ``@recorded(kind)``; what records the result is installed from above (``kit/__init__.py`` installs the run
# catalogue, ``kit.runs``), so the packages low in the house never import the catalogue, which reads them.
_RECORDER: list = []
_RECORDING: "contextvars.ContextVar[bool]" = contextvars.ContextVar("kit_recording", default=False)
_COMMAND_LINE: list[str] = []
_OFF = ("off", "0", "no", "false")


def set_recorder(fn) -> None:
    """Install ``fn(kind, func, args, kwargs, result, elapsed_s)``, called after each outermost
    ``@recorded`` call (``None`` removes it)."""
    _RECORDER[:] = [fn] if fn is not None else []


def recorded(kind: str):
    """Decorator for a public entry point: hand what the outermost decorated call returned to the installed
    recorder (the run catalogue). Without one, with ``KIT_RUNS=off`` or inside another decorated call, the
    plain call; the recorder never changes the result or raises (it says so on stderr instead)."""
    import functools
    import time

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            if not _RECORDER or _RECORDING.get() or os.environ.get("KIT_RUNS", "on").strip().lower() in _OFF:
                return fn(*args, **kwargs)
            token = _RECORDING.set(True)
            t0 = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            finally:
                _RECORDING.reset(token)
            _RECORDER[0](kind, fn, args, kwargs, result, time.perf_counter() - t0)
            return result
        return inner
    return wrap


def set_command_line(argv: list[str]) -> None:
    """The ``kit`` command line this process runs (set by ``kit.cli``; runs recorded under it carry it)."""
    _COMMAND_LINE[:] = list(argv)


def command_line() -> str | None:
    """``kit profile summary x.json.gz`` when this process is a ``kit`` command, else None."""
    return "kit " + " ".join(_COMMAND_LINE) if _COMMAND_LINE else None


def kit_version() -> str:
    """decode-kit's version (``kit.__version__``), for modules that must not import the ``kit`` package."""
    import sys

    kit = sys.modules.get("kit")
    return getattr(kit, "__version__", None) or "unknown"
