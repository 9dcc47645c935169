"""Broken trace input repaired or dropped, and always counted: never a silent wrong number.

Applied at three points (each a one-line hook in the reader, so the readers stay about reading):

- ``loads_lenient`` (``_kineto._loads_array``, when orjson refuses a piece): a ``NaN`` or
  ``Infinity`` literal (Python's json writes them) or an integer beyond 64 bits is parsed by the
  standard library (and the value then dropped and counted below) instead of
  failing the whole piece (which used to drop every kernel under a "truncated" warning); an event
  nested deeper than any parser allows (100k ``[``) is replaced by a marker and counted.
- ``clean_events`` (``_kineto._Collector.add_dicts``, on every piece parsed into dicts): ``ts``/``dur`` given as text
  are read as numbers (``"12.5"``, ``"12.5us"``, ``"0.0125 ms"``) and counted as repaired; text that
  is no number, a missing ``ts``, or a non-object ``args`` are made visible to the frame check
  below instead of being skipped or raising; events whose category is not a string are dropped
  and counted.
- ``check_frames`` (``_assemble.checked_frames``, where raw columns become frames, for every format):
  kernels with no usable timestamp (missing, NaN, text, negative, after 2100 or more than a day from
  the file's other events), an unreadable (NaN, infinite, text), negative or over-an-hour duration
  (``dur: 1e18``), and exact duplicates (the same kernel, stream, start and duration twice; not
  untimed graph-replay kernels with ``ts = dur = 0``, separate executions) are dropped, each kind
  counted in one warning naming the file; annotations, runtime calls, CPU frames and collective calls
  outside the same ranges are dropped and counted too. When most kernels have no usable timestamp the file
  gives a TraceError: a timeline built from the rest would be a wrong number with a footnote.

The SQLite reader converts its values with :class:`Numbers` (text timestamps read or dropped, and
counted); the CSV reader turns unreadable cells into NaN for ``check_frames`` to count.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from kit.errors import TraceError

_DEEP = re.compile(rb"[\[{](?:\s*[\[{]){500,}")
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
DROPPED = "__kit_dropped__"  # category of the marker event that stands for an unparseable one
_UNIT = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6, "": 1.0}
_NUM_UNIT = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(ns|us|µs|μs|ms|s)?\s*")
# a timeline built from fewer than this share of a file's kernels is refused, not footnoted
MIN_TIMED_SHARE = 0.5
# physical ranges (microseconds): no profiled GPU kernel or CPU event lasts an hour (a hung NCCL call
# is killed by its watchdog within minutes), no timestamp is after the year 2100, and a profile window
# spans less than a day: a value outside is a corrupt or hand-edited event, not a measurement
MAX_DUR_US = 3600e6
MAX_TS_US = 4.1e15
MAX_SPAN_US = 86400e6


def _parse(buf: bytes) -> list | None:
    try:  # orjson when installed; the standard library on hosts without it (the shipped reader)
        import orjson  # optional: the host's zipapp may lack orjson
    except ImportError:
        orjson = None
    if orjson is not None:
        try:
            return orjson.loads(buf)
        except orjson.JSONDecodeError:
            pass
    try:  # NaN/Infinity literals, integers beyond 64 bits (10**400): the standard library reads them
        return json.loads(buf)
    except (ValueError, RecursionError):
        return None


def loads_lenient(buf: bytes) -> list | None:
    """``[`` + buf + ``]`` parsed where orjson alone refused it; None when it really does not parse
    (a piece cut inside a string: the caller then merges it with the next one, as before)."""
    whole = _parse(b"[" + buf + b"]")
    if whole is not None or not _DEEP.search(buf):
        return whole
    inner = buf.strip()
    if not (inner.startswith(b"{") and inner.endswith(b"}")):
        return None
    out: list = []
    acc: bytes | None = None
    for piece in _BOUNDARY.split(inner[1:-1]):
        acc = piece if acc is None else acc + b"},{" + piece
        ev = _parse(b"[{" + acc + b"}]")
        if ev is not None:
            out.extend(ev)
            acc = None
        elif _DEEP.search(acc):
            out.append({"cat": DROPPED, "why": "nested too deep to parse"})
            acc = None
    return out if acc is None else None


def _number(v: Any) -> tuple[float, bool]:
    """(value, repaired): numbers as they are; text read as a number (with a time unit: -> us)."""
    t = type(v)
    if t is float:
        return v, False
    if t is int:
        try:
            return float(v), False
        except OverflowError:   # 10**400: not a time
            return math.nan, False
    if t is str:
        m = _NUM_UNIT.fullmatch(v)
        if m:
            return float(m.group(1)) * _UNIT[m.group(2) or ""], True
    return math.nan, False


def clean_events(evs: list, col: Any, kept_cats: Any) -> list:
    """Normalise the events of the categories a profile keeps (see module doc); counts go on ``col``."""
    issues = col.__dict__.setdefault("_kit_issues", {})
    bad_cat = 0
    out = evs
    for i, e in enumerate(evs):
        if type(e) is not dict:
            continue
        cat = e.get("cat")
        if cat is None:
            if e.get("ph", "X") != "X":
                continue
            cat = ""   # maybe a GPU event without its category (identified by its fields): cleaned too
        elif type(cat) is not str:
            if out is evs:
                out = list(evs)
            out[i] = None
            bad_cat += 1
            continue
        if cat == DROPPED:
            issues[e.get("why", "unparseable")] = issues.get(e.get("why", "unparseable"), 0) + 1
            continue
        if (cat and cat not in kept_cats) or e.get("ph", "X") != "X":
            continue
        for key in ("ts", "dur"):   # a missing ts is dropped later; a missing dur is an instant
            v = e.get(key)
            if type(v) is not float and (v is not None or key == "ts"):
                e[key], fixed = _number(v)
                if fixed:
                    issues["text"] = issues.get("text", 0) + 1
        args = e.get("args")
        if args is not None and type(args) is not dict:
            e["args"] = {}
            issues["args"] = issues.get("args", 0) + 1
    if bad_cat:
        issues["cat"] = issues.get("cat", 0) + bad_cat
        out = [e for e in out if e is not None]
    return out


def collector_warnings(col: Any, base: str) -> list[str]:
    """The counts ``clean_events`` kept, as warnings naming the file."""
    issues = col.__dict__.get("_kit_issues", {})
    out = []
    if issues.get("text"):
        out.append(f"{base}: {_n(issues['text'], 'timestamp or duration')} given as text repaired (read as numbers)")
    if issues.get("args"):
        out.append(f"{base}: {_n(issues['args'], 'event')} whose 'args' is not an object repaired (args ignored)")
    if issues.get("cat"):
        out.append(f"{base}: {_n(issues['cat'], 'event')} with a category that is not a string dropped")
    if issues.get("nocat_kernel"):
        out.append(f"{base}: {_n(issues['nocat_kernel'], 'GPU event')} without a 'cat' field identified by the "
                   f"fields a GPU activity carries (ph X, args.stream, args.correlation or args.device) and kept")
    if issues.get("nocat_dropped"):
        out.append(f"{base}: {_n(issues['nocat_dropped'], 'complete event')} without a 'cat' field dropped: "
                   f"missing args.stream and args.correlation/args.device, so neither a GPU kernel nor a known "
                   f"CPU event")
    if issues.get("utf8"):
        out.append(f"{base}: {_n(issues['utf8'], 'invalid UTF-8 byte')} replaced by U+FFFD (events kept)")
    if issues.get("surrogate"):
        out.append(f"{base}: {_n(issues['surrogate'], 'name')} with a lone UTF-16 surrogate (a \\ud800-\\udfff "
                   f"escape) read with it replaced by U+FFFD")
    for why, n in issues.items():
        if why.startswith("phase:"):
            out.append(f"{base}: {_n(n, why.split(':')[1] + ' event')} of phase {why.split(':', 2)[2]!r} dropped "
                       f"(only complete events, ph 'X', are read)")
        elif why not in ("text", "args", "cat", "nocat_kernel", "nocat_dropped", "utf8", "surrogate"):
            out.append(f"{base}: {_n(n, 'event')} {why} dropped")
    return out


def _n(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s" if not what.endswith("s") else "es")


class Numbers:
    """Nanosecond values from an SQLite column -> microseconds, counting text that had to be read."""
    def __init__(self) -> None:
        self.text = 0

    def us(self, v: Any) -> float:
        if v is None:
            return math.nan
        if type(v) is int or type(v) is float:
            return v / 1000.0
        if isinstance(v, (str, bytes)):
            try:
                x = float(v)
            except ValueError:
                return math.nan
            self.text += 1
            return x / 1000.0
        return math.nan

    def warnings(self, base: str) -> list[str]:
        return [f"{base}: {_n(self.text, 'timestamp')} given as text repaired (read as numbers)"] if self.text else []


def out_of_range(ts, dur, untimed_ok: bool = False):
    """Masks (bad timestamp, bad duration) of the physical ranges above: a timestamp that is not a
    finite number, negative, after 2100 or more than a day from the table's median; a duration that is
    not a finite number, negative or over an hour. ``untimed_ok``: ``ts = dur = 0`` (graph-replay
    kernels recorded without timing) is not out of range; the steps are built from their order."""
    import numpy as np  # deferred: stdlib only on a host; numpy where frames are built

    ts = np.asarray(ts, dtype=float)
    dur = np.asarray(dur, dtype=float)
    bad_ts = ~np.isfinite(ts) | (ts < 0) | (ts > MAX_TS_US)
    untimed = (ts == 0) & (dur == 0) if untimed_ok else np.zeros(len(ts), bool)
    timed = ~bad_ts & ~untimed
    if timed.any():
        mid = float(np.median(ts[timed]))
        bad_ts |= (np.abs(ts - mid) > MAX_SPAN_US) & ~untimed
    bad_dur = ~np.isfinite(dur) | (dur < 0) | (dur > MAX_DUR_US)
    return bad_ts, bad_dur & ~bad_ts


def check_frames(fr: dict, name: str) -> dict:
    """Drop and count kernels/annotations/launches/frames the figures cannot use (see module doc)."""
    import numpy as np  # deferred: stdlib only on a host; numpy where frames are built

    k = fr["kernels"]
    warnings = list(fr.get("warnings", []))
    timeline = bool((fr.get("meta") or {}).get("timeline", True))
    n0 = len(k)
    if n0:
        ts = k["ts"].to_numpy(dtype=float)
        dur = k["dur"].to_numpy(dtype=float)
        bad_ts, bad_dur = out_of_range(ts, dur, untimed_ok=True)
        if not timeline:
            bad_ts = np.zeros(n0, bool)
            bad_dur = ~np.isfinite(dur) | (dur < 0) | (dur > MAX_DUR_US)
        huge = bad_dur & np.isfinite(dur) & (dur > MAX_DUR_US)
        neg = bad_dur & np.isfinite(dur) & (dur < 0)
        unreadable = bad_dur & ~huge & ~neg
        if timeline and bad_ts.sum() > (1 - MIN_TIMED_SHARE) * n0:
            raise TraceError(f"{name}: {int(bad_ts.sum()):,} of {n0:,} kernel events have no usable timestamp "
                             f"(missing, not a finite number, negative or outside any recording window): no GPU "
                             f"timeline can be built from this file", path=name)
        for mask, why in ((bad_ts, "with no usable timestamp (missing, NaN, not a number, negative, after 2100 "
                                   "or more than a day away from the others)"),
                          (unreadable, "with an unreadable duration (NaN, infinite or not a number)"),
                          (neg, "with a negative duration (end before start)"),
                          (huge, "with a duration over an hour (outside any physical range)")):
            if mask.any():
                warnings.append(f"{name}: {_n(int(mask.sum()), 'kernel event')} {why} dropped")
        drop = bad_ts | bad_dur
        if drop.any():
            k = k[~drop]
        if timeline and len(k) > 1:
            # kernels with neither start nor duration (CUDA-graph replays recorded without per-kernel
            # timing, every replay repeating the graph's correlation ids) are separate executions that
            # cannot be told from a copy: they are kept, never counted as duplicates
            untimed = (k["ts"].to_numpy(dtype=float) == 0) & (k["dur"].to_numpy(dtype=float) == 0)
            dup = k.duplicated(subset=["device", "stream", "ts", "dur", "name", "correlation", "kind"])
            dup &= ~untimed
            if dup.any():
                warnings.append(f"{name}: {_n(int(dup.sum()), 'duplicated kernel event')} dropped (the same kernel, "
                                f"stream, start and duration twice: events written twice or files concatenated?)")
                k = k[~dup.to_numpy()]
        if len(k) != n0:
            k = k.reset_index(drop=True)
    fr["kernels"] = k
    for table, label in (("annotations", "annotation"), ("launches", "runtime call event"),
                         ("frames", "CPU op or module frame"), ("comms", "collective call")):
        t = fr.get(table)
        if t is None or not len(t):
            continue
        ts = t["ts"].to_numpy(dtype=float)
        dur = t["dur"].to_numpy(dtype=float) if "dur" in t else np.zeros(len(t))
        bad_ts, bad_dur = out_of_range(ts, dur)
        bad = bad_ts | bad_dur
        if bad.any():
            warnings.append(f"{name}: {_n(int(bad.sum()), label)} with no usable timestamp or duration (missing, "
                            f"not a finite number, negative or outside any physical range) dropped")
            fr[table] = t[~bad].reset_index(drop=True)
    fr["warnings"] = warnings
    return fr


def truncation_statement(col: Any, base: str) -> str:
    """What a cut Kineto file lost, in events and time (or 'unknown'), and the remedy.

    The file's full size is not in it (cut JSON or a cut gzip stream alike), so the bytes lost are
    unknown. Time: PyTorch writes the CPU ops first and the runtime calls and kernels after them in
    time order, so a cut loses the GPU side from some time on; the kept CPU frames and annotations
    still show how long the window ran: the time between the last kept kernel's end and the window's
    end has no kernels, and the kernels lost are estimated at the kept ones' rate."""
    ends = [max((t + d for t, d in zip(c["ts"], c["dur"])), default=-math.inf) for c in (col.f, col.a, col.r)]
    cpu_end = max(ends)
    gpu_end = max((t + d for t, d in zip(col.k["ts"], col.k["dur"])), default=None)
    start = min(min(c["ts"], default=math.inf) for c in (col.f, col.a, col.r, col.k))
    nk = len(col.k["ts"])
    if gpu_end is None:
        lost = "all GPU activity (no kernel was kept)"
    elif cpu_end > gpu_end and math.isfinite(start) and gpu_end > start:
        gone = cpu_end - gpu_end
        lost = (f"no kernel after {gpu_end - start:,.0f} us although the CPU side runs to {cpu_end - start:,.0f} us: "
                f"the kernels of the last {gone:,.0f} us ({100.0 * gone / (cpu_end - start):.0f}% of the window; "
                f"about {nk * gone / (gpu_end - start):,.0f} kernels at the kept ones' rate) are lost")
    else:
        lost = "unknown (the kept kernels run to the end of the kept CPU side)"
    return (f"{base}: truncated trace (process killed mid-write, or the copy cut?): kept {col.events:,} complete "
            f"events ({nk:,} kernels); events lost: unknown (the file's full size is not in it) and any metadata "
            f"written after them; GPU time lost: {lost}. Category shares and step times cover only what was kept: "
            f"copy or re-export the complete trace")
