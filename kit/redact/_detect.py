"""Where the secrets in a text are: the pattern table's spans, then detect-secrets' regex plugins, keyword
regexes and high-entropy scorers (a quoted string above their limits is a secret when a secret word is on its
line; without one, only a 20-100 character mixed-case base64 string that does not decode to text and does not
look like an identifier, a digest or plotly's ``bdata``), then text tables. The detector set (detect-secrets,
and ``requests`` with it) loads on the first text looked at."""
from __future__ import annotations

import base64
import binascii
import re
from typing import Iterator

from kit.redact._cmdline import HINTS as CMDLINE_HINTS
from kit.redact._names import MASK
from kit.redact._patterns import (
    BARE_AWS,
    CODE,
    COUNT,
    KEYED,
    NAME_RULE,
    PATHLIKE,
    PATTERNS,
    RELPATH,
    SECRET_WORD,
)
from kit.redact._tables import aligned_spans, table_spans


def _ds():
    """detect-secrets' detector set (``_plugins.py``). Its keyword-style patterns (IBM, Cloudant, SoftLayer:
    ``(?<=\\W)...(key|pwd|pass|token)``) try every position of a text; they run only on the lines holding
    such a word (see :func:`secret_spans`)."""
    from kit.redact import _plugins  # deferred: the detector set (and requests with it) loads on the first text

    return _plugins


_HINT = re.compile(r"(?i)key|pw|pass|token|secret")


def _hinted(rx: re.Pattern[str]) -> bool:
    return rx.pattern.startswith("(?:(?<=\\W)|(?<=^))")


def _lines_with(text: str, word: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    """(offset, line) of each line of ``text`` holding ``word``, once each."""
    last_end = -1
    for w in word.finditer(text):
        if w.start() < last_end:
            continue
        start = text.rfind("\n", 0, w.start()) + 1
        end = text.find("\n", w.end())
        last_end = end = len(text) if end < 0 else end
        yield start, text[start:end]


def _group_spans(m: re.Match[str]) -> Iterator[tuple[int, int]]:
    """findall semantics: every non-empty group, or the whole match when there is none."""
    if m.re.groups == 0:
        yield m.span()
        return
    for i in range(1, m.re.groups + 1):
        if m.group(i):
            yield m.span(i)


_KW_END = re.compile(r"[\s,;<>&)}\]\x1b]")
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_IDENT = re.compile(r"[a-z]{3,}[_.][a-z0-9]{2,}|[A-Za-z]{3,}[_.][A-Z][a-z]{2,}|[a-z]{7,}|[A-Z]{7,}")
_NOT_KEY_BEFORE = re.compile(r"(?:bdata|dtype|sha\d*|md5|digest|hash|integrity|etag|commit|sha1)\W{0,4}$", re.I)


def _decodes_to_text(s: str) -> bool:
    t = s.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(t + "=" * (-len(t) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    if not raw:
        return False
    try:
        txt = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return sum(c.isprintable() or c in "\n\t" for c in txt) >= 0.95 * len(txt)


def _entropy_spans(text: str) -> Iterator[tuple[int, int]]:
    b64, hx = _ds().B64, _ds().HEX
    if '"' not in text and "'" not in text:
        return
    for m in b64.regex.finditer(text):
        s = m.group(2).rstrip("\\")  # detect-secrets' charset holds a backslash: JSON's \" ends the string
        if len(s) < 16 or _UUID.fullmatch(s) or PATHLIKE.search(s):
            continue
        before = text[max(0, m.start() - 40):m.start()]
        before = before[before.rfind("\n") + 1:]
        keyed = KEYED.search(before) is not None
        if _HEX.fullmatch(s):
            if not keyed or hx.calculate_shannon_entropy(s) < hx.entropy_limit:
                continue
        else:
            if b64.calculate_shannon_entropy(s) < (3.5 if keyed else b64.entropy_limit) or _IDENT.search(s):
                continue
            if not keyed:
                if not (20 <= len(s) <= 100) or _decodes_to_text(s):
                    continue
                if not (re.search(r"[a-z]", s) and re.search(r"[A-Z]", s) and re.search(r"[0-9]", s)):
                    continue
                line_start = text.rfind("\n", 0, m.start()) + 1
                if _NOT_KEY_BEFORE.search(text, line_start, m.start()):
                    continue
        yield m.start(2), m.start(2) + len(s)


def _keyword_spans(text: str) -> Iterator[tuple[int, int, bool]]:
    """detect-secrets' keyword regexes on the lines holding a secret word (they run to the end of
    a line), each hit cut at the end of its token; (start, end, is_code)."""
    ds = _ds()
    for start, line in _lines_with(text, SECRET_WORD):
        if len(line) > 4000:
            continue
        for rx, group in ds.KEYWORDS:
            for m in rx.finditer(line):
                a, b = m.span(group)
                quoted = a > 0 and line[a - 1] in "\"'`"
                if not quoted:
                    cut = _KW_END.search(line, a, b)
                    b = cut.start() if cut else b
                value = line[a:b]
                if not value.strip() or MASK in value or ds.is_templated_secret(value) or value.startswith("$"):
                    continue
                if re.search(r"[!=]=", line[m.start():a]):  # a comparison, not an assignment
                    continue
                code = not quoted and (CODE.fullmatch(value) is not None or ds.is_indirect_reference(line[m.start():]))
                yield start + a, start + b, code


def secret_spans(text: str) -> list[tuple[int, int, bool]]:
    """Every secret span in ``text``: (start, end, is_code). Code spans (``password=pw``) are masked
    in place but never hunted as literals elsewhere."""
    found: list[tuple[int, int, bool]] = []
    low = None
    for pattern in PATTERNS:
        hints = CMDLINE_HINTS.get(pattern)
        if hints is not None:
            low = text.lower() if low is None else low
            if not any(h in low for h in hints):
                continue
        for m in pattern.finditer(text):
            value = m.group("s")
            if not value.strip() or value.strip().startswith(MASK):
                continue
            if pattern in BARE_AWS and not (re.search(r"[a-z]", value) and re.search(r"[A-Z]", value)):
                continue
            if pattern is NAME_RULE and COUNT.fullmatch(value) and m.group(0)[:m.start("s") - m.start()].lower(
                    ).rstrip("\"' :=]\x1b").endswith("token"):
                continue  # "#full token: 350592", "token: 108": a count of tokens, not a token
            if pattern is NAME_RULE and RELPATH.match(value):
                continue  # password=./pw.txt, --from-file=password=~/pw: a file that holds it
            quoted = m.start("s") > 0 and text[m.start("s") - 1] in "\"'"
            code = pattern is NAME_RULE and not quoted and CODE.fullmatch(value.strip()) is not None
            found.append((*m.span("s"), code))
    hinted_lines: list[tuple[int, str]] | None = None
    for rx in _ds().REGEXES:
        if _hinted(rx):
            if hinted_lines is None:
                hinted_lines = list(_lines_with(text, _HINT))
            for off, line in hinted_lines:
                for m in rx.finditer(line):
                    found.extend((off + a, off + b, False) for a, b in _group_spans(m) if b - a >= 8)
            continue
        for m in rx.finditer(text):
            found.extend((a, b, False) for a, b in _group_spans(m) if b - a >= 8)
    found.extend(_keyword_spans(text))
    found.extend((a, b, False) for a, b in _entropy_spans(text))
    found.extend((a, b, False) for a, b in table_spans(text))
    found.extend((a, b, False) for a, b in aligned_spans(text))
    return found
