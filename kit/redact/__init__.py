"""Secret redaction: nothing that looks like a credential reaches a report, a catalogue run, a tool
result or a notebook copy.

A low package (it imports no other kit package): the report masks its pages with it, the run catalogue
its runs, the MCP server its results, so none of them imports another for it. Its detector set
(detect-secrets' plugins, which bring ``requests`` with them) loads on the first text redacted, never at
import: a command that redacts nothing pays nothing.

Files:

- ``_text.py``: :func:`redact_text`, :func:`redact_json_text`, :func:`find_secrets`: spans masked, values found
  through markup masked as literals everywhere
- ``_notebook.py``: :func:`redact_notebook`, :func:`notebook_secrets`, :func:`redact_html` (the exported page)
- ``_detect.py``: where the secrets of a text are: the pattern table (``_patterns.py``), detect-secrets'
  plugins, keywords and entropy, text tables (``_tables.py``)
- ``_cmdline.py``: the rules for credentials typed on command lines (sshpass -p, mysql -p, logins, --token)
- ``_names.py``: :func:`secret_name` (is a key a credential's name) and :func:`mask_secrets` (an argument dump
  or environment with those values masked)
"""
from __future__ import annotations

from kit.redact._names import MASK, SECRET_MASK, mask_secrets, secret_name
from kit.redact._notebook import notebook_secrets, redact_html, redact_notebook
from kit.redact._text import find_secrets, redact_json_text, redact_text

__all__ = ["MASK", "SECRET_MASK", "find_secrets", "mask_secrets", "notebook_secrets", "redact_html", "redact_json_text",
           "redact_notebook", "redact_text", "secret_name"]
