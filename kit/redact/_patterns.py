"""The patterns of secret redaction, each naming the secret part ``s`` (only that part is masked), and the
small regexes the detectors share. Patterns are deliberately broad: a redacted non-secret costs a reader a
second; a leaked token costs a rotation."""
from __future__ import annotations

import re

from kit.redact._cmdline import CMDLINE_RULES
from kit.redact._names import MASK

# Names whose values are secrets. Upper-case environment style: the name ends in a secret word
# (HF_TOKEN, AWS_SECRET_ACCESS_KEY, NCCL_IB_SECRET_KEY, PGPASSWORD; not MAX_TOKENS). Lower-case keys
# are matched whole (password/secret words also with a prefix: db_password, aws_secret_access_key;
# token words not, since eos_token/pad_token are tokenizer settings) and never after ``#``
# (SGLang's ``#token: 108`` is a count, not a secret). ``os.environ["HF_TOKEN"] = ...`` is seen
# through the closing bracket.
ENV_NAME = (r"\b(?=[A-Z])(?:(?:[A-Z0-9]+_)+(?:PASS|PWD)|[A-Z0-9_]*(?:TOKEN|SECRET|SECRET_KEY|PASSWORD|PASSWD|"
             r"PASSPHRASE|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?|AUTH_KEY|SIGNING_KEY|ENCRYPTION_KEY|MASTER_KEY|"
             r"CLIENT_SECRET|CONNECTION_STRING|WEBHOOK_URL|SAS_TOKEN))\b")
KEY_NAME = (r"(?<![#\w/.-])(?i:(?:[a-z0-9]+_)*(?:password|passwd|passphrase|secret|api_?key|"
             r"secret(?:_access)?_key|private_key(?:_id)?|client_secret|session_token|security_token)|token|"
             r"(?:x-)?api[-_]?key|x-auth-token|access_token|refresh_token|auth_token|id_token|hf_token)\b")
_Q = r"(?:&quot;|&#x27;|&#39;|\\?[\"'])?"  # a quote: raw, JSON-escaped or HTML-escaped
_A = r"(?:\x1b\[[0-9;]*m)*"  # ANSI colour codes IPython puts inside highlighted traceback lines

NAME_RULE = re.compile(r"(?:" + ENV_NAME + "|" + KEY_NAME + r")" + _A + _Q + r"\]?\s*" + _A + r"[:=](?!=)" + _A
                        + r"\s*" + _A + _Q + r"(?P<s>[^\s\"'<>&,;)}\]\x1b\\]+)")
_AKIA = r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}"
_B40 = r"(?<![A-Za-z0-9/+])(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
_LTAI = r"\bLTAI[0-9A-Za-z]{12,28}\b"  # Alibaba Cloud AccessKey id; its secret is 30 letters and digits
_A30 = r"(?<![A-Za-z0-9])(?P<s>[A-Za-z0-9]{30})(?![A-Za-z0-9])"

# Each pattern names the secret part ``s``; only that part is masked.
PATTERNS: list[re.Pattern[str]] = [
    # PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, PGP, plain); an unterminated block runs to the end.
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<s>.*?)"
               r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S),
    # HTTP Authorization / Proxy-Authorization headers, in raw, JSON/dict and HTML-escaped forms.
    re.compile(r"(?:Proxy-)?Authorization" + _A + _Q + r"\s*[:=]\s*" + _A + _Q +
               r"(?P<s>(?:(?:Bearer|Basic|Token|Digest|AWS4-HMAC-SHA256|ApiKey|Key)\s+)?[^\s\"'<>&,}\x1b]+)", re.I),
    # NAME=value / NAME: value / "NAME": "value" for secret-looking names (environment dumps too).
    NAME_RULE,
    # NCCL / CUDA echo their environment: "NCCL_IB_SECRET_KEY set by environment to <value>"
    re.compile(r"(?:" + ENV_NAME + r")\s+set by environment to\s+(?P<s>\S+)"),
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
BARE_AWS = (PATTERNS[-6], PATTERNS[-5], PATTERNS[-4], PATTERNS[-3])
PATTERNS.extend(CMDLINE_RULES)  # passwords, tokens and keys typed on command lines (_redact_cmdline.py)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TAG = re.compile(r"<[^>]*>")
MIN_LITERAL = 6  # secrets shorter than this are only masked where a pattern matches them
CODE = re.compile(r"[A-Za-z_][\w.]*[\[(]?")
COUNT = re.compile(r"\d{1,12}(?:\.\d+)?")
SECRET_WORD = re.compile(r"(?i)passw|passphrase|secret|token|api_?key|apikey|auth|credential|private|access_?key|pwd")
# a secret word right before a quoted value makes it a key: whole words only (not tokenizer, tokens)
KEYED = re.compile(r"(?i)(?:passw(?:or)?d|passphrase|secrets?|token|api_?key|apikey|auth|credentials?|private_?key|"
                   r"access_?key|pwd)(?![a-z])")
RELPATH = re.compile(r"(?:\.{1,2}|~)/")
PATHLIKE = re.compile(r"^(?:/|\.{1,2}/|~/)|/$|\.[A-Za-z]{1,5}$")
NOT_A_VALUE = re.compile(r"(?i)(?:none|nan|null|true|false|-+|\*+|unset|\d{1,12}(?:\.\d+)?|" + re.escape(MASK) + ")")
WHOLE_NAME = re.compile(r"(?:" + ENV_NAME + "|" + KEY_NAME + r")")
