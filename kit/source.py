"""Read, search and navigate source code on a host: the installed serving framework, over SSH or locally.

A line alone misleads: ``sm100_default_attention_backend="flashinfer"`` only matters if the branch
around it runs on this GPU. So besides :func:`slice` (``sed -n`` with line numbers, highlighted in a
notebook) this module answers the next questions: which function holds that line (:func:`enclosing`),
where a name is set or defined (:func:`find`), where a predicate used there comes from
(:func:`definition`, following the file's imports), which file an installed module is
(:func:`module_path`), and how one region differs across hosts or versions (:func:`diff`).
:func:`grep` searches a file or tree on the host in one round trip.

Works over any ``kit.remote`` Host. Each call costs one ``host.stat`` per file; file contents cross
the wire once per (host, path, size, mtime) and parsed ASTs are cached (:func:`cache_info`).
"""
from __future__ import annotations

import difflib
import html
import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

from kit import _source_html as _html
from kit._source_cache import CACHE, CacheInfo, SourceFile, host_name
from kit._source_grep import EXIT_MISSING, EXIT_UNREADABLE, build_command, error_lines, parse_output, tool_used
from kit._source_index import Binding, FileIndex, ScopeInfo, text_enclosing, text_find
from kit.errors import CommandFailed, RemoteError, RemoteFileError, SourceError

__all__ = [
    "slice", "grep", "enclosing", "find", "definition", "module_path", "diff",
    "Slice", "Match", "Matches", "Scope", "Symbol", "Symbols", "Definition", "SourceDiff",
    "cache_info", "cache_clear", "CacheInfo",
]

_GREP_TIMEOUT_S = 120.0
_RUN_TIMEOUT_S = 60.0
_MAX_HOPS = 12
_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NAME_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_DEFINING_KINDS = ("function", "method", "class", "variable")


# ---------------------------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Slice:
    """Lines ``start..end`` (1-based, inclusive) of ``path`` on ``host``.

    ``str()`` prints them numbered like ``sed -n 'START,ENDp' | nl``; in a notebook they show
    highlighted with the ``highlight`` lines marked. ``note`` says when the range was clipped.
    """

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
        return f"Slice(host={self.host!r}, path={self.path!r}, start={self.start}, end={self.end}, lines={len(self.lines)}{note})"

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
    """The hits of one :func:`grep`, in the order the tool found them; ``tool`` is "rg" or "grep"."""

    def __init__(self, items: list[Match], *, host: str, pattern: str, path: str, tool: str | None,
                 note: str | None = None) -> None:
        super().__init__(items)
        self.host, self.pattern, self.path, self.tool, self.note = host, pattern, path, tool, note

    def to_frame(self):
        """A DataFrame with columns path, line, text."""
        import pandas as pd

        return pd.DataFrame([{"path": m.path, "line": m.line, "text": m.text} for m in self],
                            columns=["path", "line", "text"])

    def _title(self) -> str:
        return f"grep {self.pattern!r} in {self.host}:{self.path}: {len(self)} match(es) via {self.tool or '?'}"

    def __str__(self) -> str:
        sep = "\n--\n" if any(m.before or m.after for m in self) else "\n"
        body = sep.join(str(m) for m in self)
        return body + (f"\n({self.note})" if self.note else "")

    def __repr__(self) -> str:
        lines = [self._title()] + [f"  {m.path}:{m.line}: {m.text.strip()}" for m in self[:50]]
        if len(self) > 50:
            lines.append(f"  ... {len(self) - 50} more")
        if self.note:
            lines.append(f"  ({self.note})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = [(html.escape(m.path), str(m.line), _html.inline_code(m.path, m.text)) for m in self]
        return _html.table(["path", "line", "text"], rows, title=self._title(), note=self.note)


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
    """Where a name is defined or assigned: ``kind`` is one of function, method, class, variable
    (module level), field (class body, e.g. a dataclass field), assignment (inside a function),
    attribute (``self.x = ...``), keyword (``f(x=...)`` at a call site), parameter, import.
    ``value`` is the literal's source text (``"flashinfer"``, ``None``) when the value is a literal;
    ``enclosing`` the qualified name of the def/class around it (None at module level)."""

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
        import pandas as pd

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
        return self.text if self.text else f"(identical: {_label(self.a)} and {_label(self.b)})"

    def __repr__(self) -> str:
        return f"SourceDiff(a={_label(self.a)!r}, b={_label(self.b)!r}, added={self.added}, removed={self.removed})"

    def _repr_html_(self) -> str:
        return _html.side_by_side(_label(self.a), self.a.lines, self.a.start, _label(self.b), self.b.lines, self.b.start)


def _label(s: Slice) -> str:
    return f"{s.host}:{s.path}:{s.start}-{s.end}"


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------
def cache_info() -> CacheInfo:
    """Counters since the last :func:`cache_clear`: stats, transfers, bytes, hits, AST parses."""
    return CACHE.info()


def cache_clear() -> None:
    """Forget every cached file and reset the counters."""
    CACHE.clear()


def _index(source: SourceFile) -> FileIndex | None:
    tree = CACHE.tree(source)
    if tree is None:
        return None
    if source._index is None:
        source._index = FileIndex(tree, source.text, source.lines)
    return source._index


def _syntax_note(source: SourceFile) -> str:
    err = source._syntax_error
    where = f"line {err.lineno}" if err is not None and err.lineno else "unknown line"
    msg = err.msg if err is not None else "unparseable"
    return f"{source.where}: syntax error at {where} ({msg}); results come from a text search, not the AST"


def _make_slice(source: SourceFile, start: int, end: int | None, highlight: tuple[int, ...] = ()) -> Slice:
    total = len(source.lines)
    if start < 1:
        raise SourceError(f"{source.where}: line numbers start at 1, got start={start}")
    if end is None:
        end = total
    if end < start:
        raise SourceError(f"{source.where}: empty range {start}-{end} (end before start)")
    if start > total:
        raise SourceError(f"{source.where}: start line {start} is past the end of the file ({total} lines)")
    note = None
    if end > total:
        note = f"clipped: asked for {start}-{end}, the file has {total} lines"
        end = total
    return Slice(source.host, source.path, start, end, tuple(source.lines[start - 1:end]), total,
                 tuple(h for h in highlight if start <= h <= end), note)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def slice(host, path: str, start: int, end: int | None = None, *, highlight: int | list[int] | None = None) -> Slice:
    """Lines ``start..end`` of ``path`` on ``host`` (``end=None``: to the end of the file).

    One ``host.stat``; the file is transferred only if not cached at this size and mtime. A range
    past the end is clipped (``Slice.note`` says so); a start past the end raises SourceError.
    """
    source = CACHE.get(host, path)
    marks = () if highlight is None else ((highlight,) if isinstance(highlight, int) else tuple(highlight))
    return _make_slice(source, int(start), None if end is None else int(end), marks)


def enclosing(host, path: str, line: int) -> Scope | None:
    """The innermost ``def``/``class`` containing ``line`` (decorators included), or None at module level.

    Its ``qualname`` reads like ``ServerArgs._handle_mamba_radix_cache``; ``slice`` is its whole source
    with ``line`` highlighted. If the file does not parse, an indentation-based guess is returned with
    a ``note`` saying so.
    """
    source = CACHE.get(host, path)
    total = len(source.lines)
    if not 1 <= line <= total:
        raise SourceError(f"{source.where}: line {line} is outside the file (1-{total})")
    index = _index(source)
    note = None
    if index is not None:
        scope = index.enclosing(line)
    else:
        note = _syntax_note(source)
        scope = text_enclosing(source.lines, line)
    if scope is None:
        return None
    return _scope(source, scope, line, note)


def _scope(source: SourceFile, scope: ScopeInfo, line: int, note: str | None) -> Scope:
    sl = _make_slice(source, scope.start, scope.end, (line,))
    return Scope(source.host, source.path, scope.kind, scope.name, scope.qualname, scope.start, scope.end, sl, note)


def find(host, path: str, symbol: str) -> Symbols:
    """Every definition or assignment of ``symbol`` in ``path``: functions, classes, module variables,
    dataclass fields, assignments and ``self.symbol = ...`` in functions, keyword arguments at call
    sites (``f(symbol="flashinfer")``), parameters and imports; each with its literal value and the
    def/class around it. Falls back to a text search (and says so in ``note``) on a syntax error."""
    if not isinstance(symbol, str) or not re.fullmatch(r"[A-Za-z_]\w*", symbol):
        raise SourceError(f"find: {symbol!r} is not a Python identifier")
    source = CACHE.get(host, path)
    index = _index(source)
    if index is not None:
        bindings, note = index.find(symbol), None
    else:
        bindings, note = text_find(source.lines, symbol), _syntax_note(source)
    return Symbols([_symbol(source, b) for b in bindings], host=source.host, path=source.path, name=symbol, note=note)


def _symbol(source: SourceFile, b: Binding) -> Symbol:
    return Symbol(source.host, source.path, b.line, b.kind, b.name, b.value, b.enclosing, b.end_line, b.expr)


def grep(host, path_or_dir: str, pattern: str, *, context: int = 0, regex: bool = True,
         glob: str | None = "*.py", ignore_case: bool = False, timeout: float = _GREP_TIMEOUT_S,
         tool: str = "auto") -> Matches:
    """Search a file or a directory tree on the host in one round trip (ripgrep if present, else grep -r).

    ``regex=True`` uses the tool's extended syntax (rg's Rust regex / ``grep -E``), ``regex=False`` a
    fixed string. ``glob`` filters files when searching a directory. Path, glob and pattern are quoted
    and passed after ``--``: they are never interpreted by the shell. ``tool`` ("auto", "rg", "grep")
    forces one search program, for tests.
    """
    name = host_name(host)
    if not isinstance(pattern, str) or pattern == "":
        raise SourceError(f"{name}: grep needs a non-empty pattern")
    if tool not in ("auto", "rg", "grep"):
        raise SourceError(f"grep: tool must be 'auto', 'rg' or 'grep', not {tool!r}")
    cmd = build_command(path_or_dir, pattern, context=context, regex=regex, glob=glob,
                        ignore_case=ignore_case, tool=tool)
    result = host.run(cmd, timeout=timeout)
    errors = error_lines(result.stderr)
    if result.exit_code == EXIT_MISSING:
        raise RemoteFileError(f"{name}:{path_or_dir}: no such file or directory", host=name, path=path_or_dir)
    if result.exit_code == EXIT_UNREADABLE:
        raise RemoteFileError(f"{name}:{path_or_dir}: permission denied", host=name, path=path_or_dir)
    matches = parse_output(result.stdout, context)
    note = None
    if result.exit_code not in (0, 1):
        first = errors[0] if errors else f"exit code {result.exit_code}"
        if not matches:
            raise SourceError(f"{name}:{path_or_dir}: grep for {pattern!r} failed: {first}")
        note = f"some files could not be searched: {first}"
    items = [Match(name, m.path, m.line, m.text, m.before, m.after) for m in matches]
    return Matches(items, host=name, pattern=pattern, path=path_or_dir, tool=tool_used(result.stderr), note=note)


def definition(host, name: str, *, near: str, python: str = "python3", env: dict | None = None) -> Definition:
    """Follow ``name`` as used in the file ``near`` to where it is defined, through that file's imports.

    ``from tinyserve.srt.utils import is_sm100_supported`` in ``near`` leads to ``utils/__init__.py``,
    whose ``from .common import ...`` leads to ``utils/common.py``: the result is that function, its
    Slice, and the hops taken (``via``). Absolute imports are resolved inside the package tree that
    ``near`` lives in; other packages are located with :func:`module_path` in the host's ``python``.
    Dotted names (``utils.is_sm100_supported``) follow the module then the attribute.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise SourceError(f"definition: {name!r} is not a (dotted) Python name")
    hname = host_name(host)
    parts = name.split(".")
    via: list[str] = []
    path = near
    attr = parts[0]
    rest = parts[1:]
    seen: set[tuple[str, str]] = set()
    for _ in range(_MAX_HOPS):
        if (path, attr) in seen:
            break
        seen.add((path, attr))
        source = CACHE.get(host, path)
        index = _index(source)
        if index is None:
            raise SourceError(_syntax_note(source).replace("results come from a text search, not the AST",
                                                            "cannot follow imports"))
        local = [b for b in index.find(attr) if b.kind in _DEFINING_KINDS and b.enclosing is None]
        if local and not rest:
            return _definition(host, source, local[0], name, via)
        if local and rest and local[0].kind == "class":
            members = [b for b in index.find(rest[0]) if b.enclosing == attr]
            if members:
                return _definition(host, source, members[0], name, via)
        step = _follow_import(host, source, index, attr, python=python, env=env)
        if step is None:
            break
        path, attr, hop, is_module = step
        via.append(hop)
        if is_module:
            if not rest:
                target = CACHE.get(host, path)
                sl = _make_slice(target, 1, min(len(target.lines), 40))
                return Definition(hname, name, path, 1, len(target.lines), "module", _module_label(path), None, sl,
                                  tuple(via))
            attr, rest = rest[0], rest[1:]
    raise SourceError(f"{hname}:{near}: cannot find where {name!r} is defined"
                      + (f" (followed {' -> '.join(via)})" if via else " (not defined or imported there)"))


def _module_label(path: str) -> str:
    base = posixpath.basename(path)
    return posixpath.basename(posixpath.dirname(path)) if base == "__init__.py" else base[:-3]


def _definition(host, source: SourceFile, b: Binding, name: str, via: list[str]) -> Definition:
    qual = f"{b.enclosing}.{b.name}" if b.enclosing else b.name
    sl = _make_slice(source, b.line, b.end_line, (b.line,))
    if b.kind in ("function", "method", "class"):
        scope = _index(source).enclosing(b.line)
        if scope is not None and scope.def_line == b.line:
            sl = _make_slice(source, scope.start, scope.end, (b.line,))
    return Definition(source.host, name, source.path, b.line, b.end_line, b.kind, qual, b.value, sl, tuple(via))


def _follow_import(host, source: SourceFile, index: FileIndex, attr: str, *, python: str, env: dict | None):
    """(next_path, next_attr, hop_description, is_module) for the import that binds ``attr``, or None.

    ``from M import attr`` may name a submodule ``M.attr`` or a name defined in ``M``: both candidate
    files are checked in one round trip.
    """
    candidates = [i for i in index.imports if i.bound == attr]
    stars = [i for i in index.imports if i.bound == "*"]
    for imp in candidates + stars:
        hop = f"{source.path}:{imp.line}: {imp.statement}"
        if imp.attr is None:  # import a.b.c [as x]
            return _resolve_module(host, source.path, imp.module, 0, python=python, env=env), None, hop, True
        sub_name = f"{imp.module}.{imp.attr}" if imp.module else imp.attr
        sub = [] if imp.attr == "*" else _module_candidates(source.path, sub_name, imp.level)
        mod = _module_candidates(source.path, imp.module, imp.level)
        found = _first_existing(host, sub + mod) if sub + mod else None
        if found is None and imp.level == 0:
            found = _try_module_path(host, sub_name, python, env) if imp.attr != "*" else None
            sub = [found] if found else []
            if found is None:
                found = _try_module_path(host, imp.module, python, env)
        if found is None:
            continue
        if found in sub:
            return found, None, hop, True
        if imp.attr == "*":
            tindex = _index(CACHE.get(host, found))
            if tindex is None or not (tindex.find(attr) or any(i.bound == "*" for i in tindex.imports)):
                continue
            return found, attr, hop, False
        return found, imp.attr, hop, False
    if posixpath.basename(source.path) == "__init__.py":  # package attribute that is a submodule
        pkg = posixpath.dirname(source.path)
        found = _first_existing(host, [posixpath.join(pkg, attr + ".py"), posixpath.join(pkg, attr, "__init__.py")])
        if found:
            return found, None, f"{source.path}: submodule {attr}", True
    return None


def _try_module_path(host, module: str, python: str, env: dict | None) -> str | None:
    try:
        return module_path(host, module, python=python, env=env)
    except SourceError:
        return None


def _module_candidates(near: str, module: str, level: int) -> list[str]:
    """Files that could hold ``module``: relative to ``near`` when ``level`` > 0, else inside the
    package tree ``near`` lives in (its top package is a directory above ``near``)."""
    parts = [p for p in module.split(".") if p]
    if level:
        base = posixpath.dirname(near)
        for _ in range(level - 1):
            base = posixpath.dirname(base)
        roots = [base]
    else:
        if not parts:
            return []
        dirs = posixpath.dirname(near).split("/")
        roots = ["/".join(dirs[:i]) or ("/" if near.startswith("/") else ".")
                 for i in range(len(dirs) - 1, -1, -1) if dirs[i] == parts[0]]
    out = []
    for root in roots:
        if parts:
            stem = posixpath.join(root, *parts)
            out += [stem + ".py", posixpath.join(stem, "__init__.py")]
        else:
            out.append(posixpath.join(root, "__init__.py"))
    return out


def _resolve_module(host, near: str, module: str, level: int, *, python: str, env: dict | None) -> str:
    """The file of ``module`` (relative to ``near`` when ``level`` > 0) on the host."""
    candidates = _module_candidates(near, module, level)
    found = _first_existing(host, candidates) if candidates else None
    if found:
        return found
    if level:
        raise SourceError(f"{host_name(host)}:{near}: relative import {'.' * level}{module} not found")
    return module_path(host, module, python=python, env=env)


def _first_existing(host, paths: list[str]) -> str | None:
    """The first of ``paths`` that is a regular file on the host, in one round trip."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    cmd = f"for p in {quoted}; do if [ -f \"$p\" ]; then printf '%s\\n' \"$p\"; exit 0; fi; done; exit 1"
    result = host.run(cmd, timeout=_RUN_TIMEOUT_S)
    if result.exit_code == 0 and result.stdout.strip():
        return result.stdout.rstrip("\n").split("\n")[0]
    return None


def module_path(host, module: str, *, python: str = "python3", env: dict | None = None) -> str:
    """The file of an installed module on the host (``sglang.srt.server_args`` ->
    ``.../site-packages/sglang/srt/server_args.py``).

    Asks the host's ``python`` (``importlib.util.find_spec``, which imports the parent packages but
    not the module itself); if that fails, reads ``python -m pip show -f <top package>``.
    """
    hname = host_name(host)
    if not isinstance(module, str) or not _MODULE_RE.match(module):
        raise SourceError(f"module_path: {module!r} is not a dotted module name")
    code = ("import importlib.util as _u\n"
            f"_s = _u.find_spec({module!r})\n"
            "[_s.origin if _s else None, list(_s.submodule_search_locations or []) if _s else []]")
    first_error = None
    try:
        origin, locations = host.python(code, python=python, env=env, timeout=_RUN_TIMEOUT_S)
        if origin and origin not in ("built-in", "frozen"):
            return origin
        if origin in ("built-in", "frozen"):
            raise SourceError(f"{hname}: module {module} is {origin} in {python}; it has no source file")
        first_error = "find_spec found no file" + (f" (namespace package at {locations[0]})" if locations else "")
    except (CommandFailed, RemoteError) as exc:
        first_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    found = _pip_show(host, module, python)
    if found:
        return found
    raise SourceError(f"{hname}: cannot locate module {module} with {python}: {first_error}; pip show found nothing")


def _pip_show(host, module: str, python: str) -> str | None:
    top = module.split(".")[0]
    want = [module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"]
    names = {top, top.replace("_", "-")}
    for dist in sorted(names):
        res = host.run(f"{shlex.quote(python)} -m pip show -f {shlex.quote(dist)}", timeout=_RUN_TIMEOUT_S)
        if not res.ok:
            continue
        location, files, in_files = None, [], False
        for line in res.stdout.splitlines():
            if line.startswith("Location:"):
                location = line.split(":", 1)[1].strip()
            elif line.startswith("Files:"):
                in_files = True
            elif in_files and line.startswith(" "):
                files.append(line.strip())
            elif in_files:
                in_files = False
        for w in want:
            if location and w in files:
                return posixpath.join(location, w)
    return None


def diff(a: Slice | Scope | Definition, b: Slice | Scope | Definition, *, context: int = 3) -> SourceDiff:
    """Compare two regions (e.g. the same function on two hosts or in two versions).

    ``str()`` is a unified diff labelled ``host:path:start-end``; in a notebook, a side-by-side table
    with each side's own line numbers.
    """
    sa, sb = _as_slice(a), _as_slice(b)
    text_lines = list(difflib.unified_diff(list(sa.lines), list(sb.lines), fromfile=_label(sa), tofile=_label(sb),
                                           n=context, lineterm=""))
    text_lines = [_renumber_hunk(ln, sa.start, sb.start) for ln in text_lines]
    added = sum(1 for ln in text_lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in text_lines if ln.startswith("-") and not ln.startswith("---"))
    return SourceDiff(sa, sb, "\n".join(text_lines), added, removed)


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _renumber_hunk(line: str, a_start: int, b_start: int) -> str:
    """difflib numbers hunks from 1; shift them to the file's own line numbers."""
    m = _HUNK.match(line)
    if not m:
        return line
    a = int(m.group(1)) + a_start - 1 if m.group(1) != "0" else a_start - 1
    b = int(m.group(3)) + b_start - 1 if m.group(3) != "0" else b_start - 1
    return f"@@ -{a}{m.group(2) or ''} +{b}{m.group(4) or ''} @@" + line[m.end():]


def _as_slice(x) -> Slice:
    if isinstance(x, Slice):
        return x
    sl = getattr(x, "slice", None)
    if isinstance(sl, Slice):
        return sl
    raise SourceError(f"diff: expected a Slice, Scope or Definition, got {type(x).__name__}")

