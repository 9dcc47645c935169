"""Text columns read once per distinct value: the tables keep names as categoricals, and pandas 3's
``astype(str)`` of one makes a new string object per row (a 229 MB trace's kernel names, ~450
characters each for ROCm ``Cijk`` GEMMs: +14 MiB for one call). These read the categories instead."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kit.profile.reading._read import text_codes


def _categorical(s: pd.Series) -> pd.Series:
    return s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")


def categorical(values, categories: list | None = None) -> pd.Categorical:
    """``pd.Categorical(values, categories)`` of text (``str``, a missing value None), coded through a dict
    (``_read.text_codes``): ~5x faster than pandas' factorising of Python strings. ``values`` may be codes
    already (``_read.coded``); values that are not all text go to pandas."""
    got = values if type(values) is tuple else \
        text_codes(values.tolist() if isinstance(values, np.ndarray) else values, categories)
    if got is None:
        return pd.Categorical(values)
    return pd.Categorical.from_codes(np.frombuffer(got[0], dtype=np.int64), categories=got[1])


def strings(s: pd.Series) -> np.ndarray:
    """A column as an object array of ``str``, one shared object per distinct value (what
    ``astype(str).to_numpy()`` gives, a missing value as ``"nan"``)."""
    c = _categorical(s)
    cats = np.empty(len(c.cat.categories) + 1, dtype=object)
    cats[:-1] = [str(x) for x in c.cat.categories]
    cats[-1] = "nan"   # what astype(str) gives a missing value
    return cats[c.cat.codes.to_numpy()]


def matching(s: pd.Series, rx: re.Pattern) -> np.ndarray:
    """Rows whose text ``rx`` finds (``astype(str).str.contains(rx)``), searched once per distinct value."""
    c = _categorical(s)
    hit = np.array([rx.search(str(x)) is not None for x in c.cat.categories] + [rx.search("nan") is not None],
                   dtype=bool)
    return hit[c.cat.codes.to_numpy()]


def among(s: pd.Series, values, missing: bool | None = None) -> np.ndarray:
    """Rows whose text is one of ``values`` (``astype(str).isin(values)``: a missing value reads as
    ``"nan"``; ``missing`` overrides that), tested once per distinct value."""
    c = _categorical(s)
    want = set(values)
    hit = np.array([str(x) in want for x in c.cat.categories] + ["nan" in want if missing is None else missing],
                   dtype=bool)
    return hit[c.cat.codes.to_numpy()]


# a group sum's columns under the names the tables use (``groupby(...)[["dur_us", "count"]].sum()``: the
# same sums as ``agg(time_us=("dur_us", "sum"), ...)``, without named aggregation's ~1 ms per call)
TIME_CALLS = {"dur_us": "time_us", "count": "calls"}
