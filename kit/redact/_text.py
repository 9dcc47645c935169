"""Secret redaction of text and JSON: every secret span masked (``_detect.py`` says where they are: the
pattern table, detect-secrets' provider regexes, keyword and gated entropy detectors, text tables), each
naming the secret span only, so the reader still sees which variable, header or key was redacted.
Patterns are deliberately broad: a redacted non-secret costs a reader a second; a leaked token costs a
rotation.

The values found are also masked as literals wherever else they appear (``find_secrets`` +
``redact_text(..., extra)``), so a secret split by HTML or ANSI markup in one place is still masked.
"""
from __future__ import annotations

import contextlib
import html
import json
from typing import Any, Iterable, Iterator

from kit.redact._detect import secret_spans
from kit.redact._names import MASK
from kit.redact._patterns import ANSI, MIN_LITERAL, NOT_A_VALUE, TAG, WHOLE_NAME


def _merged(spans: list[tuple[int, int, bool]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b, _ in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _values(view: str) -> set[str]:
    return {v for v in (view[a:b].strip() for a, b, code in secret_spans(view) if not code) if v and MASK not in v}


def _markup_views(text: str) -> set[str]:
    """``text`` without ANSI colour codes, without HTML tags (entities decoded), and with JSON-escaped line
    breaks as lines (a table in a JSON string), where those differ."""
    views = set()
    if "\x1b" in text:
        views.add(ANSI.sub("", text))
    if "<" in text or "&" in text:
        views.add(html.unescape(TAG.sub("", ANSI.sub("", text))))
    if "\\n" in text and ("  " in text or "|" in text):  # a JSON-escaped text table: its rows, one a line
        views.add(text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"'))
        if text[:1] == '"' and text.rstrip()[-1:] == '"':
            with contextlib.suppress(ValueError):
                views.add(str(json.loads(text)))
    views.discard(text)
    return views


def find_secrets(text: str) -> set[str]:
    """The secret values the detectors see in ``text``, also after removing ANSI colour codes and
    HTML tags (a highlighted traceback or a pygments-rendered slice splits ``key = "value"``)."""
    found = _values(text)
    for view in _markup_views(text):
        found |= _values(view)
    return found


def mask_literals(text: str, literals: Iterable[str]) -> tuple[str, int]:
    total = 0
    for secret in sorted(set(literals), key=len, reverse=True):
        if len(secret) < MIN_LITERAL:
            continue
        for form in {secret, html.escape(secret), html.escape(secret, quote=False)}:
            if form in text:
                total += text.count(form)
                text = text.replace(form, MASK)
    return text, total


def redact_text(text: str, extra: Iterable[str] = (), *, markup: bool = True) -> tuple[str, int]:
    """Return ``text`` with every secret-looking span masked, and how many spans were masked.

    ``extra`` are secret values found elsewhere (see :func:`find_secrets`); every literal occurrence
    of one (raw or HTML-escaped) is masked too, wherever it stands, as are the values seen in
    ``text`` itself through ANSI or HTML markup (``markup=False``: the caller already collected them
    into ``extra``, as :func:`redact_notebook` does).
    """
    if len(text) < 6:  # nothing secret fits; plotly/widget JSON holds thousands of such strings
        return text, 0
    total = 0
    parts: list[str] = []
    pos = 0
    literals = set(extra)
    for a, b in _merged(secret_spans(text)):
        value = text[a:b]
        parts.append(text[pos:a])
        parts.append(" " + MASK + " " if "\n" in value.strip("\n") else MASK)
        total += 1
        pos = b
    parts.append(text[pos:])
    text = "".join(parts)
    if markup:
        for view in _markup_views(text):
            literals |= _values(view)
    text, n = mask_literals(text, literals)
    return text, total + n


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (lists and dict values, depth first)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from strings(item)


def redact_value(value: Any, extra: Iterable[str] = (), *, keys: bool = False, markup: bool = False) -> tuple[Any, int]:
    """A JSON-like value with every string redacted (:func:`redact_text`), and how many spans were masked;
    ``keys``: also the whole value under a key that names a secret (``{"DB_PASSWORD": "..."}``)."""
    if isinstance(value, str):
        return redact_text(value, extra, markup=markup)
    if isinstance(value, list):
        pairs = [redact_value(v, extra, keys=keys, markup=markup) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            if keys and _secret_key(key) and _is_value(item):   # the name says what the value is
                out[key], n = MASK, 1
            else:
                out[key], n = redact_value(item, extra, keys=keys, markup=markup)
            total += n
        return out, total
    return value, 0


def redact_json_text(text: str, extra: Iterable[str] = ()) -> tuple[str, int]:
    """Redact a JSON document (the report's ledger copy) value by value, so it stays valid JSON;
    text that does not parse is redacted as text. Returns (text, spans masked); the text is
    re-serialised (two-space indent, as the ledger writes) only when something was masked."""
    try:
        data = json.loads(text)
    except ValueError:
        return redact_text(text, extra)
    extra = set(extra)
    for value in strings(data):  # a value split across fields (an id here, its secret there) is one text
        extra |= find_secrets(value)
    extra |= find_secrets("\n".join(strings(data)))
    new, n = redact_value(data, extra, keys=True, markup=True)
    if not n:
        return text, 0
    return json.dumps(new, indent=2, ensure_ascii=False) + "\n", n


def _secret_key(key: Any) -> bool:
    """Whether a JSON key names a secret as a whole (DB_PASSWORD, MY_SERVICE_SECRET, db_password, api_key;
    not max_tokens or eos_token)."""
    return isinstance(key, str) and WHOLE_NAME.fullmatch(key) is not None


def _is_value(item: Any) -> bool:
    """A value worth masking under a secret's name: non-empty text, not a placeholder (none, null, ***)."""
    return isinstance(item, str) and bool(item.strip()) and not NOT_A_VALUE.fullmatch(item.strip())
