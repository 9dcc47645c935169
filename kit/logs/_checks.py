"""Physical-range checks where printed values have become numbers (private to ``kit.logs``).

Everything a serving log or a benchmark prints as a number is a count, a length, a duration, a throughput, a
usage or a fraction: never negative, never infinite, never beyond ``LIMIT``, a fraction never above 1. A value
that breaks this (a torn write, a bug, a hand-edited file) is dropped and counted in one warning per column that
names its first line; NaN (an empty window) stays. A decode line keeps its other fields but loses its acceptance
pair together (the pair decides the definition); a vLLM acceptance record goes whole; a benchmark run keeps its
other figures.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

# Above this nothing a log prints is physical (tokens, ms, tok/s, bytes): 10**15.
LIMIT = 1e15
FRACTIONS = frozenset({"accept_rate", "printed_accept_rate", "spec_acceptance_rate", "draft_acceptance_rate",
                       "cache_hit_rate", "prefix_cache_hit_rate", "system_efficiency"})
# Settings or positions, not measurements: left as printed (a request rate may be ``inf``).
_SKIP = frozenset({"line", "iter", "engine_index", "engines_aggregated", "elapsed_s", "request_rate",
                   "max_concurrency", "pid", "index"})
# Benchmark columns that hold figures (the others are names, dates, flags).
_BENCH_NUMERIC = re.compile(r"(?:_ms|_s|throughput|_tok_s|_rate|_length|_len|_tokens|latency|completed|failed|"
                            r"concurrency|batch_size|_drafts|_requests)$")
_PAIR = ("accept_len", "accept_rate")
_VLLM_SPEC = ("printed_accept_len", "printed_accept_rate", "accepted_tokens", "draft_tokens", "emitted_tokens",
              "system_efficiency", "k", "gen_throughput")


def _reason(col: str, x: Any) -> str | None:
    """Why ``x`` cannot be a value of ``col`` (None when it can; NaN and None are missing, not bad)."""
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, str):
        return "not a number"
    try:
        f = float(x)
    except OverflowError:
        return "beyond any physical range"
    except (TypeError, ValueError):
        return "not a number"
    if math.isnan(f):
        return None
    if math.isinf(f):
        return "not finite"
    if f < 0:
        return "negative"
    if f > LIMIT:
        return "beyond any physical range"
    if col in FRACTIONS and f > 1.0 + 1e-9:
        return "above 1 for a fraction"
    return None


def _bad_mask(col: str, s: pd.Series) -> np.ndarray:
    """Rows whose value of ``col`` is bad, vectorised for numeric columns."""
    if s.dtype.kind in "iuf":
        a = s.to_numpy()
        bad = np.isinf(a) | (a < 0) | (a > LIMIT)
        if col in FRACTIONS:
            bad |= a > 1.0 + 1e-9
        return np.asarray(bad, dtype=bool)
    if s.dtype.kind == "O":
        return np.fromiter((_reason(col, x) is not None for x in s.to_numpy()), bool, len(s))
    return np.zeros(len(s), dtype=bool)


def _columns(t: pd.DataFrame, kind: str) -> list[str]:
    cols = []
    for c in t.columns:
        if c in _SKIP or c == "time":
            continue
        kind_ = t[c].dtype.kind
        if kind == "bench":
            if _BENCH_NUMERIC.search(c) and kind_ in "iufO":
                cols.append(c)
        elif kind_ in "iuf" or (kind_ == "O" and _holds_numbers(t[c])):
            cols.append(c)
    return cols


def _holds_numbers(s: pd.Series) -> bool:
    """An object column of a log table that holds numbers (a column of names or flags does not)."""
    first = s.dropna()
    return bool(len(first)) and isinstance(first.iloc[0], (int, float)) and not isinstance(first.iloc[0], bool)


def _say(warnings: list[str], what: str, n: int, col: str, t: pd.DataFrame, bad: np.ndarray) -> None:
    i = int(np.argmax(bad))
    raw = t[col].iloc[i]
    if isinstance(raw, np.generic):
        raw = raw.item()
    shown = repr(raw) if not isinstance(raw, int) or abs(raw) < 10 ** 20 else f"a {len(str(raw))}-digit number"
    at = f"line {int(t['line'].iloc[i])}" if "line" in t.columns else f"row {i}"
    warnings.append(f"{n} {what} of {col} dropped: {_reason(col, raw) or 'out of range'} "
                    f"(first at {at}: {shown})")


def check_values(t: pd.DataFrame, kind: str, warnings: list[str]) -> pd.DataFrame:
    """``t`` (a decode, prefill, throughput or bench table) with every out-of-range value set to NaN
    and one warning per column that had any; the acceptance pair of a decode line goes together."""
    if not len(t):
        return t
    pair_bad = None
    for col in _columns(t, kind):
        bad = _bad_mask(col, t[col])
        n = int(bad.sum())
        if not n:
            continue
        _say(warnings, f"{kind} value(s)", n, col, t, bad)
        if kind == "decode" and col in _PAIR:
            pair_bad = bad if pair_bad is None else pair_bad | bad
            continue
        t[col] = _blank(t[col], bad)
    if pair_bad is not None:
        for col in _PAIR:
            if col in t.columns:
                t[col] = _blank(t[col], pair_bad)
    return t


def check_vllm_spec(raw: pd.DataFrame, warnings: list[str]) -> pd.DataFrame:
    """Raw vLLM acceptance records without those holding an out-of-range value (counted per column)."""
    if not len(raw):
        return raw
    drop = np.zeros(len(raw), dtype=bool)
    for col in _VLLM_SPEC:
        if col in raw.columns:
            bad = _bad_mask(col, raw[col])
            if bad.any():
                _say(warnings, "vLLM acceptance record(s) with a bad value", int(bad.sum()), col, raw, bad)
                drop |= bad
    if "per_position" in raw.columns:
        bad = np.fromiter((_bad_positions(p) for p in raw["per_position"].to_numpy()), bool, len(raw))
        if bad.any():
            _say(warnings, "vLLM acceptance record(s) with a bad value", int(bad.sum()), "per_position", raw, bad)
            drop |= bad
    return raw.loc[~drop].reset_index(drop=True) if drop.any() else raw


def _bad_positions(p: Any) -> bool:
    if not isinstance(p, tuple):
        return False
    return any(_reason("draft_acceptance_rate", x) is not None for x in p)


def _blank(s: pd.Series, bad: np.ndarray) -> pd.Series:
    """``s`` with the ``bad`` rows missing, as a float column when what is left is numeric."""
    if s.dtype.kind in "iu":
        s = s.astype(np.float64)
    s = s.mask(bad)
    if s.dtype.kind == "O":
        s = pd.to_numeric(s, errors="coerce") if s.notna().any() else s
    return s
