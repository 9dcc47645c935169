"""Secret redaction of text, JSON, HTML and notebooks: nothing that looks like a credential is written.

Applied to every cell source, every text output (stream, text/plain, text/html, markdown, JSON,
error messages and tracebacks) and the widget state of each executed notebook before export, to the
report's copy of the ledger, then once more to every final HTML page outside ``data:`` URIs as a
safety net. Patterns are deliberately broad: a redacted non-secret costs a reader a second; a leaked
token costs a rotation.

Three sources of detection, each naming the secret span only (the reader still sees which variable,
header or key was redacted):

1. ``detect-secrets``' regex plugins (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, npm, PyPI,
   SendGrid, Twilio, Azure, IBM, Discord, Telegram, Mailchimp, basic-auth URLs, ...), a maintained
   set of provider formats; its keyword detector's denylist regexes (``password = ...``,
   ``secret: ...``) with its false-positive filters; its high-entropy string scorers, gated (below).
2. Rules for what this field prints: environment dumps and ``NAME=value`` for any upper-case name
   ending in a secret word (``HF_TOKEN``, ``NCCL_IB_SECRET_KEY``, ``DJANGO_SECRET_KEY``,
   ``PGPASSWORD``), ``aws_secret_access_key`` in the credentials-file and boto3 spellings, a bare
   AWS secret beside an ``AKIA``/``ASIA`` id, ``curl -u user:pass``, NVIDIA ``nvapi-`` keys, URLs
   with credentials, ``Authorization:`` headers, ``--token``-style flags, PEM private key blocks.
3. High entropy: a quoted string that detect-secrets scores above its limits is a secret when a
   secret word is on its line; without one, only a 20-100 character mixed-case base64 string that
   does not decode to text and does not look like an identifier, a digest or plotly's ``bdata``
   (hashes, UUIDs, git SHAs, kernel names and base64-encoded text in trace args stay).

The values found are also masked as literals wherever else they appear (``find_secrets`` +
``redact_text(..., extra)``), so a secret split by HTML or ANSI markup in one place is still masked.
"""
from __future__ import annotations

import base64
import binascii
import html
import json
import re
from functools import lru_cache
from typing import Any, Iterable, Iterator

from kit.redact._cmdline import CMDLINE_RULES
from kit.redact._cmdline import HINTS as CMDLINE_HINTS
from kit.redact._names import MASK, secret_name

# Names whose values are secrets. Upper-case environment style: the name ends in a secret word
# (HF_TOKEN, AWS_SECRET_ACCESS_KEY, NCCL_IB_SECRET_KEY, PGPASSWORD; not MAX_TOKENS). Lower-case keys
# are matched whole (password/secret words also with a prefix: db_password, aws_secret_access_key;
# token words not, since eos_token/pad_token are tokenizer settings) and never after ``#``
# (SGLang's ``#token: 108`` is a count, not a secret). ``os.environ["HF_TOKEN"] = ...`` is seen
# through the closing bracket.
_ENV_NAME = (r"\b(?=[A-Z])(?:(?:[A-Z0-9]+_)+(?:PASS|PWD)|[A-Z0-9_]*(?:TOKEN|SECRET|SECRET_KEY|PASSWORD|PASSWD|"
             r"PASSPHRASE|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?|AUTH_KEY|SIGNING_KEY|ENCRYPTION_KEY|MASTER_KEY|"
             r"CLIENT_SECRET|CONNECTION_STRING|WEBHOOK_URL|SAS_TOKEN))\b")
_KEY_NAME = (r"(?<![#\w/.-])(?i:(?:[a-z0-9]+_)*(?:password|passwd|passphrase|secret|api_?key|"
             r"secret(?:_access)?_key|private_key(?:_id)?|client_secret|session_token|security_token)|token|"
             r"(?:x-)?api[-_]?key|x-auth-token|access_token|refresh_token|auth_token|id_token|hf_token)\b")
_Q = r"(?:&quot;|&#x27;|&#39;|\\?[\"'])?"  # a quote: raw, JSON-escaped or HTML-escaped
_A = r"(?:\x1b\[[0-9;]*m)*"  # ANSI colour codes IPython puts inside highlighted traceback lines

_NAME_RULE = re.compile(r"(?:" + _ENV_NAME + "|" + _KEY_NAME + r")" + _A + _Q + r"\]?\s*" + _A + r"[:=](?!=)" + _A
                        + r"\s*" + _A + _Q + r"(?P<s>[^\s\"'<>&,;)}\]\x1b\\]+)")
_AKIA = r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}"
_B40 = r"(?<![A-Za-z0-9/+])(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
_LTAI = r"\bLTAI[0-9A-Za-z]{12,28}\b"  # Alibaba Cloud AccessKey id; its secret is 30 letters and digits
_A30 = r"(?<![A-Za-z0-9])(?P<s>[A-Za-z0-9]{30})(?![A-Za-z0-9])"

# Each pattern names the secret part ``s``; only that part is masked.
_PATTERNS: list[re.Pattern[str]] = [
    # PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, PGP, plain); an unterminated block runs to the end.
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<s>.*?)"
               r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S),
    # HTTP Authorization / Proxy-Authorization headers, in raw, JSON/dict and HTML-escaped forms.
    re.compile(r"(?:Proxy-)?Authorization" + _A + _Q + r"\s*[:=]\s*" + _A + _Q +
               r"(?P<s>(?:(?:Bearer|Basic|Token|Digest|AWS4-HMAC-SHA256|ApiKey|Key)\s+)?[^\s\"'<>&,}\x1b]+)", re.I),
    # NAME=value / NAME: value / "NAME": "value" for secret-looking names (environment dumps too).
    _NAME_RULE,
    # NCCL / CUDA echo their environment: "NCCL_IB_SECRET_KEY set by environment to <value>"
    re.compile(r"(?:" + _ENV_NAME + r")\s+set by environment to\s+(?P<s>\S+)"),
    # .netrc: machine HOST login USER password VALUE
    re.compile(r"\blogin\s+\S+\s+password\s+(?P<s>\S+)"),
    re.compile(r"\b(?P<s>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),  # JWT
    re.compile(r"(?<![\w-])--(?:[a-z0-9]+-)*(?:token|password|passwd|secret|api-key|secret-key|access-key)(?:=|[ \t]+)"
               r"(?P<s>[^\s\"'<>&\x1b-][^\s\"'<>&\x1b]*)", re.I),
    # curl -u user:pass / --user user:pass (wget --password is a flag above)
    re.compile(r"(?:^|\s)(?:-u|--user|--proxy-user)(?:\s+|=)['\"]?[^\s:'\"]*:(?P<s>[^\s'\"<>&]+)"),
    # Well-known token shapes, wherever they appear.
    re.compile(r"\bhf_(?P<s>[A-Za-z0-9]{20,})"),
    re.compile(r"\b(?P<s>nvapi-[A-Za-z0-9_-]{20,})"),
    re.compile(r"\b(?P<s>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,})"),
    re.compile(r"\b(?P<s>github_pat_[A-Za-z0-9_]{40,})"),
    re.compile(r"\b(?P<s>glpat-[A-Za-z0-9_-]{20,})"),
    re.compile(r"\bsk-(?P<s>(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,})"),
    re.compile(r"\b(?P<s>xox[abposr]-[A-Za-z0-9-]{10,})"),
    re.compile(r"\b(?P<s>" + _AKIA + r")\b"),
    re.compile(r"(?P<s>" + _LTAI + ")"),  # Alibaba Cloud AccessKey id
    # kubeconfig: client-key-data (a base64 PEM private key), also in JSON and HTML-escaped forms
    re.compile(r"(?i)client[-_]key[-_]data" + _Q + r"\s*[:=]\s*" + _Q + r"(?P<s>[A-Za-z0-9+/=]{16,})"),
    # a base64-encoded PEM private key anywhere ("-----BEGIN ... PRIVATE KEY" encoded starts LS0tLS1CRUdJTi)
    re.compile(r"(?P<s>LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2})"),
    re.compile(r"\b(?P<s>AIza[0-9A-Za-z_-]{35})"),  # Google API key
    re.compile(r"\b(?P<s>ya29\.[0-9A-Za-z_-]{20,})"),  # Google OAuth access token
    re.compile(r"\b(?P<s>(?:r8|gsk|pplx|dop_v1|doo_v1|dapi|wandb_v1)_?[A-Za-z0-9]{32,})"),  # Replicate, Groq, ...
    re.compile(r"\b(?P<s>dapi[0-9a-f]{32})\b"),  # Databricks
    re.compile(r"\b(?P<s>(?:sk|rk|pk)_live_[0-9A-Za-z]{16,})"),  # Stripe live keys
    re.compile(r"\b(?P<s>npm_[A-Za-z0-9]{36})"),
    re.compile(r"\b(?P<s>pypi-[A-Za-z0-9_-]{50,})"),
    # A bare AWS secret access key (40 chars) beside an access key id, either order, within 200 chars.
    re.compile(_AKIA + r"[\s\S]{0,200}?" + _B40),
    re.compile(_B40 + r"(?=[\s\S]{0,200}?" + _AKIA + ")"),
    # ... and an Alibaba AccessKey secret (30 letters and digits) beside its LTAI id
    re.compile(_LTAI + r"[\s\S]{0,200}?" + _A30),
    re.compile(_A30 + r"(?=[\s\S]{0,200}?" + _LTAI + ")"),
    # Credentials in URLs: scheme://user:password@host (also DSNs: postgres://, redis://, mongodb+srv://)
    re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@\"'<>]*:(?P<s>[^/\s@\"'<>]+)@", re.I),
    # A token in a query string: ?token=..., &api_key=..., &sig=..., X-Amz-Signature=...
    re.compile(r"[?&](?:access_token|token|api_?key|key|sig|signature|X-Amz-Signature|X-Amz-Credential|"
               r"X-Amz-Security-Token|client_secret|password)=(?P<s>[^&\s\"'<>#]+)", re.I),
]
_BARE_AWS = (_PATTERNS[-6], _PATTERNS[-5], _PATTERNS[-4], _PATTERNS[-3])
_PATTERNS.extend(CMDLINE_RULES)  # passwords, tokens and keys typed on command lines (_redact_cmdline.py)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TAG = re.compile(r"<[^>]*>")
_MIN_LITERAL = 6  # secrets shorter than this are only masked where a pattern matches them
_CODE = re.compile(r"[A-Za-z_][\w.]*[\[(]?")
_COUNT = re.compile(r"\d{1,12}(?:\.\d+)?")
_SECRET_WORD = re.compile(r"(?i)passw|passphrase|secret|token|api_?key|apikey|auth|credential|private|access_?key|pwd")
# a secret word right before a quoted value makes it a key: whole words only (not tokenizer, tokens)
_KEYED = re.compile(r"(?i)(?:passw(?:or)?d|passphrase|secrets?|token|api_?key|apikey|auth|credentials?|private_?key|"
                    r"access_?key|pwd)(?![a-z])")
_RELPATH = re.compile(r"(?:\.{1,2}|~)/")
_PATHLIKE = re.compile(r"^(?:/|\.{1,2}/|~/)|/$|\.[A-Za-z]{1,5}$")


# ---------------------------------------------------------------------------------- detect-secrets
@lru_cache(maxsize=1)
def _ds() -> tuple[list[re.Pattern[str]], list[tuple[re.Pattern[str], int]], Any, Any]:
    r"""detect-secrets' regex plugins (their ``denylist`` patterns), keyword regexes and entropy
    scorers. Public IPs are not credentials, the keyword and entropy plugins are applied below.
    The plugins' keyword-style patterns (IBM, Cloudant, SoftLayer: ``(?<=\W)...(key|pwd|pass|token)``)
    try every position of a text; they run only on the lines holding such a word (see ``_spans``)."""
    # deferred: the detector set (detect-secrets, and requests with it) loads on the first text redacted
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class  # deferred: see above
    from detect_secrets.plugins import keyword  # deferred: see above
    from detect_secrets.plugins.base import RegexBasedDetector  # deferred: see above
    from detect_secrets.plugins.high_entropy_strings import (  # deferred: see above
        Base64HighEntropyString,
        HexHighEntropyString,
    )

    regexes: list[re.Pattern[str]] = []
    for cls in get_mapping_from_secret_type_to_class().values():
        if issubclass(cls, RegexBasedDetector) and cls.__name__ not in ("IPPublicDetector", "PrivateKeyDetector"):
            regexes.extend(cls().denylist)
    kw = (list(keyword.CONFIG_DENYLIST_REGEX_TO_GROUP.items())
          + list(keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()))
    return regexes, kw, Base64HighEntropyString(), HexHighEntropyString()


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
    _, _, b64, hx = _ds()
    if '"' not in text and "'" not in text:
        return
    for m in b64.regex.finditer(text):
        s = m.group(2).rstrip("\\")  # detect-secrets' charset holds a backslash: JSON's \" ends the string
        if len(s) < 16 or _UUID.fullmatch(s) or _PATHLIKE.search(s):
            continue
        before = text[max(0, m.start() - 40):m.start()]
        before = before[before.rfind("\n") + 1:]
        keyed = _KEYED.search(before) is not None
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
    from detect_secrets.filters.heuristic import (  # deferred: the detector set, as in _ds
        is_indirect_reference,
        is_templated_secret,
    )

    _, kw, _, _ = _ds()
    for start, line in _lines_with(text, _SECRET_WORD):
        if len(line) > 4000:
            continue
        for rx, group in kw:
            for m in rx.finditer(line):
                a, b = m.span(group)
                quoted = a > 0 and line[a - 1] in "\"'`"
                if not quoted:
                    cut = _KW_END.search(line, a, b)
                    b = cut.start() if cut else b
                value = line[a:b]
                if not value.strip() or MASK in value or is_templated_secret(value) or value.startswith("$"):
                    continue
                if re.search(r"[!=]=", line[m.start():a]):  # a comparison, not an assignment
                    continue
                code = not quoted and (_CODE.fullmatch(value) is not None or is_indirect_reference(line[m.start():]))
                yield start + a, start + b, code


# Text tables (pandas, tabulate, markdown, ``column -t``): a secret-named cell and its value in the next
# cell of a row (``1  API_KEY    Zq9x...``), or a secret-named column header and the cells under it.
_CELL_SEP = r"(?:[ ]{2,}|\t|[ ]*\|[ ]*)"
_HEADER = re.compile(r"(?m)^[ \t|]*[A-Za-z_][\w.-]*(?:" + _CELL_SEP + r"[A-Za-z_][\w.-]*)+[ \t|]*$")
_ROW = re.compile(r"(?m)^[ \t|]*(?:[\w.-]+" + _CELL_SEP + r")?(?P<k>[A-Za-z_][\w.-]*)" + _CELL_SEP
                  + r"(?P<s>[^\s|\"']+)[ \t|]*(?:$|" + _CELL_SEP + ")")
_RULE_LINE = re.compile(r"[ \t|:=+-]*-{3,}[ \t|:=+-]*(?:\n|$)")
_NOT_A_VALUE = re.compile(r"(?i)(?:none|nan|null|true|false|-+|\*+|unset|\d{1,12}(?:\.\d+)?|" + re.escape(MASK) + ")")


def _table_spans(text: str) -> Iterator[tuple[int, int]]:
    if "  " not in text and "|" not in text and "\t" not in text:
        return
    for m in _ROW.finditer(text):
        v = m.group("s")
        if secret_name(m.group("k")) and not _NOT_A_VALUE.fullmatch(v) and not secret_name(v) \
                and not _RULE_LINE.match(text, m.end() + 1):  # not a header ("token  auth" over a rule)
            yield m.span("s")
    for h in _HEADER.finditer(text):
        cols = [c.span() for c in re.finditer(r"[^\s|]+", h.group(0)) if secret_name(c.group(0))]
        if not cols:
            continue
        pipes = "|" in h.group(0)
        ncells = len(h.group(0).split())
        heads = [i for i, c in enumerate(re.split(r"\|", h.group(0))) if secret_name(c.strip())] if pipes else []
        pos = h.end() + 1
        for _ in range(500):  # the rows below, to the first blank line
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            line = text[pos:end]
            if not line.strip() or pos > len(text) or ("|" in line) != pipes or \
                    (not pipes and _HEADER.fullmatch(line)):
                break  # the table ends at a blank line, another kind of line or the next header
            if not pipes and len(line.split()) not in (ncells, ncells + 1):
                break
            if pipes:
                cells, off = [], 0
                for c in line.split("|"):
                    cells.append((off, off + len(c)))
                    off += len(c) + 1
                spans = [cells[i] for i in heads if i < len(cells)]
            else:
                spans = [(c.start(), c.end()) for c in re.finditer(r"\S+", line)
                         if any(c.start() < b and a < c.end() for a, b in cols)]
            for a, b in spans:
                v = line[a:b].strip()
                if v and not set(v) <= set("-:=+ ") and not _NOT_A_VALUE.fullmatch(v):
                    a += len(line[a:b]) - len(line[a:b].lstrip())
                    yield pos + a, pos + a + len(v)
            pos = end + 1


def _aligned_spans(text: str) -> Iterator[tuple[int, int]]:
    """Cells of a right-aligned text table (``df.to_string(index=False)``: every line of the block the
    same width, columns ending where the header's names end, a cell maybe one space from the next or
    holding spaces): the cell after a secret-named cell (a name/value layout) and the cells under a
    secret-named header."""
    if "\n" not in text or "  " not in text:
        return
    lines, pos = [], 0
    for line in text.split("\n"):
        lines.append((pos, line))
        pos += len(line) + 1
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1][1].strip() and len(lines[j + 1][1]) == len(lines[i][1]):
            j += 1
        if j > i and lines[i][1].strip():
            yield from _aligned_block(lines[i:j + 1], secret_name)
        i = j + 1


def _aligned_block(block: list[tuple[int, str]], secret_name) -> Iterator[tuple[int, int]]:
    head = block[0][1]
    ends = [m.end() for m in re.finditer(r"\S+", head)]
    if len(ends) < 2 or not _HEADER.fullmatch(head):   # a header of column names, not a log line
        return
    if any(line[e] != " " for _, line in block[1:] for e in ends[:-1]):
        return   # cells end where the header's names end, one space at least between them
    secret_cols = {k for k, m in enumerate(re.finditer(r"\S+", head)) if secret_name(m.group(0))}
    for start, line in block[1:]:
        cells = []
        for k, e in enumerate(ends):
            a = ends[k - 1] if k else 0
            raw = line[a:e]
            v = raw.strip()
            cells.append((start + a + len(raw) - len(raw.lstrip()), v))
        for k, (at, v) in enumerate(cells):
            name_before = k > 0 and secret_name(cells[k - 1][1])
            if v and (name_before or k in secret_cols) and not _NOT_A_VALUE.fullmatch(v) and not secret_name(v):
                yield at, at + len(v)


def _spans(text: str) -> list[tuple[int, int, bool]]:
    """Every secret span in ``text``: (start, end, is_code). Code spans (``password=pw``) are masked
    in place but never hunted as literals elsewhere."""
    spans: list[tuple[int, int, bool]] = []
    low = None
    for pattern in _PATTERNS:
        hints = CMDLINE_HINTS.get(pattern)
        if hints is not None:
            low = text.lower() if low is None else low
            if not any(h in low for h in hints):
                continue
        for m in pattern.finditer(text):
            value = m.group("s")
            if not value.strip() or value.strip().startswith(MASK):
                continue
            if pattern in _BARE_AWS and not (re.search(r"[a-z]", value) and re.search(r"[A-Z]", value)):
                continue
            if pattern is _NAME_RULE and _COUNT.fullmatch(value) and m.group(0)[:m.start("s") - m.start()].lower(
                    ).rstrip("\"' :=]\x1b").endswith("token"):
                continue  # "#full token: 350592", "token: 108": a count of tokens, not a token
            if pattern is _NAME_RULE and _RELPATH.match(value):
                continue  # password=./pw.txt, --from-file=password=~/pw: a file that holds it
            quoted = m.start("s") > 0 and text[m.start("s") - 1] in "\"'"
            code = pattern is _NAME_RULE and not quoted and _CODE.fullmatch(value.strip()) is not None
            spans.append((*m.span("s"), code))
    regexes, _, _, _ = _ds()
    hinted_lines: list[tuple[int, str]] | None = None
    for rx in regexes:
        if _hinted(rx):
            if hinted_lines is None:
                hinted_lines = list(_lines_with(text, _HINT))
            for off, line in hinted_lines:
                for m in rx.finditer(line):
                    spans.extend((off + a, off + b, False) for a, b in _group_spans(m) if b - a >= 8)
            continue
        for m in rx.finditer(text):
            spans.extend((a, b, False) for a, b in _group_spans(m) if b - a >= 8)
    spans.extend(_keyword_spans(text))
    spans.extend((a, b, False) for a, b in _entropy_spans(text))
    spans.extend((a, b, False) for a, b in _table_spans(text))
    spans.extend((a, b, False) for a, b in _aligned_spans(text))
    return spans


def _merged(spans: list[tuple[int, int, bool]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b, _ in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _values(view: str) -> set[str]:
    return {v for v in (view[a:b].strip() for a, b, code in _spans(view) if not code) if v and MASK not in v}


def _markup_views(text: str) -> set[str]:
    """``text`` without ANSI colour codes, without HTML tags (entities decoded), and with JSON-escaped line
    breaks as lines (a table in a JSON string), where those differ."""
    views = set()
    if "\x1b" in text:
        views.add(_ANSI.sub("", text))
    if "<" in text or "&" in text:
        views.add(html.unescape(_TAG.sub("", _ANSI.sub("", text))))
    if "\\n" in text and ("  " in text or "|" in text):  # a JSON-escaped text table: its rows, one a line
        views.add(text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"'))
        if text[:1] == '"' and text.rstrip()[-1:] == '"':
            try:
                views.add(str(json.loads(text)))
            except ValueError:
                pass
    views.discard(text)
    return views


def find_secrets(text: str) -> set[str]:
    """The secret values the detectors see in ``text``, also after removing ANSI colour codes and
    HTML tags (a highlighted traceback or a pygments-rendered slice splits ``key = "value"``)."""
    found = _values(text)
    for view in _markup_views(text):
        found |= _values(view)
    return found


def _mask_literals(text: str, literals: Iterable[str]) -> tuple[str, int]:
    total = 0
    for secret in sorted(set(literals), key=len, reverse=True):
        if len(secret) < _MIN_LITERAL:
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
    for a, b in _merged(_spans(text)):
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
    text, n = _mask_literals(text, literals)
    return text, total + n


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
        return redact_text(value, extra, markup=False)
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


def redact_json_text(text: str, extra: Iterable[str] = ()) -> tuple[str, int]:
    """Redact a JSON document (the report's ledger copy) value by value, so it stays valid JSON;
    text that does not parse is redacted as text. Returns (text, spans masked); the text is
    re-serialised (two-space indent, as the ledger writes) only when something was masked."""
    try:
        data = json.loads(text)
    except ValueError:
        return redact_text(text, extra)
    extra = set(extra)
    for value in _strings(data):  # a value split across fields (an id here, its secret there) is one text
        extra |= find_secrets(value)
    extra |= find_secrets("\n".join(_strings(data)))
    new, n = _redact_json(data, extra)
    if not n:
        return text, 0
    return json.dumps(new, indent=2, ensure_ascii=False) + "\n", n


def _redact_json(value: Any, extra: set[str]) -> tuple[Any, int]:
    if isinstance(value, str):
        return redact_text(value, extra)
    if isinstance(value, list):
        pairs = [_redact_json(v, extra) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            if _secret_key(key) and _is_value(item):   # {"DB_PASSWORD": "..."}: the name says what the value is
                out[key], n = MASK, 1
            else:
                out[key], n = _redact_json(item, extra)
            total += n
        return out, total
    return value, 0


_WHOLE_NAME = re.compile(r"(?:" + _ENV_NAME + "|" + _KEY_NAME + r")")


def _secret_key(key: Any) -> bool:
    """Whether a JSON key names a secret as a whole (DB_PASSWORD, MY_SERVICE_SECRET, db_password, api_key;
    not max_tokens or eos_token)."""
    return isinstance(key, str) and _WHOLE_NAME.fullmatch(key) is not None


def _is_value(item: Any) -> bool:
    """A value worth masking under a secret's name: non-empty text, not a placeholder (none, null, ***)."""
    return isinstance(item, str) and bool(item.strip()) and not _NOT_A_VALUE.fullmatch(item.strip())


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
                    data[mime], n = _redact_value(value, secrets)
                    total += n
            elif kind == "error":
                out["evalue"], n = redact_text(str(out.get("evalue", "")), secrets, markup=False)
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
    page, n2 = _mask_literals("".join(parts), literals)
    return page, total + n + n2
