"""AST index of one cached file: scopes (def/class ranges), name bindings, imports, built once per
cached file; when the file does not parse, the text fallbacks here give an indentation-based answer."""
from __future__ import annotations

import ast
import bisect
import functools
import re
from dataclasses import dataclass

from kit.source._cache import CACHE, SourceFile
from kit.util import clip

_MAX_VALUE_CHARS = 120


@dataclass(frozen=True)
class ScopeInfo:
    kind: str          # "function", "method", "class"
    name: str
    qualname: str
    start: int         # first decorator line, or the def/class line
    def_line: int
    end: int
    depth: int


@dataclass(frozen=True)
class Binding:
    line: int
    end_line: int
    col: int
    kind: str          # function, method, class, variable, field, assignment, attribute, keyword, parameter, import
    name: str
    value: str | None  # source text of a literal value, else None
    expr: str | None   # source text of the value expression (shortened), else None
    enclosing: str | None


@dataclass(frozen=True)
class ImportInfo:
    line: int
    module: str | None   # dotted module ("" for "from . import x")
    attr: str | None     # imported name for "from M import attr"; None for "import M"
    level: int           # relative import dots
    bound: str           # the local name it binds ("*" for star imports)
    statement: str


class FileIndex:
    """What kit.source asks of a parsed module, computed lazily and kept with the cached file.
    ``scopes`` and ``imports`` come from one walk over statements. ``find(name)`` walks only the
    statements holding a line where ``name`` appears as a word, so its cost follows the hits, not the
    size of the file; its answer is cached per name."""

    def __init__(self, tree: ast.Module, text: str, lines: list[str]) -> None:
        self._tree = tree
        self._text = text
        self._lines = lines
        self._found: dict[str, list[Binding]] = {}

    scopes = property(lambda self: self._scan[0])
    imports = property(lambda self: self._scan[1])

    def enclosing(self, line: int) -> ScopeInfo | None:
        """The innermost scope holding ``line``."""
        return max((s for s in self.scopes if s.start <= line <= s.end), key=lambda s: s.depth, default=None)

    def find(self, name: str) -> list[Binding]:
        if name not in self._found:
            walker = _Walker(self._lines, name, *_word_lines(self._text, name))
            walker.walk(self._tree.body, [], "module")
            self._found[name] = sorted(walker.bindings, key=lambda b: (b.line, b.col))
        return list(self._found[name])

    @functools.cached_property
    def _scan(self) -> tuple[list[ScopeInfo], list[ImportInfo]]:
        walker = _Walker(self._lines, None, list(range(1, len(self._lines) + 1)), [])  # every statement
        walker.walk(self._tree.body, [], "module")
        return walker.scopes, walker.imports


def _word_lines(text: str, name: str) -> tuple[list[int], list[int]]:
    """Sorted line numbers where ``name`` occurs as a whole word, and the subset where it is
    followed by ``=`` or ``:=`` (a keyword argument or walrus could be there). str.find scans in C."""
    out: list[int] = []
    assigns: list[int] = []
    line, pos, n, size = 1, 0, len(name), len(text)
    start = text.find(name)
    while start != -1:
        end = start + n
        if (start == 0 or not _is_word(text[start - 1])) and (end >= size or not _is_word(text[end])):
            line += text.count("\n", pos, start)
            pos = start
            if not out or out[-1] != line:
                out.append(line)
            rest = text[end:end + 40].lstrip(" \t")
            if (rest.startswith("=") and not rest.startswith("==")) or rest.startswith(":="):
                if not assigns or assigns[-1] != line:
                    assigns.append(line)
        start = text.find(name, end)
    return out, assigns


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _scope_of(node, stack: list[ScopeInfo], context: str) -> ScopeInfo:
    is_class = isinstance(node, ast.ClassDef)
    kind = "class" if is_class else ("method" if context == "class" else "function")
    qual = f"{stack[-1].qualname}.{node.name}" if stack else node.name
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return ScopeInfo(kind, node.name, qual, start, node.lineno, node.end_lineno or node.lineno, len(stack))


def _import_infos(node: ast.Import | ast.ImportFrom, statement: str) -> list[ImportInfo]:
    if isinstance(node, ast.ImportFrom):
        return [ImportInfo(node.lineno, node.module or "", a.name, node.level, a.asname or a.name, statement)
                for a in node.names]
    # ``import a.b`` binds ``a`` (to the module a); ``import a.b as x`` binds ``x`` to a.b
    return [ImportInfo(node.lineno, a.name if a.asname else a.name.split(".")[0], None, 0,
                       a.asname or a.name.split(".")[0], statement) for a in node.names]


class _Walker:
    """One ``find(name)``: walks statements overlapping the lines in ``want``, records bindings of ``name``."""

    def __init__(self, lines: list[str], name: str | None, want: list[int], assigns: list[int]) -> None:
        self._lines = lines
        self._name = name
        self._want = want
        self._assigns = assigns  # lines where ``name`` is followed by = or := (keywords, walrus)
        self.bindings: list[Binding] = []
        self.scopes: list[ScopeInfo] = []  # every def/class and import walked, for the file's index
        self.imports: list[ImportInfo] = []

    def _overlaps(self, first: int, last: int, lines: list[int] | None = None) -> bool:
        lines = self._want if lines is None else lines
        i = bisect.bisect_left(lines, first)
        return i < len(lines) and lines[i] <= last

    # -- the walk ------------------------------------------------------------------------------
    def _add(self, node: ast.AST, kind: str, name: str, stack: list[ScopeInfo], value: ast.AST | None = None,
             *, line: int | None = None, end_line: int | None = None, expr: ast.AST | None = None) -> None:
        """A binding of ``name``: ``value``'s literal, ``expr`` (else ``value``) as its source text."""
        if name != self._name:
            return
        line = line or node.lineno
        self.bindings.append(Binding(line, end_line or getattr(node, "end_lineno", None) or line,
                                     getattr(node, "col_offset", 0), kind, name, self._literal(value),
                                     self._segment(value if expr is None else expr),
                                     stack[-1].qualname if stack else None))

    def walk(self, body: list[ast.stmt], stack: list[ScopeInfo], context: str) -> None:
        for stmt in body:
            if not self._stmt(stmt, stack, context):
                self._compound(stmt, stack, context)  # from here, so nesting costs no extra frame

    def _stmt(self, node: ast.stmt, stack: list[ScopeInfo], context: str) -> bool:
        """A simple statement or a definition; False for a compound statement (for :meth:`_compound`)."""
        first = min([d.lineno for d in getattr(node, "decorator_list", ())] + [node.lineno])
        if not self._overlaps(first, node.end_lineno or node.lineno):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._def(node, stack, context)
            return True
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, node.value, node, stack, context)
            self._expr(node.value, stack)
            return True
        if isinstance(node, ast.AnnAssign):
            self._target(node.target, _field_default(node.value), node, stack, context)
            if node.value is not None:
                self._expr(node.value, stack)
            return True
        if isinstance(node, ast.AugAssign):
            self._target(node.target, None, node, stack, context, expr=node.value)
            self._expr(node.value, stack)
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, stack)
            return True
        return False

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, stack: list[ScopeInfo],
             context: str) -> None:
        """A function or class: its name binds here; decorators, bases, arguments and annotations are
        read in the enclosing scope, the body in its own."""
        is_class = isinstance(node, ast.ClassDef)
        scope = _scope_of(node, stack, context)
        self.scopes.append(scope)
        kind = scope.kind
        if node.name == self._name:
            self.bindings.append(Binding(node.lineno, scope.end, node.col_offset, kind, node.name, None, None,
                                         stack[-1].qualname if stack else None))
        for deco in node.decorator_list:
            self._expr(deco, stack)
        inner = stack + [scope]
        if is_class:
            for base in node.bases + [k.value for k in node.keywords]:
                self._expr(base, stack)
            self.walk(node.body, inner, "class")
        else:
            self._arguments(node.args, stack, inner)
            if node.returns is not None:
                self._expr(node.returns, stack)
            self.walk(node.body, inner, "function")

    def _compound(self, node: ast.stmt, stack: list[ScopeInfo], context: str) -> None:
        """Compound statements: same scope, recurse into bodies and expressions."""
        for _name, value in ast.iter_fields(node):
            if isinstance(value, list):
                stmts = [v for v in value if isinstance(v, ast.stmt)]
                if stmts:
                    self.walk(stmts, stack, context)
                for v in value:
                    if isinstance(v, ast.excepthandler):
                        self.walk(v.body, stack, context)
                    elif isinstance(v, ast.expr):
                        self._expr(v, stack)
                    elif isinstance(v, ast.withitem):
                        self._expr(v.context_expr, stack)
                    elif isinstance(v, ast.match_case):
                        self.walk(v.body, stack, context)
            elif isinstance(value, ast.expr):
                self._expr(value, stack)

    def _target(self, target: ast.AST, value: ast.AST | None, stmt: ast.stmt, stack: list[ScopeInfo],
                context: str, *, expr: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            kind = {"module": "variable", "class": "field"}.get(context, "assignment")
            self._add(stmt, kind, target.id, stack, value, line=target.lineno, end_line=stmt.end_lineno, expr=expr)
        elif isinstance(target, ast.Attribute):
            self._add(stmt, "attribute", target.attr, stack, value, line=target.lineno, end_line=stmt.end_lineno,
                      expr=expr)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and \
                len(value.elts) == len(target.elts) else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self._target(t, v, stmt, stack, context)
        elif isinstance(target, ast.Starred):
            self._target(target.value, None, stmt, stack, context)

    def _arguments(self, args: ast.arguments, outer: list[ScopeInfo], inner: list[ScopeInfo]) -> None:
        positional = args.posonlyargs + args.args
        defaults: list[ast.AST | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                pairs.append((extra, None))
        for arg, default in pairs:
            self._add(arg, "parameter", arg.arg, inner, default)
            if arg.annotation is not None:
                self._expr(arg.annotation, outer)
            if default is not None:
                self._expr(default, outer)

    def _import(self, node: ast.Import | ast.ImportFrom, stack: list[ScopeInfo]) -> None:
        statement = self._segment(node, limit=200)
        infos = _import_infos(node, statement or "")
        self.imports.extend(infos)
        for info in infos:
            if info.bound == self._name:
                self.bindings.append(Binding(node.lineno, node.end_lineno or node.lineno, node.col_offset, "import",
                                             info.bound, None, statement, stack[-1].qualname if stack else None))

    def _expr(self, node: ast.AST, stack: list[ScopeInfo]) -> None:
        """Keyword arguments at call sites and walrus targets, anywhere inside an expression."""
        if not self._overlaps(node.lineno, getattr(node, "end_lineno", None) or node.lineno, self._assigns):
            return
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                for kw in sub.keywords:
                    if kw.arg is not None:
                        self._add(kw.value, "keyword", kw.arg, stack, kw.value,
                                  line=kw.lineno if hasattr(kw, "lineno") else sub.lineno)
            elif isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                self._add(sub, "assignment", sub.target.id, stack, sub.value)
            elif isinstance(sub, ast.Lambda):
                pass  # lambda parameters are not worth reporting

    # -- values --------------------------------------------------------------------------------
    def _segment(self, node: ast.AST | None, limit: int = _MAX_VALUE_CHARS) -> str | None:
        """The source of ``node`` on one line, cut at ``limit``: ``ast.get_source_segment`` without
        re-splitting the whole file on every call (it does, which made indexing a 250 KB file
        quadratic). Column offsets are UTF-8 byte offsets."""
        end_lineno, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if end_lineno is None or end_col is None or not 0 < node.lineno <= end_lineno <= len(self._lines):
            return None
        first, last = node.lineno - 1, end_lineno - 1
        if first == last:
            seg = self._lines[first].encode()[node.col_offset:end_col].decode(errors="replace")
        else:
            head = self._lines[first].encode()[node.col_offset:].decode(errors="replace")
            tail = self._lines[last].encode()[:end_col].decode(errors="replace")
            seg = "\n".join([head, *self._lines[first + 1:last], tail])
        seg = " ".join(seg.split())
        return clip(seg, limit)

    def _literal(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        try:
            ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        return self._segment(node)


def _field_default(value: ast.AST | None) -> ast.AST | None:
    """``x: T = field(default=V)`` -> V, so dataclass fields show their real default."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None)) == "field":
        for kw in value.keywords:
            if kw.arg == "default":
                return kw.value
    return value


# -- text fallbacks for files that do not parse ---------------------------------------------------
_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)")


def text_enclosing(lines: list[str], line: int) -> ScopeInfo | None:
    """Nearest def/class above ``line`` that is less indented than it (an indentation guess)."""
    target = lines[line - 1]
    indent = len(target) - len(target.lstrip()) if target.strip() else 10**6
    chain: list[tuple[int, str, str, int]] = []
    for i in range(line, 0, -1):
        m = _DEF_RE.match(lines[i - 1])
        if m and len(m.group(1)) < indent or (m and i == line):
            chain.append((i, m.group(2), m.group(3), len(m.group(1))))
            indent = len(m.group(1))
            if indent == 0:
                break
    if not chain:
        return None
    i, kind, name, ind = chain[0]
    qual = ".".join(c[2] for c in reversed(chain))
    end = i
    for j in range(i + 1, len(lines) + 1):
        s = lines[j - 1]
        if s.strip() and not s.lstrip().startswith("#") and len(s) - len(s.lstrip()) <= ind:
            break
        if s.strip():
            end = j
    kind = "class" if kind == "class" else ("method" if len(chain) > 1 and chain[1][1] == "class" else "function")
    return ScopeInfo(kind, name, qual, i, i, end, len(chain) - 1)


def text_find(lines: list[str], name: str) -> list[Binding]:
    """Definitions and assignments of ``name`` found by regular expressions (no AST)."""
    esc = re.escape(name)
    patterns = [
        (re.compile(rf"^\s*(?:async\s+)?def\s+{esc}\b"), "function"),
        (re.compile(rf"^\s*class\s+{esc}\b"), "class"),
        (re.compile(rf"(?<![\w.])(?:self\.)?{esc}\s*(?::[^=\n]*)?=(?!=)\s*(.*)$"), "assignment"),
    ]
    out = []
    for n, text in enumerate(lines, 1):
        for regex, kind in patterns:
            m = regex.search(text)
            if m:
                value = None
                if kind == "assignment":
                    value = m.group(1).rstrip(",) ").strip() or None
                    value = value if value and re.fullmatch(r"""(['"]).*\1|None|True|False|-?\d[\d_.eE+-]*""",
                                                            value) else None
                scope = text_enclosing(lines, n) if kind == "assignment" else None
                out.append(Binding(n, n, m.start(), kind, name, value, None, scope.qualname if scope else None))
                break
    return out


# -- the per-file index, cached with the file ------------------------------------------------------
def index_of(source: SourceFile) -> FileIndex | None:
    """The file's index (parsing it on first use), or None when it has a syntax error."""
    tree = CACHE.tree(source)
    if tree is None:
        return None
    if source._index is None:
        source._index = FileIndex(tree, source.text, source.lines)
    return source._index


def syntax_note(source: SourceFile) -> str:
    """The one-line notice attached to results that come from the text fallback."""
    err = source._syntax_error
    where = f"line {err.lineno}" if err is not None and err.lineno else "unknown line"
    msg = err.msg if err is not None else "unparseable"
    return f"{source.where}: syntax error at {where} ({msg}); results come from a text search, not the AST"
