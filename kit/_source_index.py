"""AST index of one cached file: scopes (def/class ranges), name bindings, imports.

Built once per cached file (it hangs off the :class:`SourceFile`), so every later ``enclosing`` or
``find`` on that file is a dictionary lookup. When the file does not parse, the text fallbacks here
give an indentation-based answer and the caller says that it is one.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

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
    """Everything kit.source asks of a parsed module, computed in one walk."""

    def __init__(self, tree: ast.Module, text: str, lines: list[str]) -> None:
        self.scopes: list[ScopeInfo] = []
        self.bindings: dict[str, list[Binding]] = {}
        self.imports: list[ImportInfo] = []
        self._text = text
        self._lines = lines
        self._walk(tree.body, [], "module")

    # -- queries -------------------------------------------------------------------------------
    def enclosing(self, line: int) -> ScopeInfo | None:
        best = None
        for scope in self.scopes:
            if scope.start <= line <= scope.end and (best is None or scope.depth > best.depth):
                best = scope
        return best

    def find(self, name: str) -> list[Binding]:
        return sorted(self.bindings.get(name, []), key=lambda b: (b.line, b.col))

    # -- the walk ------------------------------------------------------------------------------
    def _add(self, node: ast.AST, kind: str, name: str, stack: list[ScopeInfo], value: ast.AST | None = None,
             *, line: int | None = None, end_line: int | None = None) -> None:
        line = line or node.lineno
        self.bindings.setdefault(name, []).append(Binding(
            line=line,
            end_line=end_line or getattr(node, "end_lineno", None) or line,
            col=getattr(node, "col_offset", 0),
            kind=kind,
            name=name,
            value=self._literal(value),
            expr=self._segment(value),
            enclosing=stack[-1].qualname if stack else None,
        ))

    def _walk(self, body: list[ast.stmt], stack: list[ScopeInfo], context: str) -> None:
        for stmt in body:
            self._stmt(stmt, stack, context)

    def _stmt(self, node: ast.stmt, stack: list[ScopeInfo], context: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            is_class = isinstance(node, ast.ClassDef)
            kind = "class" if is_class else ("method" if context == "class" else "function")
            qual = f"{stack[-1].qualname}.{node.name}" if stack else node.name
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            scope = ScopeInfo(kind, node.name, qual, start, node.lineno, node.end_lineno or node.lineno, len(stack))
            self.scopes.append(scope)
            self.bindings.setdefault(node.name, []).append(Binding(
                node.lineno, scope.end, node.col_offset, kind, node.name, None, None,
                stack[-1].qualname if stack else None))
            for deco in node.decorator_list:
                self._expr(deco, stack)
            inner = stack + [scope]
            if is_class:
                for base in node.bases + [k.value for k in node.keywords]:
                    self._expr(base, stack)
                self._walk(node.body, inner, "class")
            else:
                self._arguments(node.args, stack, inner)
                if node.returns is not None:
                    self._expr(node.returns, stack)
                self._walk(node.body, inner, "function")
            return
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, node.value, node, stack, context)
            self._expr(node.value, stack)
            return
        if isinstance(node, ast.AnnAssign):
            self._target(node.target, _field_default(node.value), node, stack, context)
            if node.value is not None:
                self._expr(node.value, stack)
            return
        if isinstance(node, ast.AugAssign):
            self._target(node.target, None, node, stack, context, expr=node.value)
            self._expr(node.value, stack)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, stack)
            return
        # Compound statements: same scope, recurse into bodies and expressions.
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                stmts = [v for v in value if isinstance(v, ast.stmt)]
                if stmts:
                    self._walk(stmts, stack, context)
                for v in value:
                    if isinstance(v, ast.excepthandler):
                        self._walk(v.body, stack, context)
                    elif isinstance(v, ast.expr):
                        self._expr(v, stack)
                    elif isinstance(v, ast.withitem):
                        self._expr(v.context_expr, stack)
                    elif hasattr(ast, "match_case") and isinstance(v, ast.match_case):
                        self._walk(v.body, stack, context)
            elif isinstance(value, ast.expr):
                self._expr(value, stack)

    def _target(self, target: ast.AST, value: ast.AST | None, stmt: ast.stmt, stack: list[ScopeInfo],
                context: str, *, expr: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            kind = {"module": "variable", "class": "field"}.get(context, "assignment")
            self._add(stmt, kind, target.id, stack, value, line=target.lineno, end_line=stmt.end_lineno)
            if value is None and expr is not None:
                self._patch_expr(target.id, expr)
        elif isinstance(target, ast.Attribute):
            self._add(stmt, "attribute", target.attr, stack, value, line=target.lineno, end_line=stmt.end_lineno)
            if value is None and expr is not None:
                self._patch_expr(target.attr, expr)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and \
                len(value.elts) == len(target.elts) else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self._target(t, v, stmt, stack, context)
        elif isinstance(target, ast.Starred):
            self._target(target.value, None, stmt, stack, context)

    def _patch_expr(self, name: str, expr: ast.AST) -> None:
        last = self.bindings[name][-1]
        self.bindings[name][-1] = Binding(last.line, last.end_line, last.col, last.kind, last.name, None,
                                          self._segment(expr), last.enclosing)

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
        statement = self._segment(node, limit=200) or ""
        for alias in node.names:
            if isinstance(node, ast.Import):
                bound = alias.asname or alias.name.split(".")[0]
                module = alias.name if alias.asname else alias.name.split(".")[0]
                info = ImportInfo(node.lineno, module, None, 0, bound, statement)
            else:
                bound = alias.asname or alias.name
                info = ImportInfo(node.lineno, node.module or "", alias.name, node.level, bound, statement)
            self.imports.append(info)
            if bound != "*":
                self.bindings.setdefault(bound, []).append(Binding(
                    node.lineno, node.end_lineno or node.lineno, node.col_offset, "import", bound,
                    None, statement, stack[-1].qualname if stack else None))

    def _expr(self, node: ast.AST, stack: list[ScopeInfo]) -> None:
        """Keyword arguments at call sites and walrus targets, anywhere inside an expression."""
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
        if node is None or not hasattr(node, "lineno"):
            return None
        seg = ast.get_source_segment(self._text, node)
        if seg is None:
            return None
        seg = " ".join(seg.split())
        return seg if len(seg) <= limit else seg[: limit - 3] + "..."

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
