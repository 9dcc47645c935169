"""Tables a reader can read: a DataFrame rendered to fit the page, for notebooks and the report.

pandas' own HTML right-aligns every cell, prints ``NaN``/``None`` and never wraps, so a table of
configurations scrolls sideways. ``table`` renders text left and numbers right, a missing value as ``-`` or
its reason, long names shortened with the full name on hover, in inline styles that read the same in
JupyterLab, the exported page and the PDF."""
from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd

from kit.errors import UsageError

__all__ = ["Table", "table"]

_CELL = "padding:3px 6px;vertical-align:top;border-bottom:1px solid #d8dee4;"
_TEXT = _CELL + "text-align:left;white-space:normal;overflow-wrap:break-word;word-break:normal"
_NUM = _CELL + "text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
_MISSING_STYLE = "color:#6e7781"


def _is_missing(v: Any) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return True
    try:
        return v is pd.NA or v is pd.NaT or (not isinstance(v, (str, bytes)) and bool(pd.isna(v)) is True)
    except (TypeError, ValueError):  # arrays, lists: not a missing scalar
        return False


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


def _number(v: Any, digits: int) -> str:
    if isinstance(v, numbers.Integral):
        return f"{int(v):,}".replace(",", " ") if abs(int(v)) >= 100_000 else str(int(v))
    text = f"{float(v):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # never "-0.00"


def _digits_for(values: Sequence[Any], digits: int) -> int:
    """Decimals of a column: ``digits``, none where every value is a whole number."""
    floats = [float(v) for v in values if _is_number(v) and not _is_missing(v)]
    return 0 if floats and all(f.is_integer() for f in floats) and all(abs(f) < 1e15 for f in floats) else digits


@dataclass
class Table:
    """A rendered table: ``columns`` (header text), ``rows`` (cell text), which columns are numeric,
    the hover text of shortened cells and the footnotes. ``_repr_html_`` is what pages show."""

    columns: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    titles: dict[tuple[int, int], str] = field(default_factory=dict)
    missing: set[tuple[int, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    caption: str = ""
    code: set[int] = field(default_factory=set)  # columns whose text is source code, shown as code

    def _header(self) -> str:
        cells = "".join(f"<th style='{_TEXT};text-align:{'right' if n else 'left'};border-bottom:2px solid #8c959f'>"
                        f"{html.escape(c).replace('_', '_<wbr>')}</th>"
                        for c, n in zip(self.columns, self.numeric))
        return f"<thead><tr>{cells}</tr></thead>"

    def _cell(self, r: int, c: int, text: str) -> str:
        style = _NUM if self.numeric[c] else _TEXT
        body = html.escape(text)
        if c in self.code and (r, c) not in self.missing:
            body = f"<code>{body}</code>"
        if (r, c) in self.titles:
            body = f"<span title='{html.escape(self.titles[(r, c)], quote=True)}'>{body}</span>"
        if (r, c) in self.missing:
            body = f"<span style='{_MISSING_STYLE}'>{body}</span>"
        return f"<td style='{style}'>{body}</td>"

    def _repr_html_(self) -> str:
        body = "".join("<tr>" + "".join(self._cell(r, c, t) for c, t in enumerate(row)) + "</tr>"
                       for r, row in enumerate(self.rows))
        cap = (f"<caption style='caption-side:top;text-align:left;font-weight:600;padding:2px 0'>"
               f"{html.escape(self.caption)}</caption>") if self.caption else ""
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        notes = f"<ol style='font-size:12px;margin:4px 0 0 18px;padding:0'>{notes}</ol>" if notes else ""
        return (f"<div class='kit-table'><table style='border-collapse:collapse;max-width:100%;margin:0;"
                f"table-layout:auto;font-size:13px'>{cap}{self._header()}<tbody>{body}</tbody></table>{notes}</div>")

    def __repr__(self) -> str:
        widths = [max([len(c)] + [len(r[i]) for r in self.rows]) for i, c in enumerate(self.columns)]
        fmt = lambda cells: "  ".join(t.rjust(w) if n else t.ljust(w)  # noqa: E731
                                      for t, w, n in zip(cells, widths, self.numeric)).rstrip()
        lines = ([self.caption] if self.caption else []) + [fmt(self.columns)] + [fmt(r) for r in self.rows]
        return "\n".join(lines + [f"[{i}] {n}" for i, n in enumerate(self.notes, 1)])

    def __len__(self) -> int:
        return len(self.rows)


def _shorten(text: str, limit: int) -> str:
    """A name longer than ``limit`` (a kernel signature, a path: a word longer than ``limit``, or C++
    scopes and templates) cut to its start and end around an ellipsis; prose is left to wrap."""
    if len(text) <= limit or not (any(len(w) > limit for w in text.split()) or "::" in text or "<" in text):
        return text
    head = max(limit - 1, 4) * 2 // 3
    tail = max(limit - 1, 4) - head
    return f"{text[:head].rstrip()}\u2026{text[-tail:].lstrip()}"


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple, set)):
        return ", ".join(str(x) for x in v)
    return str(v)


def table(df: Any, *, digits: int | Mapping[str, int] = 2, units: Mapping[str, str] | None = None,
          missing: str | Mapping[str, str] = "-", short: int = 40, notes: Sequence[str] = (),
          index: bool | None = None, caption: str = "", code: Sequence[str] = ()) -> Table:
    """Render ``df`` (a DataFrame, or a Series as one column) as a :class:`Table` that fits a page.

    ``digits``: decimals of float columns, or per column (others 2; none where all values are whole).
    ``units`` maps a column to the unit its header gains (``{"time": "ms"}`` -> ``time (ms)``).
    ``missing``: the text of a missing value, or per column the reason it is missing
    (``{"attention": "not in log"}``, others ``-``). A word longer than ``short`` characters is
    shortened, the full text on hover. ``notes`` names text columns whose values move to footnotes
    under the table (the cell shows ``[n]``). ``index`` shows the index as the first column(s)
    (default: unless it is a plain 0..n-1 range). ``code`` names columns that hold source text
    (``None`` there is the literal, not a missing value), shown as code. Booleans read yes/no."""
    if isinstance(df, pd.Series):
        df = df.to_frame()
    if not isinstance(df, pd.DataFrame):
        raise UsageError(f"kit.report.table: expected a DataFrame or Series, got {type(df).__name__}")
    bad = [c for c in list(units or {}) + list(notes) + list(code) if c not in df.columns]
    if bad:
        raise UsageError(f"kit.report.table: no column(s) {bad} in the table (columns: {list(map(str, df.columns))})")
    show_index = index if index is not None else not isinstance(df.index, pd.RangeIndex)
    frame = df.reset_index() if show_index else df
    if show_index and all(n is None for n in df.index.names):  # an unnamed index gets no made-up header
        frame = frame.rename(columns={"index": "", "level_0": ""})
    cols = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in frame.columns]
    reasons = missing if isinstance(missing, Mapping) else {}
    default = "-" if isinstance(missing, Mapping) else missing
    out = Table(columns=[f"{c} ({(units or {})[c]})" if c in (units or {}) else c for c in cols], rows=[],
                numeric=[], caption=caption, code={i for i, c in enumerate(cols) if c in code})
    values = [list(frame.iloc[:, i]) for i in range(frame.shape[1])]
    out.numeric = [bool(v) and all(_is_number(x) or _is_missing(x) for x in v) and any(_is_number(x) for x in v)
                   for v in values]
    decimals = [_digits_for(v, digits.get(name, 2) if isinstance(digits, Mapping) else digits)
                for v, name in zip(values, cols)]
    for r in range(len(frame)):
        row = []
        for c, name in enumerate(cols):
            v = values[c][r]
            if _is_missing(v):
                row.append(reasons.get(name, default))
                out.missing.add((r, len(row) - 1))
            elif out.numeric[c]:
                row.append(_number(v, decimals[c]))
            elif name in notes:  # the same text twice is one footnote
                if _text(v) not in out.notes:
                    out.notes.append(_text(v))
                row.append(f"[{out.notes.index(_text(v)) + 1}]")
            else:
                full = _text(v)
                row.append(_shorten(full, short))
                if row[-1] != full:
                    out.titles[(r, c)] = full
        out.rows.append(row)
    return out
