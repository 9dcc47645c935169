"""The registry (private to ``kit.engines``): every engine module found, one :class:`Engine` each.

An engine is a module that defines ``ENGINE`` (an :class:`kit.engines.Engine`): the modules of this
package, and the ``*.py`` files of the directories in ``KIT_ENGINE_PATH`` (``os.pathsep``-separated: a
user's own engine, no change to the kit). They are found once, on first use, and kept in ``priority``
order (then by name); ``unknown`` is always last. :func:`refresh` finds them again (a test that adds a
file, a notebook that set the variable late).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
from pathlib import Path

from kit.engines._engine import Engine, StepMarker
from kit.errors import UsageError

__all__ = ["engine", "engines", "guess", "names", "refresh", "step_markers"]

_FOUND: list[Engine] | None = None
_PACKAGE = "kit.engines"


def _load_path(path: Path):
    name = f"kit_engine_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"KIT_ENGINE_PATH: {path}: not a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        del sys.modules[name]
        raise UsageError(f"KIT_ENGINE_PATH: {path}: cannot import ({type(exc).__name__}: {exc})") from None
    return mod


def _modules():
    pkg = importlib.import_module(_PACKAGE)
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in ("_engine", "_registry"):
            yield importlib.import_module(f"{_PACKAGE}.{info.name}")
    for d in filter(None, os.environ.get("KIT_ENGINE_PATH", "").split(os.pathsep)):
        for path in sorted(Path(d).glob("*.py")):
            yield _load_path(path)


def _find() -> list[Engine]:
    global _FOUND
    if _FOUND is None:
        found: dict[str, Engine] = {}
        for mod in _modules():
            e = getattr(mod, "ENGINE", None)
            if isinstance(e, Engine):
                if e.name in found and found[e.name] is not e:
                    raise UsageError(f"engine {e.name!r} is defined twice ({mod.__name__} and another module)")
                found[e.name] = e
        _FOUND = sorted(found.values(), key=lambda e: (e.name == "unknown", e.priority, e.name))
    return _FOUND


def refresh() -> list[str]:
    """Find the engines again (after a new file or a changed ``KIT_ENGINE_PATH``); returns their names."""
    global _FOUND
    _FOUND = None
    return names()


def engines() -> list[Engine]:
    """Every engine, in registry order (``unknown`` last)."""
    return list(_find())


def names() -> list[str]:
    """The engines' names: the choices of every ``--engine`` and ``engine=``."""
    return [e.name for e in _find()]


def engine(name: str | None) -> Engine:
    """The engine called ``name`` (None or ``""``: ``unknown``); UsageError naming the choices otherwise."""
    key = (name or "unknown").lower()
    for e in _find():
        if e.name == key:
            return e
    raise UsageError(f"engine must be one of {', '.join(names())}, not {name!r}")


def guess(cmd: str) -> Engine:
    """The engine a launch command runs: the one whose ``commands`` word comes first in it, else ``unknown``."""
    c = cmd.lower()
    hits = [(at, i, e) for i, e in enumerate(_find()) for w in e.commands if (at := c.find(w)) >= 0]
    return min(hits, key=lambda h: h[:2])[2] if hits else engine("unknown")


def step_markers() -> list[tuple[str, StepMarker]]:
    """Every engine's trace step markers as ``(engine, marker)``, in registry order."""
    return [(e.name, m) for e in _find() for m in e.step_markers]
