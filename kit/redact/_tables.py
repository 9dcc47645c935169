"""Secrets in text tables (pandas, tabulate, markdown, ``column -t``, ``df.to_string``): a secret-named cell
and the value in the cell after it, or a secret-named column header and the cells under it."""
from __future__ import annotations

import re
from typing import Iterator

from kit.redact._names import secret_name
from kit.redact._patterns import NOT_A_VALUE

_CELL_SEP = r"(?:[ ]{2,}|\t|[ ]*\|[ ]*)"
_HEADER = re.compile(r"(?m)^[ \t|]*[A-Za-z_][\w.-]*(?:" + _CELL_SEP + r"[A-Za-z_][\w.-]*)+[ \t|]*$")
_ROW = re.compile(r"(?m)^[ \t|]*(?:[\w.-]+" + _CELL_SEP + r")?(?P<k>[A-Za-z_][\w.-]*)" + _CELL_SEP
                  + r"(?P<s>[^\s|\"']+)[ \t|]*(?:$|" + _CELL_SEP + ")")
_RULE_LINE = re.compile(r"[ \t|:=+-]*-{3,}[ \t|:=+-]*(?:\n|$)")


def table_spans(text: str) -> Iterator[tuple[int, int]]:
    if "  " not in text and "|" not in text and "\t" not in text:
        return
    for m in _ROW.finditer(text):
        v = m.group("s")
        if secret_name(m.group("k")) and not NOT_A_VALUE.fullmatch(v) and not secret_name(v) \
                and not _RULE_LINE.match(text, m.end() + 1):  # not a header ("token  auth" over a rule)
            yield m.span("s")
    for h in _HEADER.finditer(text):
        cols = [c.span() for c in re.finditer(r"[^\s|]+", h.group(0)) if secret_name(c.group(0))]
        if not cols:
            continue
        pipes = "|" in h.group(0)
        ncells = len(h.group(0).split())
        heads = [i for i, c in enumerate(re.split(r"\|", h.group(0))) if secret_name(c.strip())] if pipes else []
        pos = h.end() + 1
        for _ in range(500):  # the rows below, to the first blank line
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            line = text[pos:end]
            if not line.strip() or pos > len(text) or ("|" in line) != pipes or \
                    (not pipes and _HEADER.fullmatch(line)):
                break  # the table ends at a blank line, another kind of line or the next header
            if not pipes and len(line.split()) not in (ncells, ncells + 1):
                break
            if pipes:
                cells, off = [], 0
                for c in line.split("|"):
                    cells.append((off, off + len(c)))
                    off += len(c) + 1
                spans = [cells[i] for i in heads if i < len(cells)]
            else:
                spans = [(c.start(), c.end()) for c in re.finditer(r"\S+", line)
                         if any(c.start() < b and a < c.end() for a, b in cols)]
            for a, b in spans:
                v = line[a:b].strip()
                if v and not set(v) <= set("-:=+ ") and not NOT_A_VALUE.fullmatch(v):
                    a += len(line[a:b]) - len(line[a:b].lstrip())
                    yield pos + a, pos + a + len(v)
            pos = end + 1


def aligned_spans(text: str) -> Iterator[tuple[int, int]]:
    """Cells of a right-aligned text table (``df.to_string(index=False)``: every line of the block the
    same width, columns ending where the header's names end, a cell maybe one space from the next or
    holding spaces): the cell after a secret-named cell (a name/value layout) and the cells under a
    secret-named header."""
    if "\n" not in text or "  " not in text:
        return
    lines, pos = [], 0
    for line in text.split("\n"):
        lines.append((pos, line))
        pos += len(line) + 1
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1][1].strip() and len(lines[j + 1][1]) == len(lines[i][1]):
            j += 1
        if j > i and lines[i][1].strip():
            yield from _aligned_block(lines[i:j + 1])
        i = j + 1


def _aligned_block(block: list[tuple[int, str]]) -> Iterator[tuple[int, int]]:
    head = block[0][1]
    ends = [m.end() for m in re.finditer(r"\S+", head)]
    if len(ends) < 2 or not _HEADER.fullmatch(head):   # a header of column names, not a log line
        return
    if any(line[e] != " " for _, line in block[1:] for e in ends[:-1]):
        return   # cells end where the header's names end, one space at least between them
    secret_cols = {k for k, m in enumerate(re.finditer(r"\S+", head)) if secret_name(m.group(0))}
    for start, line in block[1:]:
        cells = []
        for k, e in enumerate(ends):
            a = ends[k - 1] if k else 0
            raw = line[a:e]
            v = raw.strip()
            cells.append((start + a + len(raw) - len(raw.lstrip()), v))
        for k, (at, v) in enumerate(cells):
            name_before = k > 0 and secret_name(cells[k - 1][1])
            if v and (name_before or k in secret_cols) and not NOT_A_VALUE.fullmatch(v) and not secret_name(v):
                yield at, at + len(v)
