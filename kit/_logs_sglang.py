"""SGLang scheduler log lines (private to ``kit.logs``): ``Prefill batch`` / ``Decode batch`` and the
startup ``server_args`` dump, in every format from 0.4.x to 0.5.2x (see
``../shared/reference/serving-formats.md`` section 1).

Lines are parsed key by key, never by position: the body after ``Decode batch`` is split at
``", "`` into ``key: value`` pairs, because fields come and go with the version (``cuda graph``,
``accept rate``, ``cap len``), the model type (hybrid SWA / Mamba usage fields), PD mode and device
(``npu graph``). Each line's *format variant* is also counted, because it dates the engine:

    dot        ``Decode batch. #running-req: ...``         sglang <= 0.5.3
    bracket    ``Decode batch [123], #running-req: ...``   0.5.4 (or 0.5.6-0.5.8 with SGLANG_LOG_FORWARD_ITERS)
    trailing   ``Decode batch, ... #queue-req: 0, ``       0.5.6-0.5.8 (trailing ", ")
    comma      ``Decode batch, ... #queue-req: 0``         0.5.9 and later

The variant is kept per row in the ``format`` column.
"""
from __future__ import annotations

import ast
import re
from typing import Any

from kit._logs_table import CHUNK, snake, value

# Line header: "[2025-10-22 10:27:56 TP0] " / "[2025-05-14 09:31:43.123 DP1 TP3] " / none.
HEADER = re.compile(
    r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
)
_BRACKET_ITER = re.compile(r"\[(\d+)\], ")

DECODE_COLUMNS = ("time", "ranks", "line", "running_req", "gen_throughput", "accept_len", "accept_rate",
                  "queue_req", "graph", "graph_kind")
PREFILL_COLUMNS = ("time", "ranks", "line", "new_seq", "new_token", "cached_token", "running_req",
                   "queue_req")

OK, TORN = 1, 2


# A value as SGLang prints it, followed by ", " or the end of the body: whatever else follows a
# value (junk from another writer) stays in the template, which then fails validation (torn).
_VALUE = re.compile(r": (-?[0-9][0-9.]*%?|True|False|nan%?|-?inf)(?=, |$)")
FAST_HEAD = ("line", "time", "ranks", "iter")
_RANKS_OK: dict[str, str | None] = {"": None}
_RANKS = re.compile(r"(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)+")


def parse_batch_line(line: str, lineno: int, kind: str, pos: int, st) -> int:
    """Parse one ``Prefill batch`` / ``Decode batch`` line found at ``pos``; returns OK or TORN.

    Fast path: the body is split into template + values by one regex call; a template seen before
    maps straight to its columns (``st.decode_fast`` / ``st.prefill_fast``). A new template is
    checked once by the careful key-by-key parser (:func:`_parse_body`), which also handles the
    rare shapes the fast path cannot (rows then go to ``st.decode`` / ``st.prefill``).
    The format variant of each line is kept in the ``format`` column.
    """
    if pos:
        # "[2025-10-22 10:27:56 TP0] " / "[2025-10-22 10:27:56.123 DP1 TP3] " / "[2025-05-14 09:31:43] "
        if line[0] != "[" or line[pos - 2] != "]" or line[5] != "-" or line[14] != ":":
            return TORN  # something else was written in front of the message: torn/interleaved
        extra = line[20:pos - 2]
        if extra:
            ranks = _RANKS_OK.get(extra, "?")
            if ranks == "?":
                ranks = _ranks(extra)
                if ranks == "?":
                    return TORN
            ts = line[1:24] if extra[0] == "." else line[1:20]
        else:
            ts = line[1:20]
            ranks = None
    else:
        ts = ranks = None
    start = pos + len(kind) + 6  # after "Decode batch" / "Prefill batch"
    sep = line[start]
    it = None
    if sep == ",":
        variant = "comma"
        body = line[start + 2:].rstrip()
    elif sep == ".":
        variant = "dot"
        body = line[start + 2:].rstrip()
    else:
        m = _BRACKET_ITER.match(line, start + 1)
        if m is None or sep != " ":
            return TORN
        variant = "bracket"
        body = line[m.end():].rstrip()
        it = int(m.group(1))
    if body[-1:] == ",":
        body = body[:-1]
        if variant == "comma":
            variant = "trailing"
    parts = _VALUE.split(body)
    tmpl = variant + kind + "".join(parts[0::2])
    fast = st.decode_fast if kind == "Decode" else st.prefill_fast
    group = fast.groups.get(tmpl)
    if group is None:
        if tmpl not in fast.slow:
            row = _parse_body(body, kind)
            if row is None:
                return TORN
            names = tuple(k for k in row if k != "graph_kind")
            if len(names) == len(parts) // 2 and len(set(names)) == len(names):
                consts = {"graph_kind": row["graph_kind"]} if "graph_kind" in row else {}
                consts["format"] = variant
                group = fast.add_group(tmpl, names, consts)
            else:
                fast.slow.add(tmpl)
        if group is None:
            row = _parse_body(body, kind)
            if row is None:
                return TORN
            row = {"line": lineno, "time": ts, "ranks": ranks, "iter": it, **row, "format": variant}
            (st.decode if kind == "Decode" else st.prefill).add(row)
            return OK
    group.append((lineno, ts, ranks, it, *parts[1::2]))
    fast.n += 1
    if fast.n >= CHUNK:
        fast.flush()
    return OK


def _ranks(extra: str) -> str | None:
    """Validate the part of the header after the seconds (``.123`` and/or `` DP1 TP3``); '?' if bad."""
    rest = extra[4:] if extra[0] == "." and extra[1:4].isdigit() else extra
    if rest and _RANKS.fullmatch(rest) is None:
        return "?"
    _RANKS_OK[extra] = rest.strip() or None
    return _RANKS_OK[extra]


def _parse_body(body: str, kind: str) -> dict | None:
    """Key-by-key parse of a batch line body -> {column: value}; None when malformed (torn)."""
    row: dict[str, Any] = {}
    for piece in body.split(", "):
        key, sep, text = piece.partition(": ")
        if not sep:
            return None
        if key.endswith(" graph"):
            row["graph_kind"] = key[:-6]
            key = "graph"
        else:
            key = snake(key)
        try:
            row[key] = value(text)
        except ValueError:
            return None
    if kind == "Decode" and "gen_throughput" not in row:
        return None
    return row


# --------------------------------------------------------------------------- server_args

def parse_server_args(text: str) -> dict[str, Any]:
    """The startup ``server_args=ServerArgs(k=v, ...)`` repr (<= 0.5.16) or ``server_args={'k': v}``
    dict (>= 0.5.20) -> dict of Python values.

    Works on a whole log line or just the dump. Values that are not Python literals (objects in
    the repr) are kept as their source text. A truncated dump (pastes often are) yields the keys
    read before the cut; the flag ``'__truncated__': True`` is then set in the result.
    """
    start = text.find("server_args=")
    body = text[start + len("server_args="):] if start >= 0 else text
    body = body.strip()
    if body.startswith("ServerArgs("):
        body, close, style = body[len("ServerArgs("):], ")", "repr"
    elif body.startswith("{"):
        body, close, style = body[1:], "}", "dict"
    else:
        raise ValueError("no ServerArgs(...) repr or server_args dict found")
    items, complete = _split_top_level(body, close)
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        item = item.strip()
        if not item:
            continue
        if style == "repr":
            key, sep, val = item.partition("=")
            key = key.strip()
        else:
            m = re.match(r"""\s*(['"])(.*?)\1\s*:\s*""", item, re.S)
            if m is None:
                key, sep, val = "", "", ""
            else:
                key, sep, val = m.group(2), ":", item[m.end():]
        if i == len(items) - 1 and not complete:
            break  # the cut fell inside this item: its value may be incomplete
        if not sep or not key.isidentifier():
            continue
        try:
            out[key] = ast.literal_eval(val.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[key] = val.strip()
    if not complete:
        out["__truncated__"] = True
    return out


def _split_top_level(body: str, close: str) -> tuple[list[str], bool]:
    """Split at commas outside quotes/brackets; stop at the closing bracket. Returns the items and
    whether the closing bracket was found (False: the dump was truncated)."""
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    n = len(body)
    opens, closes = "([{", ")]}"
    while i < n:
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in opens:
            depth += 1
        elif ch in closes:
            if depth == 0:
                if ch == close:
                    items.append(body[start:i])
                    return items, True
            else:
                depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    return items, False
