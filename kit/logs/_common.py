"""Lines any engine prints about the machine it runs on (private to ``kit.logs``): custom all-reduce
disabled, no P2P between GPUs, the slow (Python) tokenizer, and the ``# launched with KEY=VALUE`` notes
the kit writes at the top of a log it started. A row of the engine table that names no engine.
"""
from __future__ import annotations

import re

from kit.logs import _records as records

_CUSTOM_AR_OFF = re.compile(r"[Cc]ustom all-?reduce is disabled(.*)")
_P2P_OFF = re.compile(r"(?:lacks GPU P2P capability|P2P test failed|P2P is disabled|peer access is not supported)")
_SLOW_TOKENIZER = re.compile(r"(?:Using a slow tokenizer|tokenizer_mode='slow'|use_fast=False)")
_LAUNCHED = re.compile(r"^#\s*launched with ([A-Za-z_][A-Za-z0-9_]*)=(\S*)")


def _custom_ar_off(line: str, lineno: int, st) -> int:
    """The engine disabled its custom all-reduce: a warning, and settings evidence (P2P too when it says so)."""
    st.warnings.append(f"line {lineno}: the engine disabled its custom all-reduce (it does not run on more "
                       "than two PCIe-only GPUs): every TP all-reduce goes through NCCL")
    if _CUSTOM_AR_OFF.search(line):
        text = records.clip(line)
        st.say(lineno, "value", ("custom_all_reduce", False, text), "custom all-reduce line")
        if _P2P_OFF.search(line):
            st.say(lineno, "value", ("p2p", False, text), None)
    return records.TAKEN


def _says(regex: re.Pattern, key: str, value, found: str):
    """A note: a line that ``regex`` finds says ``key`` is ``value``."""
    def note(line: str, lineno: int, st) -> bool:
        if not regex.search(line):
            return False
        st.say(lineno, "value", (key, value, records.clip(line)), found)
        return True
    return note


_p2p_off = _says(_P2P_OFF, "p2p", False, "P2P line")
_slow_tokenizer = _says(_SLOW_TOKENIZER, "tokenizer_mode", "slow", "slow tokenizer line")


def _launched(line: str, lineno: int, st) -> bool:
    m = _LAUNCHED.match(line)
    if m is None:
        return False
    st.say(lineno, "env", ({m.group(1): m.group(2)}, "launch note"), "launch environment")
    return True


FORMAT = records.LogFormat(
    "common",
    take=(("ustom allreduce is disabled", _custom_ar_off), ("ustom all-reduce is disabled", _custom_ar_off)),
    notes=(("launched with", _launched), ("P2P", _p2p_off), ("peer access", _p2p_off),
           ("slow tokenizer", _slow_tokenizer), ("tokenizer_mode='slow'", _slow_tokenizer),
           ("use_fast=False", _slow_tokenizer)))
