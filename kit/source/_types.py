"""The result types of kit.source: a deterministic ``__repr__``, a ``__str__`` for terminals
(``sed -n`` style numbered lines) and a ``_repr_html_`` highlighted with the file's own line numbers;
the tabular ones (:class:`Matches`, :class:`Symbols`) are lists with ``to_frame()``."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from kit.source import _html


@dataclass(frozen=True)
class Slice:
    """Lines ``start..end`` (1-based, inclusive) of ``path`` on ``host``, numbered like ``sed -n`` by
    ``str()``, highlighted in a notebook; ``note`` says when the range was clipped."""

    host: str
    path: str
    start: int
    end: int
    lines: tuple[str, ...]
    total_lines: int
    highlight: tuple[int, ...] = ()
    note: str | None = None

    @property
    def text(self) -> str:
        """The lines joined with newlines, without numbers."""
        return "\n".join(self.lines)

    @property
    def clipped(self) -> bool:
        return self.note is not None and self.note.startswith("clipped")

    def numbered(self) -> list[tuple[int, str]]:
        return list(zip(range(self.start, self.end + 1), self.lines))

    def __len__(self) -> int:
        return len(self.lines)

    def __str__(self) -> str:
        width = len(str(self.end))
        out = [f"{n:>{width}}{'>' if n in self.highlight else ' '} {text}" for n, text in self.numbered()]
        if self.note:
            out.append(f"({self.note})")
        return "\n".join(out)

    def __repr__(self) -> str:
        note = f", note={self.note!r}" if self.note else ""
        return (f"Slice(host={self.host!r}, path={self.path!r}, start={self.start}, end={self.end}, "
                f"lines={len(self.lines)}{note})")

    def _repr_html_(self) -> str:
        return _html.code_block(self.path, self.lines, self.start, highlight_lines=self.highlight,
                                title=f"{self.host}:{self.path}:{self.start}-{self.end}", note=self.note)


@dataclass(frozen=True)
class Match:
    """One grep hit: file, line number, the line, and ``context`` lines before and after."""

    host: str
    path: str
    line: int
    text: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    def __str__(self) -> str:
        out = [f"{self.path}-{self.line - len(self.before) + i}-{t}" for i, t in enumerate(self.before)]
        out.append(f"{self.path}:{self.line}:{self.text}")
        out += [f"{self.path}-{self.line + 1 + i}-{t}" for i, t in enumerate(self.after)]
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"Match(host={self.host!r}, path={self.path!r}, line={self.line}, text={self.text.strip()!r})"


class Matches(list):
    """The hits of one :func:`grep`, sorted by (path, line); ``tool`` is "rg" or "grep"."""

    def __init__(self, items: list[Match], *, host: str, pattern: str, path: str, tool: str | None,
                 note: str | None = None) -> None:
        super().__init__(items)
        self.host, self.pattern, self.path, self.tool, self.note = host, pattern, path, tool, note

    def to_frame(self):
        """A DataFrame with columns path, line, text."""
        return pd.DataFrame([{"path": m.path, "line": m.line, "text": m.text} for m in self],
                            columns=["path", "line", "text"])

    def _title(self) -> str:
        return f"grep {self.pattern!r} in {self.host}:{self.path}: {len(self)} match(es) via {self.tool or '?'}"

    def __str__(self) -> str:
        ctx = any(m.before or m.after for m in self)
        out = []
        for path, n, text, hit, new_group in _merged(self):
            if new_group and out and ctx:
                out.append("--")
            out.append(f"{path}{':' if hit else '-'}{n}{':' if hit else '-'}{text}")
        return "\n".join(out) + (f"\n({self.note})" if self.note else "")

    def __repr__(self) -> str:
        lines = [self._title()]
        for path, n, text, hit, _ in _merged(self[:50]):  # context lines as grep shows them: path-line-text
            lines.append(f"  {path}:{n}: {text.strip()}" if hit else f"  {path}-{n}- {text.rstrip()}")
        if len(self) > 50:
            lines.append(f"  ... {len(self) - 50} more")
        if self.note:
            lines.append(f"  ({self.note})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = []
        for path, n, text, hit, _ in _merged(self):  # context lines in grey, the match line in bold numbers
            num = f"<b>{n}</b>" if hit else f"<span style='color:#6e7781'>{n}</span>"
            rows.append((html.escape(path), num, _html.inline_code(path, text)))
        return _html.table(["path", "line", "text"], rows, title=self._title(), note=self.note)


def _merged(matches) -> list[tuple[str, int, str, bool, bool]]:
    """Every line of ``matches`` once, in (path, line) order, as grep -C prints them: overlapping
    contexts merged, a match line marked as a match even where it is another match's context.
    Tuples (path, line, text, is_match, starts_a_new_group)."""
    lines: dict[tuple[str, int], tuple[str, bool]] = {}
    for m in matches:
        first = m.line - len(m.before)
        for i, t in enumerate(m.before):
            lines.setdefault((m.path, first + i), (t, False))
        lines[(m.path, m.line)] = (m.text, True)
        for i, t in enumerate(m.after):
            lines.setdefault((m.path, m.line + 1 + i), (t, False))
    out, prev = [], None
    for (path, n), (text, hit) in sorted(lines.items()):
        out.append((path, n, text, hit, prev is None or prev != (path, n - 1)))
        prev = (path, n)
    return out


@dataclass(frozen=True)
class Scope:
    """The innermost function or class around a line, with its source as a :class:`Slice`."""

    host: str
    path: str
    kind: str
    name: str
    qualname: str
    start: int
    end: int
    slice: Slice
    note: str | None = None

    def __str__(self) -> str:
        return f"{self.kind} {self.qualname} ({self.path}:{self.start}-{self.end})\n{self.slice}"

    def __repr__(self) -> str:
        note = f", note={self.note!r}" if self.note else ""
        return (f"Scope(host={self.host!r}, path={self.path!r}, kind={self.kind!r}, qualname={self.qualname!r}, "
                f"start={self.start}, end={self.end}{note})")

    def _repr_html_(self) -> str:
        return _html.code_block(self.path, self.slice.lines, self.slice.start, highlight_lines=self.slice.highlight,
                                title=f"{self.kind} {self.qualname} — {self.host}:{self.path}:{self.start}-{self.end}",
                                note=self.note)


@dataclass(frozen=True)
class Symbol:
    """Where a name is defined or assigned: ``kind`` is function, method, class, variable (module level),
    field (class body), assignment (in a function), attribute (``self.x = ...``), keyword (``f(x=...)``),
    parameter or import; ``value`` the literal's source text; ``enclosing`` the def/class around it."""

    host: str
    path: str
    line: int
    kind: str
    name: str
    value: str | None
    enclosing: str | None
    end_line: int
    expr: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``kit source find --json``."""
        return {"path": self.path, "line": self.line, "kind": self.kind, "name": self.name,
                "value": self.value, "enclosing": self.enclosing}

    def __str__(self) -> str:
        shown = self.value if self.value is not None else self.expr
        value = f" = {shown}" if shown is not None and self.kind not in ("import",) else ""
        where = f"  [in {self.enclosing}]" if self.enclosing else ""
        return f"{self.path}:{self.line}: {self.kind} {self.name}{value}{where}"

    def __repr__(self) -> str:
        return (f"Symbol(path={self.path!r}, line={self.line}, kind={self.kind!r}, name={self.name!r}, "
                f"value={self.value!r}, enclosing={self.enclosing!r})")


class Symbols(list):
    """Every definition/assignment of one name in one file, in line order. ``note`` says when the
    file did not parse and the results come from a text search."""

    def __init__(self, items: list[Symbol], *, host: str, path: str, name: str, note: str | None = None) -> None:
        super().__init__(items)
        self.host, self.path, self.name, self.note = host, path, name, note

    def to_frame(self):
        """A DataFrame with columns path, line, kind, name, value, enclosing."""
        return pd.DataFrame([s.to_dict() for s in self],
                            columns=["path", "line", "kind", "name", "value", "enclosing"])

    def to_json(self) -> str:
        return json.dumps([s.to_dict() for s in self], indent=2)

    def _title(self) -> str:
        return f"{self.name!r} in {self.host}:{self.path}: {len(self)} definition(s)/assignment(s)"

    def __str__(self) -> str:
        return "\n".join([str(s) for s in self] + ([f"({self.note})"] if self.note else []))

    def __repr__(self) -> str:
        lines = [self._title()] + [f"  {s.line}: {s.kind} {s.name}"
                                   + (f" = {s.value}" if s.value is not None else
                                      (f" = <{s.expr}>" if s.expr and s.kind != "import" else ""))
                                   + (f"  [in {s.enclosing}]" if s.enclosing else "") for s in self]
        if self.note:
            lines.append(f"  ({self.note})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = [(str(s.line), html.escape(s.kind), html.escape(s.name),
                 _html.inline_code(".py", s.value if s.value is not None else (s.expr or "")),
                 html.escape(s.enclosing or "")) for s in self]
        return _html.table(["line", "kind", "name", "value", "enclosing"], rows, title=self._title(), note=self.note)


@dataclass(frozen=True)
class Definition:
    """Where a name used in a file is defined, after following imports; ``via`` lists the hops
    (``path:line: import statement``) that led there."""

    host: str
    name: str
    path: str
    line: int
    end_line: int
    kind: str
    qualname: str
    value: str | None
    slice: Slice
    via: tuple[str, ...] = ()

    def __str__(self) -> str:
        hops = "".join(f"  via {h}\n" for h in self.via)
        return f"{self.kind} {self.qualname} ({self.path}:{self.line}-{self.end_line})\n{hops}{self.slice}"

    def __repr__(self) -> str:
        return (f"Definition(host={self.host!r}, name={self.name!r}, path={self.path!r}, line={self.line}, "
                f"kind={self.kind!r}, qualname={self.qualname!r}, hops={len(self.via)})")

    def _repr_html_(self) -> str:
        note = " -> ".join(self.via) if self.via else None
        return _html.code_block(self.path, self.slice.lines, self.slice.start, highlight_lines=(self.line,),
                                title=f"{self.kind} {self.qualname} — {self.host}:{self.path}:{self.line}",
                                note=f"via {note}" if note else None)


@dataclass(frozen=True)
class SourceDiff:
    """One region compared across two hosts or versions: unified text, side-by-side HTML."""

    a: Slice
    b: Slice
    text: str
    added: int
    removed: int

    @property
    def same(self) -> bool:
        return self.added == 0 and self.removed == 0

    def __str__(self) -> str:
        return self.text if self.text else f"(identical: {label(self.a)} and {label(self.b)})"

    def __repr__(self) -> str:
        return f"SourceDiff(a={label(self.a)!r}, b={label(self.b)!r}, added={self.added}, removed={self.removed})"

    def _repr_html_(self) -> str:
        return _html.side_by_side(label(self.a), self.a.lines, self.a.start, label(self.b), self.b.lines, self.b.start)


def label(s: Slice) -> str:
    return f"{s.host}:{s.path}:{s.start}-{s.end}"
