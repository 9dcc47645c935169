"""The offline HTML report: execute every notebook on a session, redact, export, index.

``kit report`` / ``make report`` call :func:`build`. Each notebook runs in a real kernel (nbclient)
with papermill parameters injected after its ``parameters`` cell (``session``, ``host``), a
per-cell timeout, and its own working directory. Sources and outputs are redacted by ``kit.redact`` (detect-secrets'
provider, keyword and entropy detectors plus rules for what serving hosts print: environment dumps,
NCCL/HF variables, AWS credentials, URLs with credentials, Authorization headers, private keys,
passwords and tokens typed on command lines)
before nbconvert exports them with the vendored
assets referenced by relative ``assets/`` URLs, so the pages make no network request. A notebook that
fails still gets a page with a banner linking to the failing cell, and the run reports it.

The report is written into a temporary directory beside ``out`` and swapped in at the end: an
existing report is never half-overwritten, and a directory that is not a kit report is never replaced.
The verdicts the notebooks record go into a copy of the session's ledger inside the report
(``ledger.json``; the kernels get its path in ``KIT_LEDGER``, which :meth:`kit.ledger.Ledger.for_session`
honours), so running the report never modifies the session itself; that copy, the ``ipynb/`` copies
and every page are redacted too.

Files:

- ``_build.py``: build / execute_notebook / discover: run the notebooks and write the report
- ``_export.py``: notebook -> offline HTML page
- ``_assets.py``: the vendored JavaScript every report carries
- ``_browser.py``: headless Chromium: load an exported page, measure its layout, print it to PDF
- ``_table.py``: ``table(df)``: a DataFrame rendered to fit a page (text left, numbers right, missing
  values as "-" or their reason, long names shortened with the full name on hover, footnotes)
"""
from __future__ import annotations

from kit.report._build import (
    DEFAULT_CELL_TIMEOUT,
    MARKER,
    NotebookRun,
    Report,
    build,
    discover,
    execute_notebook,
)
from kit.report._table import Table, table
from kit.util import publish

__all__ = ['DEFAULT_CELL_TIMEOUT', 'MARKER', 'NotebookRun', 'Report', 'Table', 'build', 'discover', 'execute_notebook',
           'table']

publish(globals(), __all__)
