"""Secret redaction for the report: nothing that looks like a credential reaches an exported page.

Applied to every cell source, every text output (stream, text/plain, text/html, markdown, JSON,
error messages and tracebacks) and the widget state of each executed notebook before export, then
once more to the final HTML outside ``data:`` URIs as a safety net. Patterns are deliberately broad:
a redacted non-secret costs a reader a second; a leaked token costs a rotation.
"""
from __future__ import annotations

import json
import re
from typing import Any

MASK = "***REDACTED***"

# Names whose values are secrets. Upper-case environment style: the secret word is the last
# ``_``-separated component (HF_TOKEN, AWS_SECRET_ACCESS_KEY; not MAX_TOKENS). Lower-case keys are
# matched whole and never after ``#`` (SGLang's ``#token: 108`` is a count, not a secret).
_ENV_NAME = r"\b(?:[A-Z0-9]+_)*(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)\b"
_KEY_NAME = (r"(?<![#\w-])(?i:password|passwd|passphrase|secret|token|api_key|apikey|access_token|auth_token|"
             r"hf_token|client_secret|private_key)\b")
_Q = r"(?:&quot;|&#x27;|&#39;|[\"'])?"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, plain); an unterminated block runs to the end.
    (re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
     r"-----BEGIN \1PRIVATE KEY----- " + MASK + r" -----END \1PRIVATE KEY-----"),
    # HTTP Authorization / Proxy-Authorization headers, in raw, JSON/dict and HTML-escaped forms.
    (re.compile(r"((?:Proxy-)?Authorization" + _Q + r"\s*[:=]\s*" + _Q + r")"
                r"(?:(?:Bearer|Basic|Token|Digest)\s+)?(?!\*\*\*REDACTED)[^\s\"'<>&,}]+", re.I),
     r"\1" + MASK),
    # NAME=value / NAME: value / "NAME": "value" for secret-looking names.
    (re.compile(r"((?:" + _ENV_NAME + "|" + _KEY_NAME + r")" + _Q + r"\s*[:=]\s*" + _Q + r")"
                r"(?!\*\*\*REDACTED)[^\s\"'<>&,;)}\]]+"),
     r"\1" + MASK),
    (re.compile(r"(--(?:[a-z0-9-]*-)?(?:token|password|passwd|secret|api-key)(?:=|\s+))(?!\*\*\*REDACTED)[^\s\"'<>&]+", re.I),
     r"\1" + MASK),
    # Well-known token shapes, wherever they appear.
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_" + MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"), MASK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}"), MASK),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), "sk-" + MASK),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    # Credentials in URLs: scheme://user:password@host
    (re.compile(r"\b([a-z][a-z0-9+.-]*://[^/\s:@\"'<>]+):[^/\s@\"'<>]+@", re.I), r"\1:" + MASK + "@"),
]


def redact_text(text: str) -> tuple[str, int]:
    """Return ``text`` with every secret-looking span masked, and how many spans were masked."""
    total = 0
    for pattern, repl in _PATTERNS:
        text, n = pattern.subn(repl, text)
        total += n
    return text, total


def _redact_value(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        out, total = [], 0
        for item in value:
            new, n = _redact_value(item)
            out.append(new)
            total += n
        return out, total
    if isinstance(value, dict):
        out_d, total = {}, 0
        for key, item in value.items():
            new, n = _redact_value(item)
            out_d[key] = new
            total += n
        return out_d, total
    return value, 0


_BINARY_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")


def redact_notebook(nb: Any) -> int:
    """Redact sources, outputs and widget state of an nbformat notebook in place; return the count."""
    total = 0
    for cell in nb.cells:
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(src)
        cell["source"], n = redact_text(src)
        total += n
        for out in cell.get("outputs", []) or []:
            kind = out.get("output_type")
            if kind == "stream":
                text = out.get("text", "")
                out["text"], n = redact_text("".join(text) if isinstance(text, list) else text)
                total += n
            elif kind in ("display_data", "execute_result"):
                data = out.get("data", {})
                for mime in list(data):
                    if mime in _BINARY_MIME:
                        continue
                    value = data[mime]
                    if isinstance(value, (dict, list)) and mime.endswith("json"):
                        data[mime], n = _redact_value(value)
                    elif isinstance(value, list):
                        data[mime], n = redact_text("".join(value))
                    elif isinstance(value, str):
                        data[mime], n = redact_text(value)
                    else:
                        n = 0
                    total += n
            elif kind == "error":
                out["evalue"], n = redact_text(str(out.get("evalue", "")))
                total += n
                tb, n = _redact_value(list(out.get("traceback", [])))
                out["traceback"] = tb
                total += n
    widgets = nb.metadata.get("widgets")
    if widgets:
        # Widget state is JSON (text values of Text/Textarea widgets, labels, options ...).
        new, n = _redact_value(json.loads(json.dumps(widgets)))
        if n:
            nb.metadata["widgets"] = new
        total += n
    params = nb.metadata.get("papermill", {}).get("parameters")
    if params:
        nb.metadata["papermill"]["parameters"], n = _redact_value(params)
        total += n
    return total


_DATA_URI = re.compile(r"data:[a-z]+/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+", re.I)


def redact_html(page: str) -> tuple[str, int]:
    """Safety net on the exported page: redact everything except base64 ``data:`` URIs (images)."""
    parts: list[str] = []
    total = 0
    pos = 0
    for m in _DATA_URI.finditer(page):
        chunk, n = redact_text(page[pos:m.start()])
        parts.append(chunk)
        parts.append(m.group(0))
        total += n
        pos = m.end()
    chunk, n = redact_text(page[pos:])
    parts.append(chunk)
    return "".join(parts), total + n
