"""HTML for kit.source results: pygments-highlighted code with the file's line numbers (lexers with
``stripnl=False``), side-by-side diffs; inline styles, so an exported report needs no stylesheet."""
from __future__ import annotations

import difflib
import html
from collections.abc import Iterable, Sequence

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, TextLexer, get_lexer_for_filename
from pygments.styles.default import DefaultStyle
from pygments.token import Error
from pygments.util import ClassNotFound

_HL_COLOR = "#fff2a8"
_BOX = "border:1px solid #ddd;border-radius:4px;margin:4px 0;overflow:auto"
_HEAD = "font-family:monospace;font-size:90%;background:#f4f4f4;padding:3px 8px;border-bottom:1px solid #ddd"
_NOTE = "font-family:monospace;font-size:90%;color:#8a4b00;padding:2px 8px"


class _KitStyle(DefaultStyle):
    """Pygments' default colours with a visible match-line highlight, and no red box around "error"
    tokens: a lone line or a slice cut from a file (an unclosed ``\"\"\"`` or double backticks in a
    docstring) lexes as errors that are not errors in the file."""

    highlight_color = _HL_COLOR
    styles = {**DefaultStyle.styles, Error: ""}


def _lexer(path: str):
    if path.endswith((".py", ".pyi")):
        return PythonLexer(stripnl=False, ensurenl=False)
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def code_block(path: str, lines: Sequence[str], start: int, *, title: str, highlight_lines: Iterable[int] = (),
               note: str | None = None) -> str:
    """A titled box of highlighted code numbered from ``start``; ``highlight_lines`` are file line numbers."""
    rel = sorted({n - start + 1 for n in highlight_lines if start <= n < start + len(lines)})
    formatter = HtmlFormatter(linenos="inline", linenostart=start, hl_lines=rel, noclasses=True,
                              style=_KitStyle, nobackground=True)
    body = highlight("\n".join(lines) + "\n", _lexer(path), formatter) if lines else "<pre>(no lines)</pre>"
    return _box(title, note, f"<div style='padding:0 4px'>{body}</div>")


def inline_code(path: str, text: str) -> str:
    """One highlighted line, for tables."""
    formatter = HtmlFormatter(nowrap=True, noclasses=True, style=_KitStyle)
    return "<code>" + highlight(text, _lexer(path), formatter).rstrip("\n") + "</code>"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, title: str, note: str | None = None) -> str:
    """An HTML table; cells are already HTML."""
    head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;vertical-align:top'>{c}</td>" for c in row)
                   + "</tr>" for row in rows)
    return _box(title, note,
                f"<table style='font-size:90%'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _box(title: str, note: str | None, body: str) -> str:
    """A bordered box: the title, the note under it, then ``body`` (HTML)."""
    note_html = f"<div style='{_NOTE}'>{html.escape(note)}</div>" if note else ""
    return f"<div style='{_BOX}'><div style='{_HEAD}'>{html.escape(title)}</div>{note_html}{body}</div>"


_DIFF_BG = {"equal": "", "replace": "#fff5b1", "delete": "#ffdce0", "insert": "#cdffd8"}


def side_by_side(a_title: str, a_lines: Sequence[str], a_start: int,
                 b_title: str, b_lines: Sequence[str], b_start: int) -> str:
    """Two columns with each side's own line numbers; changed rows tinted."""
    cell = "font-family:monospace;white-space:pre;padding:0 6px"
    num = "font-family:monospace;color:#888;text-align:right;padding:0 4px"
    out = [f"<div style='{_BOX}'><table style='border-collapse:collapse;font-size:90%'>",
           f"<thead><tr><th colspan=2 style='{_HEAD}'>{html.escape(a_title)}</th>"
           f"<th colspan=2 style='{_HEAD}'>{html.escape(b_title)}</th></tr></thead><tbody>"]
    matcher = difflib.SequenceMatcher(a=list(a_lines), b=list(b_lines), autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        style = f"background:{_DIFF_BG[op]};" if _DIFF_BG[op] else ""
        for k in range(max(i2 - i1, j2 - j1)):  # a row per line of the longer side, its own numbers on each
            sides = ((a_start + i1 + k, a_lines[i1 + k]) if i1 + k < i2 else None,
                     (b_start + j1 + k, b_lines[j1 + k]) if j1 + k < j2 else None)
            out.append("<tr>" + "".join(f"<td style='{num}'></td><td style='{cell};{style}'></td>" if side is None else
                                        f"<td style='{num}'>{side[0]}</td><td style='{cell};{style}'>"
                                        f"{html.escape(side[1])}</td>" for side in sides) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)
