"""What a result records: its own ``to_record(args)`` (each result type, in its own package, says what its
figures, facts, tables, inputs and settings are), and the catalogue's default for a type without one: a
DataFrame records its rows and the numeric cells of its first rows as figures; anything else its call's
settings. Units are not said here: every figure's unit comes from the declared table (``kit.util.unit_of``).
"""
from __future__ import annotations

import os
from typing import Any

from kit.util import call_settings, frame_figures


def _frame(df, args) -> dict:
    src = args.get("source")
    named = isinstance(src, (str, os.PathLike)) and "\n" not in str(src) and len(str(src)) < 4096
    return {"inputs": [src] if named else [], "settings": call_settings(args), "figures": frame_figures(df),
            "tables": {"rows": df}, "warnings": list(df.attrs.get("warnings", []))}


def _provenance(inputs) -> str | None:
    """Where the inputs came from (``kit.provenance.provenance_of``: measured where and when, sample,
    third-party ...), one label per distinct answer."""
    from kit.provenance import provenance_of  # deferred: only results with local inputs need it

    labels = []
    for i in inputs:
        path = i[1] if isinstance(i, tuple) else i
        if isinstance(path, (str, os.PathLike)) and os.path.exists(path):
            label = provenance_of(path).label
            if label not in labels:
                labels.append(label)
    return "; ".join(labels) or None


def extract(result: Any, args: dict) -> dict:
    """Keyword arguments of :func:`kit.runs.record` for ``result`` of a call made with ``args``."""
    own = getattr(result, "to_record", None)
    out = own(args) if callable(own) else None
    if out is None:
        import pandas as pd  # deferred: only a DataFrame result needs it, and then pandas is loaded already

        out = _frame(result, args) if isinstance(result, pd.DataFrame) else {"settings": call_settings(args)}
    if out.get("inputs") and "provenance" not in out:
        out["provenance"] = _provenance(out["inputs"])
    return out
