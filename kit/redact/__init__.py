"""Secret redaction: nothing that looks like a credential reaches a report, a catalogue run, a tool
result or a notebook copy.

A low package (it imports no other kit package): the report masks its pages with it, the run catalogue
its runs, the MCP server its results. Its detector set (detect-secrets' plugins, which bring ``requests``
with them, ``_plugins.py``) loads on the first text redacted, never at import.
"""
from __future__ import annotations

from kit.redact._names import MASK, SECRET_MASK, mask_secrets, secret_name
from kit.redact._notebook import notebook_secrets, redact_html, redact_notebook
from kit.redact._text import find_secrets, redact_json_text, redact_text

__all__ = ["MASK", "SECRET_MASK", "find_secrets", "mask_secrets", "notebook_secrets", "redact_html", "redact_json_text",
           "redact_notebook", "redact_text", "secret_name"]
