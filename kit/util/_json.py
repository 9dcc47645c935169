"""JSON-ready values and table rows, and what a result's ``to_record`` hands the run catalogue: the call's
plain settings and a table's numeric cells as figures."""
from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

_MAX_FIGURE_ROWS = 64
_SKIP_SETTINGS = {"self", "host", "session", "prefetched", "clocks", "a", "b", "path", "paths", "source"}

def print_json(obj: Any, **options: Any) -> None:
    """``obj`` as JSON on stdout and a newline (``options``: ``json.dump``'s; default indent 1, values it cannot
    write as text)."""
    json.dump(obj, sys.stdout, **({"indent": 1, "default": str} | options))
    sys.stdout.write("\n")


def print_result(result: Any, as_json: bool, **options: Any) -> None:
    """A command's answer on stdout: ``result.to_dict()`` as JSON (``options``: :func:`print_json`'s), else its
    ``repr``, what a notebook shows."""
    if as_json:
        print_json(result.to_dict(), **options)
    else:
        print(repr(result))


def frame_records(df: "pd.DataFrame") -> list[dict[str, Any]]:
    """A table -> JSON-ready list of dicts (times as printed style strings, NaN -> None)."""
    out = []
    cols = list(df.columns)
    for row in df.itertuples(index=False, name=None):
        out.append({c: jsonable(v) for c, v in zip(cols, row)})
    return out


def jsonable(v: Any) -> Any:
    """One cell or value -> something ``json.dumps`` takes (NaN/NaT -> None, numpy scalars -> Python)."""
    import pandas as pd  # deferred: kit.util stays free of pandas for what imports it without tables

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


def call_settings(args: dict) -> dict:
    """The call's plain arguments (numbers, text, lists, dicts), JSON-ready: what a run records as settings
    (inputs, hosts and sessions are recorded apart, or not at all)."""
    return {k: jsonable(v) for k, v in args.items()
            if k not in _SKIP_SETTINGS and (v is None or isinstance(v, (str, int, float, bool, list, tuple, dict)))}


def frame_figures(df, key: str | None = None) -> list[tuple]:
    """Numeric cells of the first rows of ``df`` as figures ``(name, value, item)``: name = column, item =
    the row's ``key`` (its position when there is no key and several rows). Units come from the declared
    table (``kit.util.unit_of``)."""
    out: list[tuple] = []
    if df is None or not len(df):
        return out
    cols = [c for c in df.columns if str(df[c].dtype)[:3] in ("int", "flo", "Int", "Flo", "uin")]
    for i, r in enumerate(df.head(_MAX_FIGURE_ROWS).to_dict("records")):
        item = r.get(key) if key else (i if len(df) > 1 else None)
        for c in cols:
            try:
                v = float(r[c])
            except (TypeError, ValueError):
                continue
            if c != key and math.isfinite(v):
                out.append((str(c), r[c], item))
    return out
