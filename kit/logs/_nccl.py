"""``NCCL_DEBUG=INFO`` lines (private to ``kit.logs``).

Grammar: ``{host}:{pid}:{tid} [{cudaDev}] NCCL INFO {msg}`` (prefix absent in some pastes; ``NCCL WARN``
likewise). One row per informative message, with a ``kind`` column:

    env         ``NCCL_PROTO set by environment to LL``            -> name, value
    version     ``NCCL version 2.21.5+cuda12.4``                  -> value
    ring        ``Channel 00/16 :    0  1  2  3``                 -> channel, nchannels, ring
    connection  ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read``   -> channel, src, dst, transport, transport_family
    channels    ``2 coll channels, 2 p2p channels, ...``          -> coll_channels, p2p_channels, nvls_channels
    network     ``Using network Socket``                          -> value
    init        ``comm 0x... rank 1 nranks 2 cudaDev 0 busId 89000 - Init COMPLETE`` -> rank, nranks
    warn        any ``NCCL WARN`` message                         -> message

Other INFO messages are counted as known lines but not kept.
"""
from __future__ import annotations

import re
from typing import Any

import pandas as pd

from kit.logs import _records as records
from kit.logs._records import TAKEN, TORN
from kit.redact import SECRET_MASK, secret_name

NCCL_COLUMNS = ("line", "host", "pid", "dev", "kind", "name", "value", "channel", "nchannels", "ring",
                "src", "dst", "transport", "transport_family")

_PREFIX = re.compile(r"(?:(?P<host>\S+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] )?")
_ENV = re.compile(r"(NCCL_\w+) set by environment to (\S+?)\.?$")
_VERSION = re.compile(r"NCCL version (\S+)")
_CHANNELS = re.compile(r"(\d+) (coll|collnet|nvls|p2p) channels(?!( per peer))")
_INIT = re.compile(r"rank (\d+) nranks (\d+) .*Init COMPLETE")



def parse_nccl_line(line: str, lineno: int, pos: int, st) -> int:
    """One line containing ``NCCL`` at ``pos``; returns TAKEN, TORN or 0 (not an NCCL debug line)."""
    tail = line[pos + 5:]
    level = tail[:4]
    if tail[4:5] != " " or level not in ("INFO", "WARN"):
        # e.g. "NCCL ININFO 10-24 ..." where two writers interleaved (vllm PR #27521)
        return TORN if tail.startswith("IN") and not tail.startswith("INFO") else 0
    row: dict[str, Any] = {"line": lineno}
    if pos:
        m = _PREFIX.match(line, 0, pos)
        if m.end() == pos and m.group("host"):
            row["host"] = m.group("host")
            row["pid"] = int(m.group("pid"))
            row["dev"] = int(m.group("dev"))
    msg = tail[5:].rstrip("\r\n ")
    if level == "WARN":
        row["kind"] = "warn"
        row["value"] = msg
        st.nccl.add(row)
        return TAKEN
    if _info_row(msg, row):
        st.nccl.add(row)
    return TAKEN


def _info_row(msg: str, row: dict[str, Any]) -> bool:
    """Fill ``row`` from an INFO message the table keeps; False for one it does not keep."""
    if "set by environment to" in msg:
        m = _ENV.search(msg)
        if m is None:
            return False
        row["kind"], row["name"] = "env", m.group(1)
        row["value"] = SECRET_MASK if secret_name(m.group(1)) else m.group(2)  # NCCL_IB_SECRET_KEY: never repeated
    elif msg.startswith("Channel "):
        return _channel_row(msg, row)
    elif "NCCL version" in msg:
        m = _VERSION.search(msg)
        if m is None:   # "NCCL version" cut before the number
            return False
        row["kind"], row["value"] = "version", m.group(1)
    elif " channels" in msg and "coll channels" in msg:
        row["kind"] = "channels"
        for n, what, _ in _CHANNELS.findall(msg):
            row[f"{what}_channels"] = int(n)
    elif msg.startswith("Using network "):
        row["kind"], row["value"] = "network", msg[len("Using network "):].strip()
    elif "Init COMPLETE" in msg:
        m = _INIT.search(msg)
        if m is None:
            return False
        row["kind"] = "init"
        row["rank"], row["nranks"] = int(m.group(1)), int(m.group(2))
    else:
        return False
    return True


_RING = re.compile(r"Channel (\d+)/(\d+) :\s+((?:\d+\s*)+)$")
_CONN = re.compile(r"Channel (\d+)(?:/\d+)? : (\d+)\[\w+\] -> (\d+)\[\w+\]"
                   r"(?: \[(?:send|receive)\])? via (\S+(?: \S+)*)$")


def _channel_row(msg: str, row: dict[str, Any]) -> bool:
    """A ``Channel ...`` message: a ring order or a connection between two ranks (False: neither)."""
    m = _RING.match(msg)
    if m is not None:
        row["kind"] = "ring"
        row["channel"], row["nchannels"] = int(m.group(1)), int(m.group(2))
        row["ring"] = " ".join(m.group(3).split())
        return True
    m = _CONN.match(msg)
    if m is None:
        return False
    transport = m.group(4)
    row["kind"] = "connection"
    row["channel"] = int(m.group(1))
    row["src"], row["dst"] = int(m.group(2)), int(m.group(3))
    row["transport"] = transport
    row["transport_family"] = _family(transport)
    return True


def _family(transport: str) -> str:
    if transport.startswith("P2P"):
        return "P2P"
    if transport.startswith("SHM") or "shared memory" in transport:
        return "SHM"
    if transport.startswith("NET/IB"):
        return "NET/IB"
    if transport.startswith("NET"):
        return "NET/" + transport.split("/")[1] if "/" in transport else "NET"
    return transport.split("/")[0]


def nccl_summary(df: pd.DataFrame) -> dict[str, Any]:
    """What an investigation asks of NCCL_DEBUG output, from the ``.nccl`` table: NCCL version,
    environment echoes, collective channel count, ring orders, transports (with connection counts),
    network in use, rank count and warnings."""
    out: dict[str, Any] = {"version": None, "env": {}, "channels": None, "rings": [], "transports": {},
                           "network": None, "nranks": None, "warnings": []}
    if df is None or not len(df):
        return out
    kinds = df["kind"]
    v = df.loc[kinds == "version", "value"]
    if len(v):
        out["version"] = str(v.iloc[0])
    env = df.loc[kinds == "env"]
    out["env"] = {str(k): str(val) for k, val in zip(env["name"], env["value"])}
    rings = df.loc[kinds == "ring"]
    if len(rings):
        out["channels"] = int(rings["nchannels"].max())
        out["rings"] = list(dict.fromkeys(str(r) for r in rings["ring"]))
    if "coll_channels" in df.columns:
        cc = df.loc[kinds == "channels", "coll_channels"].dropna()
        if len(cc) and out["channels"] is None:
            out["channels"] = int(cc.max())
    conns = df.loc[kinds == "connection"]
    if len(conns):
        counts = conns["transport"].value_counts()
        out["transports"] = {str(k): int(counts[k]) for k in sorted(counts.index)}
    net = df.loc[kinds == "network", "value"]
    if len(net):
        out["network"] = str(net.iloc[-1])
    if "nranks" in df.columns:
        nr = df.loc[kinds == "init", "nranks"].dropna()
        if len(nr):
            out["nranks"] = int(nr.max())
    out["warnings"] = list(dict.fromkeys(str(w) for w in df.loc[kinds == "warn", "value"]))
    return out


_ENV_ECHO = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (\S+?)\.?\s*$")
_CONNECT = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : \d+\[\w+\] -> \d+\[\w+\](?: \[(?:send|receive)\])? via (\w+)")
_SHM = re.compile(r"NCCL INFO Channel \d+ : \d+\[\w+\] -> \d+\[\w+\] via direct shared memory")


def _said(line: str, lineno: int, st) -> bool:
    """Settings evidence of an NCCL line: an environment echo or the transport of a channel."""
    m = _ENV_ECHO.search(line)
    if m:
        st.say(lineno, "env", ({m.group(1): m.group(2)}, "NCCL echo"), "NCCL environment echo")
        return True
    if _SHM.search(line):
        st.transport("SHM", lineno, line)
        return True
    m = _CONNECT.search(line)
    if m:
        st.transport(m.group(1), lineno, line)
        return True
    return False


_nccl_line = records.first_of(("NCCL I", "NCCL W"), parse_nccl_line, "nccl")


def _line(line: str, lineno: int, st) -> int:
    """An NCCL INFO / WARN debug line; lines with no settings evidence are still read by the notes."""
    said = _said(line, lineno, st)
    r = _nccl_line(line, lineno, st)
    return records.TAKEN_SEE_NOTES if r == TAKEN and not said else r


FORMAT = records.LogFormat("nccl", take=(("NCCL", _line),), tables={"nccl": records.columns()},
                     build=lambda st, warnings: {"nccl": st.nccl.frame(NCCL_COLUMNS)})
