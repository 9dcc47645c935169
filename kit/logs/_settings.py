"""Effective settings of one engine run, from what the engine itself reports (private to ``kit.logs``).

Inputs, each recognised by its content (one file may hold several):

- SGLang's ``server_args=ServerArgs(...)`` / ``server_args={...}`` dump (values after the engine's own
  ``__post_init__``) and the JSON of ``GET /get_server_info`` (a flat dict of the same fields);
- vLLM's ``non-default args: {...}`` and ``Initializing a V1 LLM engine ... with config: ...`` lines;
- the engine process's environment: ``/proc/PID/environ`` (NUL-separated) or ``KEY=VALUE`` lines,
  ``# launched with KEY=VALUE`` notes and NCCL's ``NCCL_X set by environment to V`` echoes;
- what the log shows the engine did: the attention backend it chose, the CUDA-graph batch sizes it
  captured, custom all-reduce and P2P lines, ``cuda graph: True/False`` and the running batch of
  each SGLang decode line (vLLM: ``Running: N reqs``), NCCL transports, protocol and algorithm.

Every value keeps its evidence (file, line, the line itself), so an audit or an A/B verdict can
point at it. :func:`settings` returns :class:`Settings`; ``Settings.effective`` is the normalised
view (the same key names for both engines) that experiments compare.
"""
from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kit.errors import LogFormatError
from kit.util import mask_secrets, strip_ansi

__all__ = ["Evidence", "Settings", "settings", "NORMALISED"]

_CLIP = 240
_DUMP_NOTE = re.compile(r"\((?:server_args dump|vLLM engine config|get_server_info JSON|launch note|NCCL echo|"
                        r"environment capture|/proc/PID/environ)\)$")

# Normalised keys (what an experiment compares) and where each comes from.
NORMALISED = {
    "attention_backend": "server args / get_server_info attention_backend; log: the backend the engine chose",
    "custom_all_reduce": "False when the args disable it or the log says the engine disabled it",
    "p2p": "False when NCCL_P2P_DISABLE=1, the engine reports no P2P, or NCCL connects GPUs only via SHM/NET",
    "cuda_graph": "False when disable_cuda_graph / enforce_eager, else True when graphs were captured",
    "cuda_graph_bs": "captured batch sizes (log, or the args' cuda_graph_bs / cudagraph_capture_sizes)",
    "cuda_graph_max_bs": "largest captured batch size",
    "decode_batch_max": "largest running batch in the decode lines",
    "eager_decode_lines": "decode lines that ran without a CUDA graph (SGLang 'cuda graph: False')",
    "overlap_schedule": "SGLang overlap scheduler (not disable_overlap_schedule); vLLM async_scheduling",
    "tokenizer_mode": "'slow' means the Python tokenizer",
    "speculative": "speculative algorithm / method, None when off",
    "torch_compile": "enable_torch_compile / compilation level",
    "tp_size": "tensor-parallel size",
    "nccl_proto": "NCCL_PROTO from the engine's environment or NCCL's echo (plain INFO prints no per-call choice)",
    "nccl_algo": "NCCL_ALGO from the engine's environment or NCCL's echo",
    "nccl_transports": "transport families NCCL connected ranks with (P2P, SHM, NET ...)",
    "topology": "GPU interconnect from nvidia-smi topo -m: NVLink, PCIe-only, mixed",
    "gpus": "GPUs in the topology capture",
}

# dest of a command-line flag -> (normalised key, value transform)
FLAG_KEYS: dict[str, tuple[str, Any]] = {
    "disable_custom_all_reduce": ("custom_all_reduce", lambda v: not _truthy(v)),
    "disable_cuda_graph": ("cuda_graph", lambda v: not _truthy(v)),
    "enforce_eager": ("cuda_graph", lambda v: not _truthy(v)),
    "attention_backend": ("attention_backend", lambda v: _norm_backend(v)),
    "disable_overlap_schedule": ("overlap_schedule", lambda v: not _truthy(v)),
    "async_scheduling": ("overlap_schedule", lambda v: _truthy(v)),
    "tokenizer_mode": ("tokenizer_mode", lambda v: v),
    "speculative_algorithm": ("speculative", lambda v: v),
    "enable_torch_compile": ("torch_compile", lambda v: _truthy(v)),
    "tp_size": ("tp_size", lambda v: int(v) if v is not None else None),
    "tensor_parallel_size": ("tp_size", lambda v: int(v) if v is not None else None),
    "cuda_graph_max_bs": ("cuda_graph_max_bs", lambda v: int(v) if v is not None else None),
}
ENV_KEYS = {"NCCL_PROTO": "nccl_proto", "NCCL_ALGO": "nccl_algo"}


def _truthy(v) -> bool:
    return v is True or str(v).lower() in ("1", "true", "yes", "on")


def _norm_backend(v) -> str | None:
    if v is None:
        return None
    s = re.sub(r"(?i)\s+attention$", "", str(v).strip()).lower().replace("attentionbackendenum.", "").replace(" ", "_")
    return {"flash_attention": "flash_attn", "flash_attn": "flash_attn", "flashattention": "flash_attn",
            "flash_attn_v1": "flash_attn"}.get(s, s)


@dataclass(frozen=True)
class Evidence:
    """One reported value: ``key`` (normalised or raw), ``value``, the ``file`` and ``line`` it came from
    (line None for a whole-file source) and the ``text`` of that line (clipped)."""

    key: str
    value: Any
    file: str
    line: int | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict:
        v = self.value
        if isinstance(v, (set, tuple)):
            v = sorted(v) if isinstance(v, set) else list(v)
        return {"key": self.key, "value": v, "where": self.where, "text": self.text}

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


@dataclass
class Settings:
    """What one engine run reported about itself.

    ``args``: the engine's argument dump (SGLang server_args / get_server_info, vLLM engine config and
    non-default args), raw keys. ``env``: environment variables of the engine process. ``evidence``:
    every value with its file and line. ``effective``: normalised keys (:data:`NORMALISED`) -> value,
    the engine's report winning over the arguments (an engine that disables custom all-reduce on its
    own says so in its log). ``sources``: the files read and what was found in each.
    """

    engine: str | None = None
    args: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    sources: dict = field(default_factory=dict)

    @property
    def effective(self) -> dict:
        out: dict[str, Any] = {}
        for e in self.evidence:
            if e.key in NORMALISED:
                out[e.key] = e.value
        return out

    def get(self, key: str) -> Evidence | None:
        """The last (deciding) evidence for a normalised key, or for ``env:NAME`` / ``arg:NAME``."""
        hit = None
        for e in self.evidence:
            if e.key == key:
                hit = e
        return hit

    @staticmethod
    def key_for(setting: str) -> str | None:
        """The normalised key a changed ``--flag`` or environment variable shows up as (``env:NAME`` for
        other variables), or None when no engine report covers that flag."""
        if setting.startswith("-"):
            return FLAG_KEYS.get(setting.lstrip("-").replace("-", "_"), (None,))[0]
        return ENV_KEYS.get(setting, f"env:{setting}")

    def reported(self, key: str) -> Evidence | None:
        """The evidence of ``key``'s effective value, preferring a line the engine printed about it over an
        argument dump (which says what was asked, not what was decided)."""
        last = self.get(key)
        if last is None:
            return None
        said = [e for e in self.all(key) if e.value == last.value and not _DUMP_NOTE.search(e.text)]
        return said[-1] if said else last

    def all(self, key: str) -> list[Evidence]:
        return [e for e in self.evidence if e.key == key]

    def to_dict(self) -> dict:
        eff = {}
        for k, v in self.effective.items():
            eff[k] = sorted(v) if isinstance(v, set) else v
        return {"engine": self.engine, "effective": eff, "args": _jsonable(self.args), "env": dict(self.env),
                "evidence": [e.to_dict() for e in self.evidence], "sources": dict(self.sources)}

    def __repr__(self) -> str:
        eff = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.effective.items()))
        return f"Settings(engine={self.engine}, {eff or 'nothing reported'}; {len(self.env)} env, " \
               f"{len(self.evidence)} evidence lines from {len(self.sources)} file(s))"


def _short(v) -> str:
    if isinstance(v, (list, set, tuple)):
        v = sorted(v) if isinstance(v, set) else list(v)
        return "[" + ",".join(map(str, v[:6])) + (",..." if len(v) > 6 else "") + "]"
    return repr(v)


def _jsonable(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        out[k] = v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
    return out


# ---------------------------------------------------------------------------------------------
# line patterns
# ---------------------------------------------------------------------------------------------
_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_LAUNCHED = re.compile(r"^#\s*launched with ([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
_NCCL_ENV = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (\S+?)\.?\s*$")
_NCCL_CONN = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : \d+\[\w+\] -> \d+\[\w+\]"
                        r"(?: \[(?:send|receive)\])? via (\w+)")
_NCCL_SHM = re.compile(r"NCCL INFO Channel \d+ : \d+\[\w+\] -> \d+\[\w+\] via direct shared memory")
_SG_DEFAULT_BACKEND = re.compile(r"Attention backend not (?:set|specified)\. Use (\w+) backend by default|"
                                 r"[Uu]sing (\w+) (?:attention )?backend instead|Use (\w+) as attention backend")
_VL_BACKEND = re.compile(r"Using (?:AttentionBackendEnum\.)?([\w ]+?) backend(?: on V1 engine| out of potential)?\.?")
_CAPTURE_BS = re.compile(r"Capture (?:cuda|CUDA|cpu|npu) graph bs \[([\d,\s]*)\]")
_VL_CAPTURE_SIZES = re.compile(r"['\"]?cudagraph_capture_sizes['\"]?\s*[:=]\s*\[([\d,\s]*)\]")
_DECODE = re.compile(r"Decode batch[^#]*#running-req: (\d+).*?cuda graph: (True|False)")
_VL_RUNNING = re.compile(r"Running: (\d+) reqs")
_CUSTOM_AR_OFF = re.compile(r"[Cc]ustom all-?reduce is disabled(.*)")
_P2P_OFF = re.compile(r"(?:lacks GPU P2P capability|P2P test failed|P2P is disabled|peer access is not supported)")
_SLOW_TOKENIZER = re.compile(r"(?:Using a slow tokenizer|tokenizer_mode='slow'|use_fast=False)")
_SERVER_INFO_KEYS = {"tp_size", "attention_backend", "model_path", "disable_cuda_graph", "cuda_graph_max_bs"}


def settings(paths: str | os.PathLike | Iterable, *, engine: str | None = None) -> Settings:
    """Read one engine run's effective settings from its log(s), argument dumps, ``/get_server_info``
    JSON and environment captures (see the module docstring). Files that hold none of these add
    nothing (``sources`` says so); an unreadable file raises :class:`kit.errors.LogFormatError`."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    st = Settings(engine=engine)
    for p in paths:
        _read_one(Path(p), st)
    _finish(st)
    return st


_HEAD = 1 << 16          # bytes read first to recognise the kind of file
_SMALL = 16 << 20        # environment captures and JSON reports are read whole up to this size


def _read_one(path: Path, st: Settings) -> None:
    name = str(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(_HEAD)
    except OSError as exc:
        raise LogFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if b"\0" in head and b"=" in head:
        data = head if size <= _HEAD else path.read_bytes()[:_SMALL]
        env = {}
        for item in data.split(b"\0"):
            k, sep, v = item.decode("utf-8", "replace").partition("=")
            if sep and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                env[k] = v
        _add_env(st, env, name, None, "/proc/PID/environ")
        st.sources[name] = f"process environment ({len(env)} variables)"
        return
    text_head = head.decode("utf-8", "replace")
    if text_head.lstrip().startswith("{") and size <= _SMALL:
        try:
            obj = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except ValueError:
            obj = None
        if isinstance(obj, dict) and len(_SERVER_INFO_KEYS & set(obj)) >= 2:
            _add_args(st, obj, name, None, "get_server_info JSON", "sglang")
            st.sources[name] = "get_server_info JSON"
            return
    if size <= _HEAD and "GPU0" in text_head and ("Legend" in text_head or "\tGPU1" in text_head or " X " in text_head):
        from kit.env import parse_topology

        lines = text_head.splitlines()
        try:
            topo = parse_topology(text_head, source=name)
        except Exception:  # noqa: BLE001 - not a topology after all: read it as a log
            topo = None
        if topo is not None and topo.gpus:
            row = next((i for i, ln in enumerate(lines, 1) if re.match(r"GPU0\s+X\b", strip_ansi(ln).strip())), None)
            st.evidence.append(Evidence("topology", topo.kind, name, row, f"nvidia-smi topo -m: {topo.summary}"))
            st.evidence.append(Evidence("gpus", len(topo.gpus), name, row, f"nvidia-smi topo -m: {topo.summary}"))
            st.sources[name] = f"GPU topology ({topo.summary})"
            return
    if size <= _HEAD:
        env_like = [ln for ln in text_head.splitlines() if ln.strip() and not ln.startswith("#")]
        if env_like and all(_ENV_LINE.match(ln.strip()) for ln in env_like):
            env = {m.group(1): m.group(2).strip().strip("'\"")
                   for m in (_ENV_LINE.match(ln.strip()) for ln in env_like)}
            _add_env(st, env, name, None, "environment capture")
            st.sources[name] = f"environment capture ({len(env)} variables)"
            return
    found: list[str] = []
    with path.open("r", encoding="utf-8", errors="replace") as f:  # streamed: memory holds one line
        _scan_log(f, name, st, found)
    st.sources[name] = ", ".join(dict.fromkeys(found)) or "nothing about settings"


def _add_env(st: Settings, env: dict, name: str, line: int | None, how: str) -> None:
    for k, v in mask_secrets(env).items():  # a token in an environment capture is never repeated
        st.env[k] = v
        st.evidence.append(Evidence(f"env:{k}", v, name, line, f"{k}={v} ({how})"[:_CLIP]))
        if k in ENV_KEYS:
            st.evidence.append(Evidence(ENV_KEYS[k], v, name, line, f"{k}={v} ({how})"))
        if k == "NCCL_P2P_DISABLE" and _truthy(v):
            st.evidence.append(Evidence("p2p", False, name, line, f"{k}={v} ({how})"))


def _add_args(st: Settings, args: dict, name: str, line: int | None, text: str, engine: str | None) -> None:
    args = mask_secrets(args)  # SGLang's api_key, vLLM's hf_token: never repeated by audit, JSON or report
    st.args.update(args)
    if engine and not st.engine:
        st.engine = engine
    for k, v in args.items():
        if k in FLAG_KEYS:
            key, fn = FLAG_KEYS[k]
            try:
                val = fn(v)
            except (TypeError, ValueError):
                continue
            if val is None:
                continue
            st.evidence.append(Evidence(key, val, name, line, f"{k}={v!r} ({text})"[:_CLIP]))
    bs = args.get("cuda_graph_bs") or args.get("cudagraph_capture_sizes")
    if isinstance(bs, str):
        bs = [int(x) for x in re.findall(r"\d+", bs)] or None
    if isinstance(bs, (list, tuple)) and bs and not _truthy(args.get("disable_cuda_graph")):
        st.evidence.append(Evidence("cuda_graph_bs", sorted(int(b) for b in bs), name, line,
                                    f"cuda_graph_bs={list(bs)} ({text})"[:_CLIP]))
        st.evidence.append(Evidence("cuda_graph_max_bs", max(int(b) for b in bs), name, line,
                                    f"cuda_graph_bs={list(bs)} ({text})"[:_CLIP]))
    if "speculative_algorithm" in args or "speculative_config" in args:
        spec = args.get("speculative_algorithm") or args.get("speculative_config")
        if spec in ("None", ""):
            spec = None
        elif isinstance(spec, str) and "method=" in spec:
            spec = re.search(r"method='?(\w+)", spec).group(1)
        st.evidence.append(Evidence("speculative", spec, name, line, f"speculative={spec!r} ({text})"[:_CLIP]))


def _vllm_args(line: str) -> dict | None:
    p = line.find("non-default args:")
    if p >= 0:
        body = line[p + len("non-default args:"):].strip()
        try:
            v = ast.literal_eval(body)
            return v if isinstance(v, dict) else None
        except (ValueError, SyntaxError):
            from kit.logs._sglang import parse_server_args

            try:
                return parse_server_args(body)
            except LogFormatError:
                return None
    p = line.find("with config:")
    if p >= 0:
        from kit.logs._sglang import parse_server_args

        try:
            return parse_server_args("ServerArgs(" + line[p + len("with config:"):].strip().rstrip(".") + ")")
        except LogFormatError:
            return None
    return None


@dataclass
class _Scan:
    """What :func:`_scan_log` collects across lines before it becomes evidence."""
    st: Settings
    name: str
    found: list[str]
    decode_max: tuple[int, int, str] | None = None
    eager: list[tuple[int, str]] = field(default_factory=list)
    transports: dict[str, tuple[int, str]] = field(default_factory=dict)
    shm_direct: tuple[int, str] | None = None

    def add(self, key: str, value, i: int, clip: str) -> None:
        self.st.evidence.append(Evidence(key, value, self.name, i, clip))

    def batch(self, n: int, i: int, clip: str) -> None:
        """A running batch of ``n`` requests: keep the largest."""
        if self.decode_max is None or n > self.decode_max[0]:
            self.decode_max = (n, i, clip)


def _args_line(sc: _Scan, i: int, line: str, clip: str) -> bool:
    """A launch note, an SGLang ``server_args`` dump or a vLLM engine config; True when the line was one."""
    m = _LAUNCHED.match(line)
    if m:
        _add_env(sc.st, {m.group(1): m.group(2)}, sc.name, i, "launch note")
        sc.found.append("launch environment")
        return True
    if "server_args=" in line:
        from kit.logs._sglang import parse_server_args

        try:
            args = parse_server_args(line)
        except LogFormatError:
            args = None
        if args:
            _add_args(sc.st, args, sc.name, i, "server_args dump", "sglang")
            sc.found.append("server_args dump")
        return True
    if "non-default args:" in line or "with config:" in line:
        args = _vllm_args(line)
        if args:
            if "tensor_parallel_size" in args:
                args.setdefault("tp_size", args["tensor_parallel_size"])
            _add_args(sc.st, args, sc.name, i, "vLLM engine config", "vllm")
            sc.found.append("vLLM engine config")
            mm = _VL_CAPTURE_SIZES.search(line)
            if mm and mm.group(1).strip():
                bs = sorted(int(x) for x in mm.group(1).split(",") if x.strip())
                sc.add("cuda_graph_bs", bs, i, clip)
                sc.add("cuda_graph_max_bs", max(bs), i, clip)
        return True
    return False


def _nccl_line(sc: _Scan, i: int, line: str, clip: str) -> bool:
    """An NCCL environment echo or channel connection; True when the line was one."""
    m = _NCCL_ENV.search(line)
    if m:
        _add_env(sc.st, {m.group(1): m.group(2)}, sc.name, i, "NCCL echo")
        sc.found.append("NCCL environment echo")
        return True
    if _NCCL_SHM.search(line):
        sc.transports.setdefault("SHM", (i, clip))
        sc.shm_direct = sc.shm_direct or (i, clip)
        return True
    m = _NCCL_CONN.search(line)
    if m:
        sc.transports.setdefault(m.group(1), (i, clip))
        return True
    return False


def _graph_line(sc: _Scan, i: int, line: str, clip: str) -> bool:
    """Custom all-reduce off, P2P off, or the CUDA graph batch sizes captured; True when the line was one."""
    if _CUSTOM_AR_OFF.search(line):
        sc.add("custom_all_reduce", False, i, clip)
        sc.found.append("custom all-reduce line")
        if _P2P_OFF.search(line):
            sc.add("p2p", False, i, clip)
        return True
    if _P2P_OFF.search(line):
        sc.add("p2p", False, i, clip)
        sc.found.append("P2P line")
        return True
    m = _CAPTURE_BS.search(line)
    if m:
        bs = sorted(int(x) for x in m.group(1).split(",") if x.strip())
        if bs:
            sc.add("cuda_graph", True, i, clip)
            sc.add("cuda_graph_bs", bs, i, clip)
            sc.add("cuda_graph_max_bs", max(bs), i, clip)
            sc.found.append("captured graph sizes")
        return True
    return False


def _batch_line(sc: _Scan, i: int, line: str, clip: str) -> bool:
    """An SGLang decode batch or a vLLM running count; True when the line was one."""
    if "Decode batch" in line:
        m = _DECODE.search(line)
        if m:
            sc.batch(int(m.group(1)), i, clip)
            if m.group(2) == "False":
                sc.eager.append((i, clip))
        return True
    if "Running:" in line and "reqs" in line:
        m = _VL_RUNNING.search(line)
        if m:
            sc.batch(int(m.group(1)), i, clip)
        return True
    return False


def _backend_line(sc: _Scan, i: int, line: str, clip: str) -> bool:
    """The attention backend chosen; True when the line said it."""
    m = _SG_DEFAULT_BACKEND.search(line)
    if m:
        sc.add("attention_backend", _norm_backend(m.group(1) or m.group(2) or m.group(3)), i, clip)
        sc.found.append("attention backend line")
        return True
    if "ttention" in line or "Using " in line:
        m = _VL_BACKEND.search(line)
        if m and ("ttention" in line or "on V1 engine" in line or "Flash" in m.group(1) or "MLA" in m.group(1)):
            b = m.group(1).replace("Flash Attention", "flash_attn").replace("FlashInfer", "flashinfer")
            if "MoE" not in line and "sampling" not in line.lower() and "runner" not in line:
                sc.add("attention_backend", _norm_backend(b), i, clip)
                sc.found.append("attention backend line")
                return True
    return False


def _scan_log(lines: Iterable[str], name: str, st: Settings, found: list[str]) -> None:
    sc = _Scan(st, name, found)
    for i, raw in enumerate(lines, 1):
        raw = raw.rstrip("\r\n")
        line = strip_ansi(raw) if "\x1b" in raw else raw
        clip = line.strip()[:_CLIP]
        if _args_line(sc, i, line, clip):
            continue
        if "NCCL" in line and _nccl_line(sc, i, line, clip):
            continue
        if _graph_line(sc, i, line, clip) or _batch_line(sc, i, line, clip):
            continue
        if "backend" in line and _backend_line(sc, i, line, clip):
            continue
        if _SLOW_TOKENIZER.search(line):
            sc.add("tokenizer_mode", "slow", i, clip)
            found.append("slow tokenizer line")
    _decode_evidence(sc)
    _transport_evidence(sc)


def _decode_evidence(sc: _Scan) -> None:
    """The largest decode batch seen and how many decode lines ran without a CUDA graph."""
    if sc.decode_max is None:
        return
    n, i, clip = sc.decode_max
    sc.add("decode_batch_max", n, i, clip)
    sc.found.append("decode batches")
    eager = sc.eager
    sc.st.evidence.append(Evidence("eager_decode_lines", len(eager), sc.name, eager[0][0] if eager else None,
                                   eager[0][1] if eager else "every decode line ran a CUDA graph"))


def _transport_evidence(sc: _Scan) -> None:
    """NCCL's transports between GPUs, and what they say about P2P."""
    transports = sc.transports
    if not transports:
        return
    fams = set(transports)
    first = min(transports.values())
    sc.add("nccl_transports", fams, first[0],
           "; ".join(f"{k} (line {v[0]})" for k, v in sorted(transports.items())))
    sc.found.append("NCCL transports")
    if "P2P" in fams:
        sc.add("p2p", True, transports["P2P"][0], transports["P2P"][1])
    elif sc.shm_direct or "SHM" in fams:
        ln, text = transports.get("SHM", sc.shm_direct)
        sc.add("p2p", False, ln, text + " (NCCL connects GPUs through host memory)")


def _finish(st: Settings) -> None:
    """Order the evidence so that the engine's own report decides: argument dumps first, then log
    lines in file order (a later line wins in ``effective``)."""
    def rank(e: Evidence) -> int:
        return 0 if e.line is None else 1
    st.evidence.sort(key=rank)
    eff = st.effective
    if "cuda_graph" not in eff and eff.get("cuda_graph_bs"):
        bs = st.get("cuda_graph_bs")
        st.evidence.append(Evidence("cuda_graph", True, bs.file, bs.line, bs.text))
