"""Secret redaction for the report: nothing that looks like a credential reaches an exported page.

Applied to every cell source, every text output (stream, text/plain, text/html, markdown, JSON,
error messages and tracebacks) and the widget state of each executed notebook before export, then
once more to the final HTML outside ``data:`` URIs as a safety net. Patterns are deliberately broad:
a redacted non-secret costs a reader a second; a leaked token costs a rotation.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any, Iterable, Iterator

MASK = "***REDACTED***"

# Names whose values are secrets. Upper-case environment style: the secret word is the last
# ``_``-separated component (HF_TOKEN, AWS_SECRET_ACCESS_KEY; not MAX_TOKENS). Lower-case keys are
# matched whole (password/secret words also with a prefix: db_password; token words not, since
# eos_token/pad_token are tokenizer settings) and never after ``#`` (SGLang's ``#token: 108`` is a
# count, not a secret). ``os.environ["HF_TOKEN"] = ...`` is seen through the closing bracket.
_ENV_NAME = r"\b(?:[A-Z0-9]+_)*(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)\b"
_KEY_NAME = (r"(?<![#\w/.-])(?i:(?:[a-z0-9]+_)*(?:password|passwd|passphrase|secret|api_?key)|secret(?:_access)?_key|token|"
             r"(?:x-)?api[-_]?key|access_token|auth_token|hf_token|private_key)\b")
_Q = r"(?:&quot;|&#x27;|&#39;|[\"'])?"
_A = r"(?:\x1b\[[0-9;]*m)*"  # ANSI colour codes IPython puts inside highlighted traceback lines

# Each pattern names the secret part ``s``; only that part is masked, so the reader still sees
# which variable, header or key was redacted.
_PATTERNS: list[re.Pattern[str]] = [
    # PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, plain); an unterminated block runs to the end.
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?P<s>.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    # HTTP Authorization / Proxy-Authorization headers, in raw, JSON/dict and HTML-escaped forms.
    re.compile(r"(?:Proxy-)?Authorization" + _A + _Q + r"\s*[:=]\s*" + _A + _Q +
               r"(?P<s>(?:(?:Bearer|Basic|Token|Digest)\s+)?[^\s\"'<>&,}\x1b]+)", re.I),
    # NAME=value / NAME: value / "NAME": "value" for secret-looking names.
    re.compile(r"(?:" + _ENV_NAME + "|" + _KEY_NAME + r")" + _A + _Q + r"\]?\s*" + _A + r"[:=](?!=)" + _A + r"\s*"
               + _A + _Q + r"(?P<s>[^\s\"'<>&,;)}\]\x1b]+)"),
    re.compile(r"--(?:[a-z0-9-]*-)?(?:token|password|passwd|secret|api-key)(?:=|\s+)(?P<s>[^\s\"'<>&\x1b]+)", re.I),
    # Well-known token shapes, wherever they appear.
    re.compile(r"\bhf_(?P<s>[A-Za-z0-9]{20,})"),
    re.compile(r"\b(?P<s>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,})"),
    re.compile(r"\b(?P<s>github_pat_[A-Za-z0-9_]{40,})"),
    re.compile(r"\bsk-(?P<s>(?:proj-|ant-)?[A-Za-z0-9_-]{20,})"),
    re.compile(r"\b(?P<s>xox[abpr]-[A-Za-z0-9-]{10,})"),
    re.compile(r"\b(?P<s>AKIA[0-9A-Z]{16})\b"),
    # Credentials in URLs: scheme://user:password@host
    re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@\"'<>]+:(?P<s>[^/\s@\"'<>]+)@", re.I),
]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TAG = re.compile(r"<[^>]*>")
_MIN_LITERAL = 6  # secrets shorter than this are only masked where a pattern matches them


_CODE = re.compile(r"[A-Za-z_][\w.]*[\[(]?")


def _is_code(pattern: re.Pattern[str], m: re.Match[str]) -> bool:
    """An unquoted name, dotted name or the start of a call/subscript after ``token =`` is code
    that reads the secret (``hf_token = os.environ["HF_TOKEN"]``, ``password=pw``), not the secret.
    It is masked where the pattern matched, but never hunted as a literal through the notebook,
    which would mask every other ``os.environ[`` or use of that name."""
    value = m.group("s").strip()
    quoted = m.start("s") > 0 and m.string[m.start("s") - 1] in "\"'"
    return pattern is _PATTERNS[2] and not quoted and _CODE.fullmatch(value) is not None


def _sub(pattern: re.Pattern[str], text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group("s")
        if not value.strip() or value.strip().startswith(MASK):
            return m.group(0)
        count += 1
        a, b = m.span("s")
        g, o = m.group(0), m.start()
        return g[:a - o] + (" " + MASK + " " if "\n" in value else MASK) + g[b - o:]

    return pattern.sub(repl, text), count


def find_secrets(text: str) -> set[str]:
    """The secret values the patterns see in ``text``, also after removing ANSI colour codes and
    HTML tags (a highlighted traceback or a pygments-rendered slice splits ``key = "value"``)."""
    found: set[str] = set()
    views = {text, _ANSI.sub("", text)}
    if "<" in text:
        views.add(html.unescape(_TAG.sub("", text)))
    for view in views:
        for pattern in _PATTERNS:
            for m in pattern.finditer(view):
                value = m.group("s").strip()
                if not value or value.startswith(MASK):
                    continue
                if not _is_code(pattern, m):
                    found.add(value)
    return found


def redact_text(text: str, extra: Iterable[str] = ()) -> tuple[str, int]:
    """Return ``text`` with every secret-looking span masked, and how many spans were masked.

    ``extra`` are secret values found elsewhere (see :func:`find_secrets`); every literal occurrence
    of one (raw or HTML-escaped) is masked too, wherever it stands.
    """
    total = 0
    for pattern in _PATTERNS:
        text, n = _sub(pattern, text)
        total += n
    for secret in sorted(extra, key=len, reverse=True):
        if len(secret) < _MIN_LITERAL:
            continue
        for form in {secret, html.escape(secret), html.escape(secret, quote=False)}:
            if form in text:
                total += text.count(form)
                text = text.replace(form, MASK)
    return text, total


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _redact_value(value: Any, extra: Iterable[str] = ()) -> tuple[Any, int]:
    if isinstance(value, str):
        return redact_text(value, extra)
    if isinstance(value, list):
        out, total = [], 0
        for item in value:
            new, n = _redact_value(item, extra)
            out.append(new)
            total += n
        return out, total
    if isinstance(value, dict):
        out_d, total = {}, 0
        for key, item in value.items():
            new, n = _redact_value(item, extra)
            out_d[key] = new
            total += n
        return out_d, total
    return value, 0


_BINARY_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")


def _texts(nb: Any) -> Iterator[str]:
    for cell in nb.cells:
        yield from _strings(cell.get("source", ""))
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "stream":
                yield from _strings(out.get("text", ""))
            elif out.get("output_type") in ("display_data", "execute_result"):
                for mime, value in out.get("data", {}).items():
                    if mime not in _BINARY_MIME:
                        yield from _strings(value)
            elif out.get("output_type") == "error":
                yield str(out.get("evalue", ""))
                yield from _strings(list(out.get("traceback", [])))
    yield from _strings(json.loads(json.dumps(nb.metadata.get("widgets", {}))))
    yield from _strings(json.loads(json.dumps(nb.metadata.get("papermill", {}).get("parameters", {}))))


def redact_notebook(nb: Any) -> tuple[int, set[str]]:
    """Redact sources, outputs, widget state and parameters of an nbformat notebook in place.

    Two passes: first every secret value the patterns find anywhere in the notebook (in any
    representation) is collected, then every text is redacted by pattern and by those literal
    values. Returns (spans masked, the secret values) so the exported page can be checked too.
    """
    secrets: set[str] = set()
    for text in _texts(nb):
        secrets |= find_secrets(text)
    total = 0
    for cell in nb.cells:
        src = cell.get("source", "")
        cell["source"], n = redact_text("".join(src) if isinstance(src, list) else src, secrets)
        total += n
        for out in cell.get("outputs", []) or []:
            kind = out.get("output_type")
            if kind == "stream":
                text = out.get("text", "")
                out["text"], n = redact_text("".join(text) if isinstance(text, list) else text, secrets)
                total += n
            elif kind in ("display_data", "execute_result"):
                data = out.get("data", {})
                for mime in list(data):
                    if mime in _BINARY_MIME:
                        continue
                    value = data[mime]
                    if isinstance(value, list) and not mime.endswith("json"):
                        value = "".join(value)
                    data[mime], n = _redact_value(value, secrets)
                    total += n
            elif kind == "error":
                out["evalue"], n = redact_text(str(out.get("evalue", "")), secrets)
                total += n
                out["traceback"], n = _redact_value(list(out.get("traceback", [])), secrets)
                total += n
    widgets = nb.metadata.get("widgets")
    if widgets:
        new, n = _redact_value(json.loads(json.dumps(widgets)), secrets)
        if n:
            nb.metadata["widgets"] = new
        total += n
    params = nb.metadata.get("papermill", {}).get("parameters")
    if params:
        nb.metadata["papermill"]["parameters"], n = _redact_value(params, secrets)
        total += n
    return total, secrets


_DATA_URI = re.compile(r"data:[a-z]+/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+", re.I)


def redact_html(page: str, extra: Iterable[str] = ()) -> tuple[str, int]:
    """Safety net on the exported page: redact everything except base64 ``data:`` URIs (images)."""
    extra = list(extra)
    parts: list[str] = []
    total = 0
    pos = 0
    for m in _DATA_URI.finditer(page):
        chunk, n = redact_text(page[pos:m.start()], extra)
        parts.append(chunk)
        parts.append(m.group(0))
        total += n
        pos = m.end()
    chunk, n = redact_text(page[pos:], extra)
    parts.append(chunk)
    return "".join(parts), total + n
