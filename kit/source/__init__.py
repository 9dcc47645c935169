"""Read, search and navigate source code on a host: the installed serving framework, over SSH or locally.

A line alone misleads: ``sm100_default_attention_backend="flashinfer"`` only matters if the branch
around it runs on this GPU. So besides :func:`slice` (``sed -n`` with line numbers, highlighted in a
notebook) this module answers the next questions: which function holds that line (:func:`enclosing`),
where a name is set or defined (:func:`find`), where a predicate used there comes from
(:func:`definition`, following the file's imports), what that definition gives on the host's
Python and GPU (:func:`evaluate`, importing the file as the module it is), which file an installed module is
(:func:`module_path`), and how one region differs across hosts or versions (:func:`diff`).
:func:`grep` searches a file or tree on the host in one round trip.

Works over any ``kit.remote`` Host. Each call costs one ``host.stat`` per file; file contents cross
the wire once per (host, path, size, mtime) and parsed ASTs are cached (:func:`cache_info`).

Files:

- ``_api.py``: the public calls: slice, enclosing, find, grep, definition, evaluate, module_path, diff
- ``_cache.py``: file contents per (host, path, size, mtime) and the cache counters (cache_info, cache_clear)
- ``_index.py``: the AST index of one file: scopes, bindings, imports
- ``_resolve.py``: following imports to the module that defines a name
- ``_grep.py``: the grep/rg command line and its parsed output
- ``_types.py``: Slice, Scope, Symbol(s), Match(es), Definition, SourceDiff: results with text and HTML views
- ``_html.py``: HTML rendering of source lines
- ``_host/evaluate.py``: the program evaluate() runs with the host's Python (package data)
"""
from __future__ import annotations

from kit.source._api import definition, diff, enclosing, evaluate, find, grep, module_path, slice
from kit.source._cache import CacheInfo, cache_clear, cache_info
from kit.source._types import Definition, Match, Matches, Scope, Slice, SourceDiff, Symbol, Symbols
from kit.util import publish

__all__ = ['CacheInfo', 'Definition', 'Match', 'Matches', 'Scope', 'Slice', 'SourceDiff', 'Symbol', 'Symbols',
           'cache_clear', 'cache_info', 'definition', 'diff', 'enclosing', 'evaluate', 'find', 'grep', 'module_path',
           'slice']

publish(globals(), __all__)
