"""Credentials typed on command lines, as a host echoes them back (``!cat run.sh``, a job's log, ``set -x``).

Each rule names the secret span ``s`` only. Short options are ambiguous (``-p`` is a port for ssh
and docker run, a password for sshpass and mysql), so every short-option rule is tied to the tools
that give it that meaning; long options (``--password``, ``--api-key``, ``--token``...) mean the same
everywhere. Values that are references, not secrets, stay: ``$VAR``, ``$(cmd)``, ``${VAR}``,
``%VAR%``, ``{{ template }}``, ``<placeholder>``, an empty ``''``. A value in quotes is taken whole;
quotes may be raw, JSON-escaped (``\\"``) or HTML-escaped (``&quot;``, ``&#x27;``), since the same
line is checked in cell sources, outputs and exported pages.
"""
from __future__ import annotations

import re

# An optional opening quote in any of the forms a line takes in a notebook, its JSON or its page.
_Q = r"(?:&quot;|&#x27;|&#39;|\\?[\"'])?"
# A value: not a reference (``$X``, ``%X%``, ``{{x}}``, ``<x>``, ``-next-option``), up to a space,
# a quote, a shell separator or markup.
_V = _Q + r"(?P<s>(?![$%{\-]|&lt;|&quot;|&#)[^\s\"'<>&;|`\\\x1b]+)"
# The rest of one shell command: no pipe, no newline (bounded, so a long log line costs little).
_SAME = r"[^\n|]{0,300}?"
_SP = r"[ \t]+"


def _T(*names: str | tuple[str, str]) -> str:
    """Command words: each name (a literal, or (literal, regex tail)) not preceded by a letter, digit,
    dot or dash, so ``/usr/bin/mysql`` counts and ``xmysql`` does not. The check is a lookbehind
    *after* the literal: a pattern that starts with literals lets the regex engine skip ahead to
    their first letters (10x faster over a 2 MB trace than a boundary written first)."""
    alts = []
    for n in names:
        word, tail = (n, "") if isinstance(n, str) else n
        w = re.escape(word)
        alts.append(f"{w}(?<![\\w.-]{w}){tail}")
    return "(?:" + "|".join(alts) + ")"


# Rule -> words one of which a text must hold (lower-cased) for the rule to run on it: a substring
# test is far cheaper than a regex pass over a 2 MB trace or widget state that holds no command line.
HINTS: dict[re.Pattern[str], tuple[str, ...]] = {}


def _rx(pattern: str, flags: int = 0, hints: tuple[str, ...] = ()) -> re.Pattern[str]:
    rx = re.compile(pattern, flags)
    if hints:
        HINTS[rx] = tuple(h.lower() for h in hints)
    return rx


def _ci(*words: str) -> str:
    """Words in any case, spelt out per letter (``[Cc][Oo]...``) rather than by re.I, which stops the
    regex engine from skipping ahead to the possible first letters."""
    return "(?:" + "|".join("".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in w)
                            for w in words) + ")"


# Tools whose ``-p VALUE`` (or ``-pVALUE``) is a password, some only within their ``login`` command.
_LOGIN_TOOLS = (_T("docker", "podman", "buildah", "skopeo", "nerdctl", "oras", ("crane", r"(?:\s+auth)?"),
                   ("helm", r"\s+registry"), ("regctl", r"\s+registry"), ("singularity", r"\s+remote"),
                   ("apptainer", r"\s+remote"), "az", "oc", "cf", "argocd", "jf", ("jfrog", r"(?:\s+rt)?"), "gitlab",
                   "ngc") + r"\s+login\b")
_P_TOOLS = _T("sshpass", ("twine", r"\s+upload"), "mongo", "mongosh", "mongodump", "mongorestore", "mongoexport",
              "mongoimport", "cqlsh", "cypher-shell", ("psexec", r"(?:\.exe)?"), "rdesktop") + r"\b"
_MYSQL = _T("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump", "mysqlsh",
            ("mariadb", "(?:-dump|-admin)?")) + r"\b"

CMDLINE_RULES: list[re.Pattern[str]] = [
    # sshpass -p PASS / -pPASS; docker/podman/... login -p PASS; twine upload -p; mongo(sh) -p PASS ...
    _rx(_LOGIN_TOOLS + _SAME + r"[ \t]-p(?:" + _SP + "|=)?" + _V, hints=("login",)),
    _rx(_P_TOOLS + _SAME + r"[ \t]-p(?:" + _SP + "|=)?" + _V,
        hints=("sshpass", "twine", "mongo", "cqlsh", "cypher-shell", "psexec", "rdesktop")),
    # mysql -pPASS (attached only: ``mysql -p dbname`` prompts for the password and opens dbname)
    _rx(_MYSQL + _SAME + r"[ \t]-p" + _V, hints=("mysql", "mariadb")),
    # redis-cli -a PASS / --pass PASS; PuTTY tools -pw PASS; LDAP tools -w PASS; sqlcmd/bcp -P PASS
    _rx(_T("redis-cli") + r"\b" + _SAME + r"[ \t](?:-a|--pass|--user\s+\S+\s+--pass)(?:" + _SP + "|=)" + _V),
    _rx(_T(*[(n, r"(?:\.exe)?") for n in ("pscp", "plink", "psftp", "putty", "kitty")]) + r"\b" + _SAME + r"[ \t]-pw"
        + _SP + _V),
    _rx(_T(("ldap", "(?:search|add|modify|delete|passwd|whoami|compare|modrdn|exop)")) + r"\b" + _SAME + r"[ \t]-[ys]?w"
        + _SP + _V),
    _rx(_T(*[(n, r"(?:\.exe)?") for n in ("sqlcmd", "bcp", "osql")], ("mosquitto_", "(?:pub|sub|rr)")) + r"\b" + _SAME
        + r"[ \t]-P" + _SP + _V),
    # archives: zip/unzip -P PASS, 7z/rar -pPASS
    _rx(_T("zip", "unzip", "zipcloak", "fcrackzip") + r"\b" + _SAME + r"[ \t]-P" + _SP + _V, hints=("zip",)),
    _rx(_T("7z", "7za", "7zz", "7zr", "rar", "unrar") + r"\b" + _SAME + r"[ \t]-p" + _V, hints=("7z", "rar")),
    # openssl -pass pass:X / -passin pass:X / -passout pass:X / -password pass:X / enc -k X
    _rx(r"-(?<![\w-]-)(?:pass(?:in|out|word)?)" + _SP + _Q + r"pass:(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    _rx(_T("openssl") + r"\s+enc\b" + _SAME + r"[ \t]-k" + _SP + _V),
    # keytool / jarsigner -storepass X -keypass X
    _rx(r"-(?<![\w-]-)(?:src|dest|new)?(?:storepass|keypass)" + _SP + _V),
    # ssh-keygen -N new-passphrase / -P old-passphrase (-N '' is no passphrase)
    _rx(_T("ssh-keygen") + r"\b" + _SAME + r"[ \t]-[NP]" + _SP + _V),
    # htpasswd -b FILE USER PASS / -nb USER PASS
    _rx(_T("htpasswd") + _SP + r"(?:-[a-mo-zA-Z]*b[a-mo-zA-Z]*" + _SP + r")(?:-\w+" + _SP + r")*\S+" + _SP
        + r"\S+" + _SP + _V),
    _rx(_T("htpasswd") + _SP + r"-\w*(?:nb|bn)\w*" + _SP + r"(?:-\w+" + _SP + r")*\S+" + _SP + _V),
    # smbclient -U user%PASS (Samba and Impacket style), lftp -u user,PASS
    _rx(r"-(?<![\w-]-)(?:U|-user(?:name)?)(?:" + _SP + "|=)" + _Q + r"[^\s%'\"]+%" + r"(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    _rx(_T("lftp") + r"\b" + _SAME + r"[ \t]-u" + _SP + _Q + r"[^\s,'\"]+,(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    # Oracle tools: sqlplus user/PASS@db
    _rx(_T("sqlplus", "sqlldr", "expdp", "impdp", "exp", "imp", "rman", "dgmgrl") + r"\b(?:" + _SP + r"-\w+)*" + _SP
        + _Q
        + r"[A-Za-z_][\w$#]*/(?P<s>(?![$%{])[^\s@/\"'<>&;|\\\x1b]+)",
        hints=("sqlplus", "sqlldr", "expdp", "impdp", "exp", "imp", "rman", "dgmgrl")),
    # curl -u/--user/-U/--proxy-user user:PASS, httpie -a/--auth user:PASS, skopeo/podman --creds user:PASS
    _rx(r"-(?<![^ \t\n]-)(?:u|-user|U|-proxy-user|-auth|-(?:src-|dest-)?creds)(?:" + _SP + "|=)" + _Q
        + r"[^\s:'\"]*:(?P<s>(?![$%{])[^\s\"'<>&;|\\\x1b]+)"),
    _rx(_T("http", "https", "xh", "xhs") + r"\b" + _SAME + r"[ \t]-a" + _SP + _Q
        + r"[^\s:'\"]+:(?P<s>[^\s\"'<>&;|\\\x1b]+)",
        hints=("http", "xh")),
    # curl -E/--cert file:PASS
    _rx(r"-(?<![^ \t\n]-)(?:E|-cert)" + _SP + _Q + r"[^\s:'\"]+:(?P<s>(?![$%{])[^\s\"'<>&;|\\\x1b]+)"),
    # long options of any tool: --password, --db-password, --api-key, --api_key, --token, --hf-token,
    # --auth-token, --client-secret, --passphrase, --authkey ... (not --password-file, --max-tokens)
    _rx(r"--(?<![\w-]--)(?!(?:eos|bos|pad|unk|sep|cls|mask|stop|special)[-_]token)(?:[a-z0-9]+[-_])*"
        r"(?:token|password|passwd|passphrase|pwd|pw|secret|api[-_]?key|secret[-_]key|access[-_]key|auth[-_]?key|"
        r"auth|pat|bearer|credential)(?:=|" + _SP + r")" + _V, re.I),
    # single-dash long options (Go, Java, InfluxDB, x11vnc): -password X, -token=X, -apikey X
    _rx(r"-(?<![\w-]-)(?:password|passwd|pwd|token|apikey|api-key|secret|auth-token)(?:=|" + _SP + r")" + _V, re.I),
    # Java system properties: -Ddb.password=X, -Dapi.token=X
    _rx(r"-(?<![\w-]-)D[\w.-]*(?i:password|passwd|secret|token|apikey|api[._-]key)=" + _V),
    # helm --set auth.password=X, --set-string redis.auth.token=X
    _rx(r"--set(?:-string)?(?:" + _SP + "|=)" + _Q
        + r"(?:[\w.-]+,)*[\w.-]*(?i:password|secret|token|apikey|api[._-]?key)="
        + r"(?P<s>(?![$%{])[^\s,\"'<>&;|\\\x1b]+)"),
    # Windows: /password:X, xfreerdp /p:X
    _rx(r"/(?<![\w/]/)(?i:password|pass|pwd):" + _V),
    _rx(_T("xfreerdp", "wlfreerdp", "sdl-freerdp") + r"\b" + _SAME + r"[ \t]/p:" + _V),
    _rx(_T("net", "NET") + _SP + r"use\b" + _SAME + r"\\\\\S+" + _SP + _V + r"(?=" + _SP + r"/user:)", re.I,
        hints=("/user:",)),
    # login commands whose secret is a positional argument
    _rx(_T("wandb") + _SP + r"login\b" + _SAME + r"[ \t]" + _Q
        + r"(?P<s>(?:local-)?[0-9a-f]{40,}|[A-Za-z0-9_-]{40,86})\b"),
    _rx(_T("vault") + _SP + r"login\b(?:" + _SP + r"-\S+)*" + _SP + _Q
        + r"(?P<s>(?![$%{\-])[^\s=\"'<>&;|\\\x1b]{8,})(?=[\s\"'&\\]|$)"),
    _rx(_T("ngrok") + _SP + r"(?:config" + _SP + r"add-authtoken|authtoken)" + _SP + _V),
    _rx(_T("doctl") + _SP + r"auth" + _SP + r"init\b" + _SAME + r"[ \t]-t" + _SP + _V),
    _rx(_T("huggingface-cli", ("hf", r"(?:" + _SP + r"auth)?")) + _SP + r"login\b" + _SAME + r"[ \t]" + _Q
        + r"(?P<s>hf_[A-Za-z0-9]{20,})"),
    _rx(_T("poetry") + _SP + r"config" + _SP + r"(?:http-basic\.\S+" + _SP + r"\S+|pypi-token\.\S+)" + _SP + _V),
    _rx(_T("npm") + _SP + r"config" + _SP + r"set" + _SP + r"\S*_auth(?:Token)?(?:" + _SP + "|=)" + _V),
    _rx(r":_auth(?:Token)?=" + _V),
    _rx(_T("aws") + _SP + r"configure" + _SP + r"set" + _SP
        + r"(?:[\w.-]+\.)?(?:aws_secret_access_key|aws_session_token)"
        + _SP + _V),
    _rx(_T("mc") + _SP + r"(?:alias" + _SP + r"set|config" + _SP + r"host" + _SP + r"add)" + _SP + r"\S+" + _SP + r"\S+"
        + _SP + r"\S+" + _SP + _V),
    _rx(_T("rabbitmqctl") + _SP + r"(?:add_user|change_password)" + _SP + r"\S+" + _SP + _V),
    _rx(_T("nmcli") + r"\b" + _SAME + r"[ \t](?:password|wifi-sec\.psk|802-1x\.password)" + _SP + _V),
    _rx(_T("wpa_passphrase") + _SP + _Q + r"[^\s'\"]+" + _Q + _SP + _V),
    # a secret piped or fed to a command that reads it from stdin
    _rx(r"(?:echo(?<![\w-]echo)|printf(?<![\w-]printf))(?:" + _SP + r"-[a-zA-Z]+)*(?:" + _SP + r"'%s(?:\\n)?')?" + _SP
        + _V + r"(?:" + _Q + r")?" + r"[ \t]*\|[ \t]*(?=(?:sudo\b[^\n|]*[ \t]-S\b|[^\n|]*--password-stdin|"
        r"[^\n|]*--with-token|passwd\b[^\n|]*--stdin|chpasswd|[^\n|]*\blogin\b))",
        hints=("echo", "printf")),
    _rx(r"(?:sudo\b[^\n|<]*[ \t]-S\b|--password-stdin|--with-token|chpasswd)[^\n|<]*<<<" + _SP + "?" + _V),
    # user:pass@ with a token-shaped user and no password (https://TOKEN@github.com)
    _rx(r"http(?<!\whttp)s?://(?P<s>(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,})@"),
    # provider token shapes that command lines carry
    _rx(r"(?P<s>dckr(?<!\wdckr)_(?:pat|oat)_[A-Za-z0-9_-]{20,})"),
    _rx(r"(?P<s>hv(?<!\whv)[sbr]\.[A-Za-z0-9_-]{20,})"),
    _rx(r"(?P<s>tskey(?<!\wtskey)-(?:auth|api|client)-[A-Za-z0-9_-]{10,})"),
    _rx(r"(?P<s>shp(?<!\wshp)(?:at|ca|pa|ss)_[0-9a-fA-F]{32})"),
    _rx(r"(?P<s>lin_api(?<!\wlin_api)_[A-Za-z0-9]{32,})"),
    _rx(r"(?P<s>pnu(?<!\wpnu)_[A-Za-z0-9]{30,})"),
    _rx(r"(?P<s>sntrys(?<!\wsntrys)_[A-Za-z0-9+/=_-]{40,})"),
    _rx(r"(?P<s>xapp(?<!\wxapp)-\d-[A-Za-z0-9-]{20,})"),
    _rx(r"(?P<s>ATATT(?<!\wATATT)[A-Za-z0-9_=-]{30,})"),
    _rx(r"(?P<s>figd(?<!\wfigd)_[A-Za-z0-9_-]{30,})"),
    # HTTP headers that carry a token (Authorization is in the main rules)
    _rx(_ci("private-token", "x-vault-token", "x-goog-api-key", "ocp-apim-subscription-key", "x-rapidapi-key",
            "x-gitlab-token", "x-figma-token", "x-access-token", "x-shopify-access-token", "dd-api-key",
            "dd-application-key", "x-master-key", "x-api-token", "cookie") + _Q + r"[ \t]*:[ \t]*" + _V,
        hints=("token", "key", "cookie")),
    # NAME=VALUE for vendor variables without a secret word at the end (KAGGLE_KEY)
    _rx(r"(?:KAGGLE_KEY|COMET_KEY|CIRCLE_TOKEN_ID|ansible_(?:\w+_)?pass)" + _Q + r"[ \t]*[=:][ \t]*" + _V),
]
