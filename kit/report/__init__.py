"""The offline HTML report: execute every notebook on a session, redact, export, index.

``kit report`` / ``make report`` call :func:`build`. Each notebook runs in a real kernel (nbclient)
with papermill parameters injected after its ``parameters`` cell (``session``, ``host``), a
per-cell timeout, and its own working directory. Sources and outputs are redacted by ``kit.redact``
before nbconvert exports them with the vendored assets referenced by relative ``assets/`` URLs, so the
pages make no network request. A notebook that fails still gets a page with a banner linking to the
failing cell, and the run reports it.

The report is written into a temporary directory beside ``out`` and swapped in at the end: an
existing report is never half-overwritten, and a directory that is not a kit report is never replaced.
The verdicts the notebooks record go into a copy of the session's ledger inside the report
(``ledger.json``; the kernels get its path in ``KIT_LEDGER``, which :meth:`kit.ledger.Ledger.for_session`
honours), so running the report never modifies the session itself; that copy, the ``ipynb/`` copies
and every page are redacted too.
"""
from __future__ import annotations

import importlib

from kit.report._table import Table, table
from kit.util import publish

__all__ = ['DEFAULT_CELL_TIMEOUT', 'MARKER', 'NotebookRun', 'Report', 'Table', 'build', 'discover', 'execute_notebook',
           'table']

# The build (nbclient, nbconvert, papermill, pypdf) loads on first use: notebooks import kit.report for table.
_BUILD = ('DEFAULT_CELL_TIMEOUT', 'MARKER', 'NotebookRun', 'Report', 'build', 'discover', 'execute_notebook')


def __getattr__(name: str):
    if name not in _BUILD:
        raise AttributeError(f"module 'kit.report' has no attribute {name!r}")
    build_module = importlib.import_module("kit.report._build")
    ns = {"__name__": __name__, **{n: getattr(build_module, n) for n in _BUILD}}
    publish(ns, _BUILD)
    globals().update({n: ns[n] for n in _BUILD})
    return ns[name]


publish(globals(), __all__)
