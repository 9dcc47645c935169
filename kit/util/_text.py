"""Text helpers: ANSI stripping, shell quoting, clipping, signed differences, percentages, small HTML tables."""
from __future__ import annotations

import html as _html
import re
import shlex
from typing import Any, Iterable

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""Terminal colour/style escapes (vLLM colours its log level; raw TTY captures of nvidia-smi underline)."""
quote = shlex.quote
"""The one way to put a path, pattern or value into a shell command."""


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


def html_fields(title: str, fields: Iterable[tuple[str, Any]]) -> str:
    """A small titled two-column table (name, value), escaped: the HTML view of result objects."""
    rows = "".join(f"<tr><td style='text-align:left;color:#57606a'>{_html.escape(str(k))}</td>"
                   f"<td style='text-align:left'>{_html.escape(str(v))}</td></tr>" for k, v in fields)
    return (f"<div><b>{_html.escape(title)}</b><table style='font-size:90%'><tbody>{rows}</tbody></table></div>")
