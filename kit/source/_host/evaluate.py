"""Shipped to a host by kit.source.evaluate and run by ``Host.python`` (with the host's Python): import
the file ``path`` as the module it is in its package, take ``attr`` from it and call it with ``args``
(``call``), or return its value. The kit appends ``evaluate(path, attr, call, args)``; the value comes
back as JSON (other objects as their repr)."""
import importlib
import os
import sys


def module_name(path):
    """``.../sglang/srt/utils/common.py`` -> (``sglang.srt.utils.common``, the directory above the package)."""
    folder, base = os.path.split(path)
    parts = [] if base == "__init__.py" else [os.path.splitext(base)[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return ".".join(parts), folder


def evaluate(path, attr, call, args):
    name, root = module_name(path)
    if root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module(name)
    if os.path.realpath(getattr(module, "__file__", "") or "") != os.path.realpath(path):
        raise ImportError(f"{name} imports from {module.__file__}, not {path}")
    obj = module
    for a in attr.split("."):
        obj = getattr(obj, a)
    value = obj(*args) if call else obj
    return value if isinstance(value, (bool, int, float, str, type(None), list, tuple, dict)) else repr(value)
