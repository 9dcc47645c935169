"""Effective settings of one engine run, from what the engine itself reports (private to ``kit.logs``).

Inputs, each recognised by its content (one file may hold several): SGLang's ``server_args`` dump and the JSON
of ``GET /get_server_info``; vLLM's ``non-default args`` and ``with config:`` lines; the engine process's
environment (``/proc/PID/environ``, ``KEY=VALUE`` lines, ``# launched with`` notes, NCCL's echoes); an
``nvidia-smi topo -m`` capture; and what the log shows the engine did (the attention backend it chose, the
CUDA-graph sizes it captured, custom all-reduce and P2P lines, the running batch and graph of each decode line,
NCCL transports). A log is read by the one scan behind ``kit.logs.read``, which records each value with its
line (``LogData.said``); every value keeps its evidence (file, line, the line itself), so an audit or an A/B
verdict can point at it. ``Settings.effective`` is the normalised view (the same keys for every engine).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

import pandas as pd

from kit.env import parse_topology
from kit.errors import LogFormatError
from kit.logs._api import fetched, read
from kit.logs._records import CLIP, ENV_KEYS, SettingEvidence, Settings, flag_keys, truthy
from kit.redact import mask_secrets
from kit.util import strip_ansi

_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_SERVER_INFO_KEYS = {"tp_size", "attention_backend", "model_path", "disable_cuda_graph", "cuda_graph_max_bs"}


def settings(paths: str | os.PathLike | Iterable, *, engine: str | None = None, host=None) -> Settings:
    """One engine run's effective settings from its log(s), argument dumps, ``/get_server_info`` JSON and
    environment captures (on ``host`` when given: copied, read, the copy deleted; evidence names ``host:path``).
    A file that holds none adds nothing (``sources`` says so); an unreadable one raises LogFormatError. The
    engine: given, else the first argument dump's, else that of the first log that names one."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    st = Settings(engine=engine)
    logged: list[str] = []
    for p in paths:
        if host is None:
            _read_one(Path(p), st, str(p), logged)
        else:
            with fetched(p, host) as (local, label):
                _read_one(Path(local), st, label, logged)
    if st.engine is None and logged:
        st.engine = logged[0]
    _finish(st)
    return st


_HEAD = 1 << 16          # bytes read first to recognise the kind of file
_SMALL = 16 << 20        # environment captures and JSON reports are read whole up to this size


def _read_one(path: Path, st: Settings, name: str, logged: list[str]) -> None:
    """One file, recognised by its content: a process environment, ``/get_server_info`` JSON, an
    ``nvidia-smi topo -m`` capture, ``KEY=VALUE`` lines, else a log read by ``kit.logs.read``."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(_HEAD)
    except OSError as exc:
        raise LogFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if _not_a_log(path, st, name, head, size):
        return
    try:
        data = read(path)
    except LogFormatError as exc:   # readable, but not a log: nothing about settings in it
        st.sources[name] = f"nothing about settings ({str(exc).split(': ', 1)[-1]})"
        return
    if data.engine != "unknown":
        logged.append(data.engine)
    found = _from_log(st, data, name)
    st.sources[name] = ", ".join(dict.fromkeys(found)) or "nothing about settings"


def _not_a_log(path: Path, st: Settings, name: str, head: bytes, size: int) -> bool:
    """Read ``path`` when it is one of the captures that are not logs; True when it was."""
    if b"\0" in head and b"=" in head:
        data = head if size <= _HEAD else path.read_bytes()[:_SMALL]
        env = {}
        for item in data.split(b"\0"):
            k, sep, v = item.decode("utf-8", "replace").partition("=")
            if sep and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                env[k] = v
        _add_env(st, env, name, None, "/proc/PID/environ")
        st.sources[name] = f"process environment ({len(env)} variables)"
        return True
    text_head = head.decode("utf-8", "replace")
    if text_head.lstrip().startswith("{") and size <= _SMALL:
        try:
            obj = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except ValueError:
            obj = None
        if isinstance(obj, dict) and len(_SERVER_INFO_KEYS & set(obj)) >= 2:
            _add_args(st, obj, name, None, "get_server_info JSON", "sglang")
            st.sources[name] = "get_server_info JSON"
            return True
    if size <= _HEAD and "GPU0" in text_head and ("Legend" in text_head or "\tGPU1" in text_head
                                                  or " X " in text_head) and _topology(st, name, text_head):
        return True
    if size <= _HEAD:
        env_like = [ln for ln in text_head.splitlines() if ln.strip() and not ln.startswith("#")]
        if env_like and all(_ENV_LINE.match(ln.strip()) for ln in env_like):
            env = {m.group(1): m.group(2).strip().strip("'\"")
                   for m in (_ENV_LINE.match(ln.strip()) for ln in env_like)}
            _add_env(st, env, name, None, "environment capture")
            st.sources[name] = f"environment capture ({len(env)} variables)"
            return True
    return False


def _topology(st: Settings, name: str, text_head: str) -> bool:
    """An ``nvidia-smi topo -m`` capture: the interconnect and the GPU count; False when it is not one."""
    lines = text_head.splitlines()
    try:
        topo = parse_topology(text_head, source=name)
    except Exception:  # noqa: BLE001 - not a topology after all: read it as a log
        return False
    if topo is None or not topo.gpus:
        return False
    row = next((i for i, ln in enumerate(lines, 1) if re.match(r"GPU0\s+X\b", strip_ansi(ln).strip())), None)
    st.evidence.append(SettingEvidence("topology", topo.kind, name, row, f"nvidia-smi topo -m: {topo.summary}"))
    st.evidence.append(SettingEvidence("gpus", len(topo.gpus), name, row, f"nvidia-smi topo -m: {topo.summary}"))
    st.sources[name] = f"GPU topology ({topo.summary})"
    return True


def _add_env(st: Settings, env: dict, name: str, line: int | None, how: str) -> None:
    for k, v in mask_secrets(env).items():  # a token in an environment capture is never repeated
        st.env[k] = v
        said = f"{k}={v} ({how})"
        st.evidence.append(SettingEvidence(f"env:{k}", v, name, line, said[:CLIP]))
        if k in ENV_KEYS:
            st.evidence.append(SettingEvidence(ENV_KEYS[k], v, name, line, said))
        if k == "NCCL_P2P_DISABLE" and truthy(v):
            st.evidence.append(SettingEvidence("p2p", False, name, line, said))


def _add_args(st: Settings, args: dict, name: str, line: int | None, text: str, engine: str | None) -> None:
    args = mask_secrets(args)  # SGLang's api_key, vLLM's hf_token: never repeated by audit, JSON or report
    st.args.update(args)
    if engine and not st.engine:
        st.engine = engine
    flags = flag_keys()
    for k, v in args.items():
        if k in flags:
            key, fn = flags[k]
            try:
                val = fn(v)
            except (TypeError, ValueError):
                continue
            if val is None:
                continue
            st.evidence.append(SettingEvidence(key, val, name, line, f"{k}={v!r} ({text})"[:CLIP]))
    bs = args.get("cuda_graph_bs") or args.get("cudagraph_capture_sizes")
    if isinstance(bs, str):
        bs = [int(x) for x in re.findall(r"\d+", bs)] or None
    if isinstance(bs, (list, tuple)) and bs and not truthy(args.get("disable_cuda_graph")):
        said = f"cuda_graph_bs={list(bs)} ({text})"[:CLIP]
        st.evidence.append(SettingEvidence("cuda_graph_bs", sorted(int(b) for b in bs), name, line, said))
        st.evidence.append(SettingEvidence("cuda_graph_max_bs", max(int(b) for b in bs), name, line, said))
    if "speculative_algorithm" in args or "speculative_config" in args:
        spec = args.get("speculative_algorithm") or args.get("speculative_config")
        if spec in ("None", ""):
            spec = None
        elif isinstance(spec, str) and "method=" in spec:
            spec = re.search(r"method='?(\w+)", spec).group(1)
        st.evidence.append(SettingEvidence("speculative", spec, name, line, f"speculative={spec!r} ({text})"[:CLIP]))


def _from_log(st: Settings, data, name: str) -> list[str]:
    """The evidence the scan recorded in ``data`` (a :class:`kit.logs.LogData`), in line order, then what
    the tables and the transports say; returns what was found, for ``sources``."""
    found: list[str] = []
    for line, what, payload, label in data.said:
        if what == "value":
            key, value, text = payload
            st.evidence.append(SettingEvidence(key, value, name, line, text))
        elif what == "env":
            _add_env(st, payload[0], name, line, payload[1])
        else:
            _add_args(st, payload[0], name, line, payload[1], payload[2])
        if label:
            found.append(label)
    found += _batch_evidence(st, data, name)
    found += _transport_evidence(st, data.transports, name)
    if len(data.bench):
        engines = sorted({str(e) for e in data.bench["engine"].dropna()}) if "engine" in data.bench else []
        found.append(f"{len(data.bench)} benchmark result(s)" + (f" of {', '.join(engines)}" if engines else ""))
    return found


def _batch_evidence(st: Settings, data, name: str) -> list[str]:
    """The largest running batch of the scheduler lines (the first line that had it) and how many decode
    lines ran without a CUDA graph, from the tables of every row of the engine table that has ``batches``."""
    parts = [(b, f.name) for f in data.formats if f.batches is not None
             for b in [f.batches(data.tables)] if b is not None and len(b[0])]
    if not parts:
        return []
    texts = {fmt: b[1] for b, fmt in parts}
    rows = pd.concat([b[0].assign(fmt=fmt) for b, fmt in parts], ignore_index=True).sort_values("line", kind="stable")
    top = rows.iloc[int(rows["running"].to_numpy(float).argmax())]
    n = int(top["running"])
    st.evidence.append(SettingEvidence("decode_batch_max", n, name, int(top["line"]),
                                texts[top["fmt"]].format(n=n, g=top["graph"])))
    eager = rows[rows["graph"].astype(object) == False]  # noqa: E712 - None (not said) is not eager
    if len(eager):
        first = eager.iloc[0]
        line, text = int(first["line"]), texts[first["fmt"]].format(n=int(first["running"]), g=False)
    else:
        line, text = None, "every decode line ran a CUDA graph"
    st.evidence.append(SettingEvidence("eager_decode_lines", len(eager), name, line, text))
    return ["decode batches"]


def _transport_evidence(st: Settings, transports: dict, name: str) -> list[str]:
    """NCCL's transports between GPUs, and what they say about P2P."""
    if not transports:
        return []
    fams = set(transports)
    first = min(transports.values())
    st.evidence.append(SettingEvidence("nccl_transports", fams, name, first[0],
                                "; ".join(f"{k} (line {v[0]})" for k, v in sorted(transports.items()))))
    if "P2P" in fams:
        st.evidence.append(SettingEvidence("p2p", True, name, transports["P2P"][0], transports["P2P"][1]))
    elif "SHM" in fams:
        ln, text = transports["SHM"]
        st.evidence.append(SettingEvidence("p2p", False, name, ln, text + " (NCCL connects GPUs through host memory)"))
    return ["NCCL transports"]


def _finish(st: Settings) -> None:
    """Order the evidence so that the engine's own report decides: argument dumps first, then log
    lines in file order (a later line wins in ``effective``)."""
    st.evidence.sort(key=lambda e: e.line is not None)
    eff = st.effective
    if "cuda_graph" not in eff and eff.get("cuda_graph_bs"):
        bs = st.get("cuda_graph_bs")
        st.evidence.append(SettingEvidence("cuda_graph", True, bs.file, bs.line, bs.text))
