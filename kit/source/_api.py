"""The public calls of kit.source (documented in the package docstring)."""
from __future__ import annotations

import difflib
import posixpath
import re
import sys
from typing import TYPE_CHECKING

from kit.errors import RemoteFileError, SourceError
from kit.source._cache import CACHE, SourceFile, host_name
from kit.source._grep import EXIT_MISSING, EXIT_UNREADABLE, build_command, error_lines, parse_output, tool_used
from kit.source._index import Binding, index_of, syntax_note, text_enclosing, text_find
from kit.source._resolve import follow_import, locate_module
from kit.source._types import Definition, Matches, Scope, Slice, SourceDiff, Symbol, Symbols, label
from kit.util import clip, host_program

if TYPE_CHECKING:  # the Host base class; kit.remote is not imported at run time for this
    from kit.remote import Host


_GREP_TIMEOUT_S = 120.0
_MAX_HOPS = 12
_NAME_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_DEFINING_KINDS = ("function", "method", "class", "variable")


def _make_slice(source: SourceFile, start: int, end: int | None, highlight: tuple[int, ...] = ()) -> Slice:
    total = len(source.lines)
    end = total if end is None else end
    if start < 1:
        raise SourceError(f"{source.where}: line numbers start at 1, got start={start}")
    if end < start:
        raise SourceError(f"{source.where}: empty range {start}-{end} (end before start)")
    if start > total:
        raise SourceError(f"{source.where}: start line {start} is past the end of the file ({total} lines)")
    note = f"clipped: asked for {start}-{end}, the file has {total} lines" if end > total else None
    end = min(end, total)
    return Slice(source.host, source.path, start, end, tuple(source.lines[start - 1:end]), total,
                 tuple(h for h in highlight if start <= h <= end), note)


def slice(host: Host, path: str, start: int, end: int | None = None, *,
          highlight: int | list[int] | None = None) -> Slice:
    """Lines ``start..end`` of ``path`` on ``host`` (``end=None``: to the end of the file): one
    ``host.stat``, the file moved only if not cached at this size and mtime. A range past the end is
    clipped (``Slice.note`` says so); a start past the end raises SourceError."""
    source = CACHE.get(host, path)
    marks = () if highlight is None else ((highlight,) if isinstance(highlight, int) else tuple(highlight))
    return _make_slice(source, int(start), None if end is None else int(end), marks)


def enclosing(host: Host, path: str, line: int) -> Scope | None:
    """The innermost ``def``/``class`` containing ``line`` (decorators included), or None at module level:
    its ``qualname`` (``ServerArgs._handle_mamba_radix_cache``) and whole source as ``slice``, ``line``
    highlighted. If the file does not parse, an indentation-based guess with a ``note`` saying so."""
    source = CACHE.get(host, path)
    total = len(source.lines)
    if not 1 <= line <= total:
        raise SourceError(f"{source.where}: line {line} is outside the file (1-{total})")
    index = index_of(source)
    note = None
    if index is not None:
        scope = index.enclosing(line)
    else:
        note = syntax_note(source)
        scope = text_enclosing(source.lines, line)
    if scope is None:
        return None
    return Scope(source.host, source.path, scope.kind, scope.name, scope.qualname, scope.start, scope.end,
                 _make_slice(source, scope.start, scope.end, (line,)), note)


def find(host: Host, path: str, symbol: str) -> Symbols:
    """Every definition or assignment of ``symbol`` in ``path``: functions, classes, module variables,
    dataclass fields, assignments and ``self.symbol = ...`` in functions, keyword arguments at call
    sites (``f(symbol="flashinfer")``), parameters and imports; each with its literal value and the
    def/class around it. Falls back to a text search (and says so in ``note``) on a syntax error."""
    if not isinstance(symbol, str) or not re.fullmatch(r"[A-Za-z_]\w*", symbol):
        raise SourceError(f"find: {symbol!r} is not a Python identifier")
    source = CACHE.get(host, path)
    index = index_of(source)
    if index is not None:
        bindings, note = index.find(symbol), None
    else:
        bindings, note = text_find(source.lines, symbol), syntax_note(source)
    items = [Symbol(source.host, source.path, b.line, b.kind, b.name, b.value, b.enclosing, b.end_line, b.expr)
             for b in bindings]
    return Symbols(items, host=source.host, path=source.path, name=symbol, note=note)


def grep(host: Host, path_or_dir: str, pattern: str, *, context: int = 0, regex: bool = True,
         glob: str | None = "*.py", ignore_case: bool = False, timeout: float = _GREP_TIMEOUT_S,
         tool: str = "auto") -> Matches:
    """Search a file or a directory tree on the host in one round trip (ripgrep if present, else grep -r).

    ``regex=True``: the tool's extended syntax (rg's Rust regex / ``grep -E``), ``regex=False``: a
    fixed string. ``glob`` filters the files of a directory. Path, glob and pattern are quoted and
    passed after ``--``: never interpreted by the shell. ``tool`` ("auto", "rg", "grep") forces one."""
    name = host_name(host)
    if not isinstance(pattern, str) or pattern == "":
        raise SourceError(f"{name}: grep needs a non-empty pattern")
    if tool not in ("auto", "rg", "grep"):
        raise SourceError(f"grep: tool must be 'auto', 'rg' or 'grep', not {tool!r}")
    cmd = build_command(path_or_dir, pattern, context=context, regex=regex, glob=glob,
                        ignore_case=ignore_case, tool=tool)
    result = host.run(cmd, timeout=timeout)
    errors = error_lines(result.stderr)
    why = {EXIT_MISSING: "no such file or directory", EXIT_UNREADABLE: "permission denied"}.get(result.exit_code)
    if why:
        raise RemoteFileError(f"{name}:{path_or_dir}: {why}", host=name, path=path_or_dir)
    matches = parse_output(result.stdout, context, name)
    note = None
    if result.exit_code not in (0, 1):
        first = _error_text(errors) or f"exit code {result.exit_code}"
        if not matches:
            text = " ".join(errors).lower()
            literal = regex and any(w in text for w in ("regex", "unmatched", "parenthes", "unclosed"))
            hint = " (a literal string: regex=False, or -F on the command line)" if literal else ""
            raise SourceError(f"{name}:{path_or_dir}: grep for {pattern!r} failed: {first}{hint}")
        note = f"some files could not be searched: {first}"
    return Matches(matches, host=name, pattern=pattern, path=path_or_dir, tool=tool_used(result.stderr), note=note)


def _error_text(errors: list[str]) -> str:
    """The tool's error in one line: rg prints a regex error over several lines (``regex parse error:``,
    the pattern, a caret, ``error: unclosed group``); the lines are joined, the caret line left out."""
    parts = [ln.strip() for ln in errors if ln.strip() and set(ln.strip()) != {"^"}]
    return clip("; ".join(parts).replace(":; ", ": "), 200) if parts else ""


def definition(host: Host, name: str, *, near: str, python: str | None = None, env: dict | None = None) -> Definition:
    """Follow ``name`` as used in the file ``near`` to where it is defined, through that file's imports:
    ``from tinyserve.srt.utils import is_sm100_supported`` leads to ``utils/__init__.py``, whose ``from .common
    import ...`` leads to ``utils/common.py``; the result is that function, its Slice and the hops (``via``).
    Absolute imports are resolved inside the package tree of ``near``, other packages with :func:`module_path`
    in the host's ``python``; a dotted name (``utils.is_sm100_supported``) follows the module, then the attribute."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise SourceError(f"definition: {name!r} is not a (dotted) Python name")
    hname = host_name(host)
    python = default_python(host, python)
    attr, *rest = name.split(".")
    via: list[str] = []
    path = near
    seen: set[tuple[str, str]] = set()
    for _ in range(_MAX_HOPS):
        if (path, attr) in seen:
            break
        seen.add((path, attr))
        source = CACHE.get(host, path)
        index = index_of(source)
        if index is None:
            raise SourceError(syntax_note(source).replace("results come from a text search, not the AST",
                                                            "cannot follow imports"))
        local = [b for b in index.find(attr) if b.kind in _DEFINING_KINDS and b.enclosing is None]
        local.sort(key=lambda b: _is_overload(source, index, b))  # the implementation is the code that runs
        if local and not rest:
            return _definition(host, source, local[0], name, via)
        if local and rest and local[0].kind == "class":
            members = [b for b in index.find(rest[0]) if b.enclosing == attr]
            if members:
                return _definition(host, source, members[0], name, via)
        step = follow_import(host, source, index, attr, python=python, env=env)
        if step is None:
            imported = [i for i in index.imports if i.bound == attr]
            if imported:
                raise SourceError(f"{hname}:{path}:{imported[0].line}: {attr!r} is imported there "
                                  f"({imported[0].statement}) but its module could not be found beside the file, "
                                  f"in its package tree or by {python}")
            break
        path, attr, hop, is_module = step
        via.append(hop)
        if is_module:
            if not rest:
                target = CACHE.get(host, path)
                # an empty file (e.g. an empty __init__.py) gets an empty slice
                sl = (_make_slice(target, 1, min(len(target.lines), 40)) if target.lines else
                      Slice(target.host, target.path, 1, 0, (), 0, (), "empty file"))
                return Definition(hname, name, path, 1, len(target.lines), "module", _module_label(path), None, sl,
                                  tuple(via))
            attr, rest = rest[0], rest[1:]
    raise SourceError(f"{hname}:{near}: cannot find where {name!r} is defined"
                      + (f" (followed {' -> '.join(via)})" if via else " (not defined or imported there)"))


def _is_overload(source: SourceFile, index, b: Binding) -> bool:
    scope = index.enclosing(b.line) if b.kind in ("function", "method") else None
    if scope is None or scope.def_line != b.line:
        return False
    decorators = "".join(source.lines[scope.start - 1:scope.def_line - 1])
    return bool(re.search(r"@\s*(typing\.|t\.|typing_extensions\.)?overload\b", decorators))


def _module_label(path: str) -> str:
    base = posixpath.basename(path)
    return posixpath.basename(posixpath.dirname(path)) if base == "__init__.py" else base[:-3]


def _definition(host, source: SourceFile, b: Binding, name: str, via: list[str]) -> Definition:
    qual = f"{b.enclosing}.{b.name}" if b.enclosing else b.name
    sl = _make_slice(source, b.line, b.end_line, (b.line,))
    if b.kind in ("function", "method", "class"):
        scope = index_of(source).enclosing(b.line)
        if scope is not None and scope.def_line == b.line:
            sl = _make_slice(source, scope.start, scope.end, (b.line,))
    return Definition(source.host, name, source.path, b.line, b.end_line, b.kind, qual, b.value, sl, tuple(via))


def evaluate(host: Host, where: Definition, *, attribute: str | None = None, args: tuple = (), call: bool = True,
             python: str | None = None, env: dict | None = None, timeout: float = 120.0):
    """Ask the host's ``python`` what the definition ``where`` gives: ``where.qualname(*args)`` when
    ``call`` (a predicate such as ``is_sm100_supported``), else its value; ``attribute`` first takes an
    attribute of it (``evaluate(h, platform_class, attribute="is_device_capability", args=(100,))``).
    ``args`` are JSON-able literals. Returns the JSON value (other objects as their repr).

    The file is imported as the module it is in its package (``.../sglang/srt/utils/common.py`` ->
    ``sglang.srt.utils.common``, the package root first on ``sys.path``), so its parents' ``__init__``
    run and relative imports and dataclasses work as in the engine. CommandFailed carries the host's
    last traceback line when the import or the call fails."""
    if not isinstance(where, Definition):
        raise SourceError(f"evaluate: expected a Definition (from kit.source.definition), got {type(where).__name__}")
    if where.kind not in ("function", "variable", "class"):
        raise SourceError(f"{where.host}:{where.path}:{where.line}: {where.qualname} is a {where.kind}; "
                          "only module-level functions, variables and classes can be evaluated")
    if attribute is not None and not _NAME_RE.match(attribute):
        raise SourceError(f"evaluate: attribute {attribute!r} is not a (dotted) Python name")
    if not all(a is None or isinstance(a, (bool, int, float, str)) for a in args):
        raise SourceError(f"evaluate: args must be JSON-able literals (None, bool, int, float, str), got {args!r}")
    attr = where.qualname + (f".{attribute}" if attribute else "")
    call_line = f"evaluate({where.path!r}, {attr!r}, {bool(call)!r}, {tuple(args)!r})"
    code = host_program("kit.source", "evaluate.py", call_line)
    return host.python(code, python=default_python(host, python), env=env, timeout=timeout)


def default_python(host: Host, python: str | None) -> str:
    """``python`` when given; else the running interpreter on the local host (the one whose packages
    the notebook sees), ``python3`` on a remote one."""
    if python:
        return python
    return sys.executable if getattr(host, "target", None) == "local" and sys.executable else "python3"


def module_path(host: Host, module: str, *, python: str | None = None, env: dict | None = None) -> str:
    """The file of an installed module on the host (``sglang.srt.server_args`` ->
    ``.../site-packages/sglang/srt/server_args.py``): asks the host's ``python``
    (``importlib.util.find_spec``, which imports the parents but not the module; ``env`` may set
    PYTHONPATH), else reads ``python -m pip show -f <top package>``. SourceError names host and module."""
    return locate_module(host, module, python=default_python(host, python), env=env)


def diff(a: Slice | Scope | Definition, b: Slice | Scope | Definition, *, context: int = 3) -> SourceDiff:
    """Compare two regions (e.g. the same function on two hosts or in two versions): ``str()`` is a
    unified diff labelled ``host:path:start-end``; in a notebook, a side-by-side table."""
    sa, sb = _as_slice(a), _as_slice(b)
    text_lines = list(difflib.unified_diff(list(sa.lines), list(sb.lines), fromfile=label(sa), tofile=label(sb),
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
