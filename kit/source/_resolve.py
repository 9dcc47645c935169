"""Following imports on a host: which file holds module ``a.b.c``, and where ``from M import x`` leads:
inside the package tree of the importing file (one round trip tests all candidate files), else by
the host's Python (``importlib.util.find_spec``) or ``pip show -f``. Paths sent to a shell are quoted."""
from __future__ import annotations

import itertools
import posixpath
import re

from kit.errors import CommandFailed, RemoteError, SourceError
from kit.source._cache import CACHE, SourceFile, host_name
from kit.source._index import FileIndex, index_of
from kit.util import quote

RUN_TIMEOUT_S = 60.0
_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def follow_import(host, source: SourceFile, index: FileIndex, attr: str, *, python: str, env: dict | None):
    """(next_path, next_attr, hop_description, is_module) for the import that binds ``attr``, or None.

    ``from M import attr`` may name a submodule ``M.attr`` or a name defined in ``M``: both candidate
    files are checked in one round trip.
    """
    candidates = [i for i in index.imports if i.bound == attr]
    stars = [i for i in index.imports if i.bound == "*"]
    for imp in candidates + stars:
        hop = f"{source.path}:{imp.line}: {imp.statement}"
        if imp.attr is None:  # import a.b.c [as x]: inside the package tree, else where the host's python finds it
            candidates = _module_candidates(source.path, imp.module, 0)
            found = first_existing(host, candidates) if candidates else None
            return found or locate_module(host, imp.module, python=python, env=env), None, hop, True
        sub_name = f"{imp.module}.{imp.attr}" if imp.module else imp.attr
        sub = [] if imp.attr == "*" else _module_candidates(source.path, sub_name, imp.level)
        mod = _module_candidates(source.path, imp.module, imp.level)
        found = first_existing(host, sub + mod) if sub + mod else None
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
            tindex = index_of(CACHE.get(host, found))
            if tindex is None or not (tindex.find(attr) or any(i.bound == "*" for i in tindex.imports)):
                continue
            return found, attr, hop, False
        return found, imp.attr, hop, False
    if posixpath.basename(source.path) == "__init__.py":  # package attribute that is a submodule
        pkg = posixpath.dirname(source.path)
        found = first_existing(host, [posixpath.join(pkg, attr + ".py"), posixpath.join(pkg, attr, "__init__.py")])
        if found:
            return found, None, f"{source.path}: submodule {attr}", True
    return None


def _try_module_path(host, module: str, python: str, env: dict | None) -> str | None:
    try:
        return locate_module(host, module, python=python, env=env)
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
        roots.append(posixpath.dirname(near) or ".")  # the file's own folder (sys.path[0] of a script)
    out = []
    for root in roots:
        if parts:
            stem = posixpath.join(root, *parts)
            out += [stem + ".py", posixpath.join(stem, "__init__.py")]
        else:
            out.append(posixpath.join(root, "__init__.py"))
    return out


def first_existing(host, paths: list[str]) -> str | None:
    """The first of ``paths`` that is a regular file on the host, in one round trip."""
    quoted = " ".join(quote(p) for p in paths)
    cmd = f"for p in {quoted}; do if [ -f \"$p\" ]; then printf '%s\\n' \"$p\"; exit 0; fi; done; exit 1"
    result = host.run(cmd, timeout=RUN_TIMEOUT_S)
    return result.stdout.split("\n")[0] if result.exit_code == 0 and result.stdout.strip() else None


def locate_module(host, module: str, *, python: str = "python3", env: dict | None = None) -> str:
    """The file of an installed module on the host; see :func:`kit.source.module_path`."""
    hname = host_name(host)
    if not isinstance(module, str) or not _MODULE_RE.match(module):
        raise SourceError(f"module_path: {module!r} is not a dotted module name")
    code = ("import importlib.util as _u\n"
            f"_s = _u.find_spec({module!r})\n"
            "[_s.origin if _s else None, list(_s.submodule_search_locations or []) if _s else []]")
    try:
        origin, locations = host.python(code, python=python, env=env, timeout=RUN_TIMEOUT_S)
        if origin and origin not in ("built-in", "frozen"):
            return origin
        if origin in ("built-in", "frozen"):
            raise SourceError(f"{hname}: module {module} is {origin} in {python}; it has no source file")
        first_error = "find_spec found no file" + (f" (namespace package at {locations[0]})" if locations else "")
    except (CommandFailed, RemoteError) as exc:
        first_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    found = _pip_show(host, module, python, env)
    if found:
        return found
    raise SourceError(f"{hname}: cannot locate module {module} with {python}: {first_error}; pip show found nothing")


def _pip_show(host, module: str, python: str, env: dict | None) -> str | None:
    """``python -m pip show -f <top package>``: the distribution's file list holds the module's path."""
    top = module.split(".")[0]
    want = [module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"]
    names = {top, top.replace("_", "-")}
    for dist in sorted(names):
        res = host.run(f"{quote(python)} -m pip show -f {quote(dist)}", timeout=RUN_TIMEOUT_S, env=env)
        if not res.ok:
            continue
        head, _, tail = res.stdout.partition("\nFiles:")  # the file list: the indented lines after it
        location = re.search(r"^Location:(.*)$", head, re.M)
        files = {ln.strip() for ln in itertools.takewhile(lambda ln: ln.startswith(" "), tail.splitlines()[1:])}
        found = next((w for w in want if w in files), None)
        if location and found:
            return posixpath.join(location.group(1).strip(), found)
    return None
