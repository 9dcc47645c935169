"""Secret names: is a key the name of a credential, and an argument dump or environment with the values of
such keys masked (what an engine's ``server_args`` or ``/proc/PID/environ`` says, fit to print or store)."""
from __future__ import annotations

import re

MASK = "***REDACTED***"
"""What stands in place of a secret value in anything the kit prints or stores."""
SECRET_MASK = MASK
_SECRET_PART = re.compile(r"(?i)(?:^|[_.-])(?:token|secret|password|passwd|passphrase|pwd|pass|credentials?|apikey|"
                          r"api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|auth|authorization|"
                          r"client[_-]?key(?:[_-]data)?|signature|sig|sas)(?:$|[_.-])|passw(?:or)?d$|PASSWORD|PASSWD")
_NOT_SECRET = re.compile(r"(?i)^(?:eos|bos|pad|unk|sep|cls|mask|max|num|min|start|end)_token|_(?:ids?|len|length|"
                         r"size|count|path|file|dir|limit|usage|budget|map|type|mode)$|^(?:max|num|min)_")
_URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@", re.I)


def secret_name(key: object) -> bool:
    """Is ``key`` the name of a credential (``api_key``, ``HF_TOKEN``, ``NCCL_IB_SECRET_KEY``, ``db-password``)?
    Whole name parts only: ``max_tokens``, ``eos_token``, ``tokenizer_path``, ``password_file`` are not."""
    k = str(key)
    return bool(_SECRET_PART.search(k)) and not _NOT_SECRET.search(k)


def mask_secrets(values: dict) -> dict:
    """``values`` with the value of every credential-named key (:func:`secret_name`) that holds a string
    (not None, "None" or an empty one) replaced by :data:`SECRET_MASK`, and the password of a URL
    (``postgres://u:pw@db``) masked: what an engine's argument dump or environment capture says, fit to print."""
    return {k: (SECRET_MASK if isinstance(v, str) and v.strip() not in ("", "None", "none", "null")
                and secret_name(k) else _URL_CREDENTIALS.sub(r"\1" + SECRET_MASK + "@", v) if isinstance(v, str)
                else v) for k, v in values.items()}
