"""Redaction of an executed notebook (sources, outputs, widget state, parameters: two passes, every value
found anywhere masked everywhere) and of the exported page (the safety net outside ``data:`` URIs)."""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator

from kit.redact._text import find_secrets, mask_literals, redact_text, redact_value, strings

_BINARY_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")


def _texts(nb: Any) -> Iterator[str]:
    for cell in nb.cells:
        yield from strings(cell.get("source", ""))
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "stream":
                yield from strings(out.get("text", ""))
            elif out.get("output_type") in ("display_data", "execute_result"):
                for mime, value in out.get("data", {}).items():
                    if mime not in _BINARY_MIME:
                        yield from strings(value)
            elif out.get("output_type") == "error":
                yield str(out.get("evalue", ""))
                yield from strings(list(out.get("traceback", [])))
    yield from strings(json.loads(json.dumps(nb.metadata.get("widgets", {}))))
    yield from strings(json.loads(json.dumps(nb.metadata.get("papermill", {}).get("parameters", {}))))


def notebook_secrets(nb: Any) -> set[str]:
    """Every secret value the detectors find anywhere in an nbformat notebook (any representation)."""
    secrets: set[str] = set()
    for text in _texts(nb):
        secrets |= find_secrets(text)
    return secrets


def redact_notebook(nb: Any, extra: Iterable[str] = (), *, scan: bool = True) -> tuple[int, set[str]]:
    """Redact sources, outputs, widget state and parameters of an nbformat notebook in place.

    Two passes: first every secret value the patterns find anywhere in the notebook (in any
    representation) is collected, then every text is redacted by pattern and by those literal
    values and ``extra`` (values found in the report's other notebooks or on its pages, so that a
    token printed bare in one notebook is masked wherever it was recognised). Returns (spans
    masked, the secret values) so the exported page can be checked too. ``scan=False``: ``extra``
    already holds this notebook's values (:func:`notebook_secrets`), so they are not looked for again.
    """
    secrets = (notebook_secrets(nb) if scan else set()) | set(extra)
    total = 0
    for cell in nb.cells:
        src = cell.get("source", "")
        cell["source"], n = redact_text("".join(src) if isinstance(src, list) else src, secrets, markup=False)
        total += n
        for out in cell.get("outputs", []) or []:
            kind = out.get("output_type")
            if kind == "stream":
                text = out.get("text", "")
                out["text"], n = redact_text("".join(text) if isinstance(text, list) else text, secrets, markup=False)
                total += n
            elif kind in ("display_data", "execute_result"):
                data = out.get("data", {})
                for mime in list(data):
                    if mime in _BINARY_MIME:
                        continue
                    value = data[mime]
                    if isinstance(value, list) and not mime.endswith("json"):
                        value = "".join(value)
                    data[mime], n = redact_value(value, secrets)
                    total += n
            elif kind == "error":
                out["evalue"], n = redact_text(str(out.get("evalue", "")), secrets, markup=False)
                total += n
                out["traceback"], n = redact_value(list(out.get("traceback", [])), secrets)
                total += n
    widgets = nb.metadata.get("widgets")
    if widgets:
        new, n = redact_value(json.loads(json.dumps(widgets)), secrets)
        if n:
            nb.metadata["widgets"] = new
        total += n
    params = nb.metadata.get("papermill", {}).get("parameters")
    if params:
        nb.metadata["papermill"]["parameters"], n = redact_value(params, secrets)
        total += n
    return total, secrets


# Skipped by the pattern pass of the page (the literal pass still covers them): images, and the
# template's style sheets (85% of a page's bytes, the same in every report, no notebook data).
_OPAQUE = re.compile(r"data:[a-z]+/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+|<style[^>]*>.*?</style>", re.I | re.S)


def redact_html(page: str, extra: Iterable[str] = (), found: set[str] | None = None) -> tuple[str, int]:
    """Safety net on the exported page: the patterns over everything but base64 ``data:`` URIs
    (images) and ``<style>`` blocks, then the literal values (``extra`` and those found) everywhere.
    What markup splits (a pygments-highlighted ``key = "value"``) was found in the notebook, whose
    sources and outputs are plain text there, and comes in ``extra``; where the page itself holds a
    secret, its values are also looked for through the markup. ``found``, when given, receives the
    values seen on the page itself that ``extra`` lacked (the caller masks them in the notebook copy)."""
    parts: list[str] = []
    total = 0
    pos = 0
    literals = set(extra)
    for m in _OPAQUE.finditer(page):
        chunk, n = redact_text(page[pos:m.start()], markup=False)
        literals |= find_secrets(page[pos:m.start()]) if n else set()
        parts.append(chunk)
        parts.append(m.group(0))
        total += n
        pos = m.end()
    chunk, n = redact_text(page[pos:], markup=False)
    literals |= find_secrets(page[pos:]) if n else set()
    parts.append(chunk)
    if found is not None:
        found |= literals - set(extra)
    page, n2 = mask_literals("".join(parts), literals)
    return page, total + n + n2
