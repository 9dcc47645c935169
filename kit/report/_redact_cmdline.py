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
# A command word: the tool itself or its path (``/usr/bin/mysql``), not a suffix of another word.
_CMD = r"(?<![\w.-])(?:[\w./-]*/)?"


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# Tools whose ``-p VALUE`` (or ``-pVALUE``) is a password, some only within their ``login`` command.
_LOGIN_TOOLS = (r"(?:docker|podman|buildah|skopeo|nerdctl|oras|crane(?:\s+auth)?|helm\s+registry|regctl\s+registry|"
                r"(?:singularity|apptainer)\s+remote|az|oc|cf|argocd|jf|jfrog(?:\s+rt)?|gitlab|ngc)\s+login\b")
_P_TOOLS = r"(?:sshpass|twine\s+upload|mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|cqlsh|cypher-shell|psexec(?:\.exe)?|rdesktop)\b"
_MYSQL = r"(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mysqlsh|mariadb(?:-dump|-admin)?)\b"

CMDLINE_RULES: list[re.Pattern[str]] = [
    # sshpass -p PASS / -pPASS; docker/podman/... login -p PASS; twine upload -p; mongo(sh) -p PASS ...
    _rx(_CMD + r"(?:" + _LOGIN_TOOLS + "|" + _P_TOOLS + r")" + _SAME + r"[ \t]-p(?:" + _SP + "|=)?" + _V),
    # mysql -pPASS (attached only: ``mysql -p dbname`` prompts for the password and opens dbname)
    _rx(_CMD + _MYSQL + _SAME + r"[ \t]-p" + _V),
    # redis-cli -a PASS / --pass PASS; PuTTY tools -pw PASS; LDAP tools -w PASS; sqlcmd/bcp -P PASS
    _rx(_CMD + r"redis-cli\b" + _SAME + r"[ \t](?:-a|--pass|--user\s+\S+\s+--pass)(?:" + _SP + "|=)" + _V),
    _rx(_CMD + r"(?:pscp|plink|psftp|putty|kitty)(?:\.exe)?\b" + _SAME + r"[ \t]-pw" + _SP + _V),
    _rx(_CMD + r"ldap(?:search|add|modify|delete|passwd|whoami|compare|modrdn|exop)\b" + _SAME + r"[ \t]-[ys]?w" + _SP + _V),
    _rx(_CMD + r"(?:sqlcmd|bcp|osql|mosquitto_(?:pub|sub|rr))(?:\.exe)?\b" + _SAME + r"[ \t]-P" + _SP + _V),
    # archives: zip/unzip -P PASS, 7z/rar -pPASS
    _rx(_CMD + r"(?:zip|unzip|zipcloak|fcrackzip)\b" + _SAME + r"[ \t]-P" + _SP + _V),
    _rx(_CMD + r"(?:7z|7za|7zz|7zr|rar|unrar)\b" + _SAME + r"[ \t]-p" + _V),
    # openssl -pass pass:X / -passin pass:X / -passout pass:X / -password pass:X / enc -k X
    _rx(r"(?<![\w-])-(?:pass(?:in|out|word)?)" + _SP + _Q + r"pass:(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    _rx(_CMD + r"openssl\s+enc\b" + _SAME + r"[ \t]-k" + _SP + _V),
    # keytool / jarsigner -storepass X -keypass X
    _rx(r"(?<![\w-])-(?:src|dest|new)?(?:storepass|keypass)" + _SP + _V),
    # ssh-keygen -N new-passphrase / -P old-passphrase (-N '' is no passphrase)
    _rx(_CMD + r"ssh-keygen\b" + _SAME + r"[ \t]-[NP]" + _SP + _V),
    # htpasswd -b FILE USER PASS / -nb USER PASS
    _rx(_CMD + r"htpasswd" + _SP + r"(?:-[a-mo-zA-Z]*b[a-mo-zA-Z]*" + _SP + r")(?:-\w+" + _SP + r")*\S+" + _SP
        + r"\S+" + _SP + _V),
    _rx(_CMD + r"htpasswd" + _SP + r"-\w*(?:nb|bn)\w*" + _SP + r"(?:-\w+" + _SP + r")*\S+" + _SP + _V),
    # smbclient -U user%PASS (Samba and Impacket style), lftp -u user,PASS
    _rx(r"(?<![\w-])(?:-U|--user(?:name)?)(?:" + _SP + "|=)" + _Q + r"[^\s%'\"]+%" + r"(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    _rx(_CMD + r"lftp\b" + _SAME + r"[ \t]-u" + _SP + _Q + r"[^\s,'\"]+,(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    # Oracle tools: sqlplus user/PASS@db
    _rx(_CMD + r"(?:sqlplus|sqlldr|expdp|impdp|exp|imp|rman|dgmgrl)\b(?:" + _SP + r"-\w+)*" + _SP + _Q
        + r"[A-Za-z_][\w$#]*/(?P<s>(?![$%{])[^\s@/\"'<>&;|\\\x1b]+)"),
    # curl -u/--user/-U/--proxy-user user:PASS, httpie -a/--auth user:PASS, skopeo/podman --creds user:PASS
    _rx(r"(?:^|[ \t])(?:-u|--user|-U|--proxy-user|--auth|--(?:src-|dest-)?creds)(?:" + _SP + "|=)" + _Q
        + r"[^\s:'\"]*:(?P<s>(?![$%{])[^\s\"'<>&;|\\\x1b]+)"),
    _rx(_CMD + r"(?:http|https|xh|xhs)\b" + _SAME + r"[ \t]-a" + _SP + _Q + r"[^\s:'\"]+:(?P<s>[^\s\"'<>&;|\\\x1b]+)"),
    # curl -E/--cert file:PASS
    _rx(r"(?:^|[ \t])(?:-E|--cert)" + _SP + _Q + r"[^\s:'\"]+:(?P<s>(?![$%{])[^\s\"'<>&;|\\\x1b]+)"),
    # long options of any tool: --password, --db-password, --api-key, --api_key, --token, --hf-token,
    # --auth-token, --client-secret, --passphrase, --authkey ... (not --password-file, --max-tokens)
    _rx(r"(?<![\w-])--(?!(?:eos|bos|pad|unk|sep|cls|mask|stop|special)[-_]token)(?:[a-z0-9]+[-_])*(?:token|password|passwd|passphrase|pwd|pw|secret|api[-_]?key|"
        r"secret[-_]key|access[-_]key|auth[-_]?key|auth|pat|bearer|credential)(?:=|" + _SP + r")" + _V, re.I),
    # single-dash long options (Go, Java, InfluxDB, x11vnc): -password X, -token=X, -apikey X
    _rx(r"(?<![\w-])-(?:password|passwd|pwd|token|apikey|api-key|secret|auth-token)(?:=|" + _SP + r")" + _V, re.I),
    # Java system properties: -Ddb.password=X, -Dapi.token=X
    _rx(r"(?<![\w-])-D[\w.-]*(?i:password|passwd|secret|token|apikey|api[._-]key)=" + _V),
    # helm --set auth.password=X, --set-string redis.auth.token=X
    _rx(r"--set(?:-string)?(?:" + _SP + "|=)" + _Q + r"(?:[\w.-]+,)*[\w.-]*(?i:password|secret|token|apikey|api[._-]?key)="
        + r"(?P<s>(?![$%{])[^\s,\"'<>&;|\\\x1b]+)"),
    # Windows: /password:X, xfreerdp /p:X
    _rx(r"(?<![\w/])/(?i:password|pass|pwd):" + _V),
    _rx(_CMD + r"(?:xfreerdp|wlfreerdp|sdl-freerdp)\b" + _SAME + r"[ \t]/p:" + _V),
    _rx(_CMD + r"net" + _SP + r"use\b" + _SAME + r"\\\\\S+" + _SP + _V + r"(?=" + _SP + r"/user:)", re.I),
    # login commands whose secret is a positional argument
    _rx(_CMD + r"wandb" + _SP + r"login\b" + _SAME + r"[ \t]" + _Q + r"(?P<s>(?:local-)?[0-9a-f]{40,}|[A-Za-z0-9_-]{40,86})\b"),
    _rx(_CMD + r"vault" + _SP + r"login\b(?:" + _SP + r"-\S+)*" + _SP + _Q + r"(?P<s>(?![$%{\-])[^\s=\"'<>&;|\\\x1b]{8,})(?=[\s\"'&\\]|$)"),
    _rx(_CMD + r"ngrok" + _SP + r"(?:config" + _SP + r"add-authtoken|authtoken)" + _SP + _V),
    _rx(_CMD + r"doctl" + _SP + r"auth" + _SP + r"init\b" + _SAME + r"[ \t]-t" + _SP + _V),
    _rx(_CMD + r"(?:huggingface-cli|hf(?:" + _SP + r"auth)?)" + _SP + r"login\b" + _SAME + r"[ \t]" + _Q
        + r"(?P<s>hf_[A-Za-z0-9]{20,})"),
    _rx(_CMD + r"poetry" + _SP + r"config" + _SP + r"(?:http-basic\.\S+" + _SP + r"\S+|pypi-token\.\S+)" + _SP + _V),
    _rx(_CMD + r"npm" + _SP + r"config" + _SP + r"set" + _SP + r"\S*_auth(?:Token)?(?:" + _SP + "|=)" + _V),
    _rx(r":_auth(?:Token)?=" + _V),
    _rx(_CMD + r"aws" + _SP + r"configure" + _SP + r"set" + _SP + r"(?:[\w.-]+\.)?(?:aws_secret_access_key|aws_session_token)"
        + _SP + _V),
    _rx(_CMD + r"mc" + _SP + r"(?:alias" + _SP + r"set|config" + _SP + r"host" + _SP + r"add)" + _SP + r"\S+" + _SP + r"\S+"
        + _SP + r"\S+" + _SP + _V),
    _rx(_CMD + r"rabbitmqctl" + _SP + r"(?:add_user|change_password)" + _SP + r"\S+" + _SP + _V),
    _rx(_CMD + r"nmcli\b" + _SAME + r"[ \t](?:password|wifi-sec\.psk|802-1x\.password)" + _SP + _V),
    _rx(_CMD + r"wpa_passphrase" + _SP + _Q + r"[^\s'\"]+" + _Q + _SP + _V),
    # a secret piped or fed to a command that reads it from stdin
    _rx(r"(?<![\w-])(?:echo|printf)(?:" + _SP + r"-[a-zA-Z]+)*(?:" + _SP + r"'%s(?:\\n)?')?" + _SP + _V + r"(?:" + _Q + r")?"
        + r"[ \t]*\|[ \t]*(?=(?:sudo\b[^\n|]*[ \t]-S\b|[^\n|]*--password-stdin|[^\n|]*--with-token|passwd\b[^\n|]*--stdin|"
        r"chpasswd|[^\n|]*\blogin\b))"),
    _rx(r"(?:sudo\b[^\n|<]*[ \t]-S\b|--password-stdin|--with-token|chpasswd)[^\n|<]*<<<" + _SP + "?" + _V),
    # user:pass@ with a token-shaped user and no password (https://TOKEN@github.com)
    _rx(r"\bhttps?://(?P<s>(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,})@"),
    # provider token shapes that command lines carry
    _rx(r"\b(?P<s>dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,})"),
    _rx(r"\b(?P<s>hv[sbr]\.[A-Za-z0-9_-]{20,})"),
    _rx(r"\b(?P<s>tskey-(?:auth|api|client)-[A-Za-z0-9_-]{10,})"),
    _rx(r"\b(?P<s>(?:shpat|shpca|shppa|shpss)_[0-9a-fA-F]{32})"),
    _rx(r"\b(?P<s>lin_api_[A-Za-z0-9]{32,})"),
    _rx(r"\b(?P<s>pnu_[A-Za-z0-9]{30,})"),
    _rx(r"\b(?P<s>sntrys_[A-Za-z0-9+/=_-]{40,})"),
    _rx(r"\b(?P<s>xapp-\d-[A-Za-z0-9-]{20,})"),
    _rx(r"\b(?P<s>ATATT[A-Za-z0-9_=-]{30,})"),
    _rx(r"\b(?P<s>figd_[A-Za-z0-9_-]{30,})"),
    # HTTP headers that carry a token (Authorization is in the main rules)
    _rx(r"(?<![\w-])(?i:private-token|x-vault-token|x-goog-api-key|ocp-apim-subscription-key|x-rapidapi-key|"
        r"x-gitlab-token|x-figma-token|x-access-token|x-shopify-access-token|dd-api-key|dd-application-key|"
        r"x-master-key|x-api-token|cookie)" + _Q + r"[ \t]*:[ \t]*" + _V),
    # NAME=VALUE for vendor variables without a secret word at the end (KAGGLE_KEY)
    _rx(r"\b(?:KAGGLE_KEY|COMET_KEY|CIRCLE_TOKEN_ID|ansible_(?:\w+_)?pass)" + _Q + r"[ \t]*[=:][ \t]*" + _V),
]
