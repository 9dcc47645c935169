"""vLLM log lines (private to ``kit.logs``): the periodic throughput line (V0, V1, current), the
speculative-decoding lines of every version and the version banner.

A line may carry the logger prefix (``INFO 10-16 19:05:47 metrics.py:367] `` in old releases,
``(APIServer pid=1) INFO 05-15 03:35:13 [loggers.py:271] `` since ~0.10, ANSI-coloured on a TTY)
or none at all (pastes). Anything else in front of the message means two writers interleaved on one
line: the line is *torn*, skipped and counted.
"""
from __future__ import annotations

import ast
import re
from typing import Any

import pandas as pd

from kit.errors import LogFormatError
from kit.logs import _records as records
from kit.logs._checks import check_values, check_vllm_spec
from kit.logs._records import TAKEN, TORN
from kit.logs._sglang import parse_server_args
from kit.logs._spec import flag_after_idle
from kit.logs._table import pairs

PREFIX = re.compile(
    r"(?:\((?P<proc>[^)]*?) pid=(?P<pid>\d+)\) )?"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"\[?[\w.]+:\d+\] )?"
)
_ENGINE = re.compile(r"(?:Engine (?P<eng>\d+): |(?P<agg>\d+) Engines Aggregated: )$")
_CFG = {  # what the engine-config line (V1 "with config: ...", "non-default args: {...}") says -> our keys
    "tp_size": re.compile(r"\btensor_parallel_size['\"]?\s*[=:]\s*(\d+)"),
    "pp_size": re.compile(r"\bpipeline_parallel_size['\"]?\s*[=:]\s*(\d+)"),
    "num_speculative_tokens": re.compile(r"\bnum_spec(?:ulative)?_tokens['\"]?\s*[=:]\s*(\d+)"),
    "speculative_algorithm": re.compile(r"speculative_config['\"]?\s*[=:]\s*[^\n]*?\bmethod['\"]?\s*[=:]\s*['\"](\w+)"),
    "quantization": re.compile(r"\bquantization['\"]?\s*[=:]\s*['\"]?([\w-]+)"),
    "model": re.compile(r"\bmodel['\"]?\s*[=:]\s*['\"]([^'\"]+)"),
    "enforce_eager": re.compile(r"\benforce_eager['\"]?\s*[=:]\s*(True|False)"),
}


def parse_config(line: str) -> dict[str, Any]:
    """Engine settings from a vLLM config line (``Initializing a V1 LLM engine (v0.11.0) with config:
    model=..., tensor_parallel_size=8, ..., speculative_config=SpeculativeConfig(method='mtp', ...,
    num_spec_tokens=3)`` or ``non-default args: {'tensor_parallel_size': 8, ...}``): tp_size,
    num_speculative_tokens, speculative_algorithm, quantization, model, ... (only those present)."""
    out: dict[str, Any] = {}
    for key, rx in _CFG.items():
        m = rx.search(line)
        if m:
            v = m.group(1)
            out[key] = int(v) if v.isdigit() else (v == "True") if v in ("True", "False") else v
    if "quantization" in out and out["quantization"] == "None":
        out["quantization"] = None
    return out


VERSION = re.compile(r"(?:vLLM API server version |LLM engine \(v|vLLM version )(\d+\.\d+[\w.+-]*)")
_PER_POS = re.compile(r"Per-position acceptance rate: ((?:nan|[0-9.]+)(?:, (?:nan|[0-9.]+))*)")

THROUGHPUT_COLUMNS = ("time", "line", "engine_index", "prompt_throughput", "generation_throughput",
                      "running", "waiting", "gpu_kv_cache_usage")


def _prefix(line: str, pos: int, row: dict) -> bool:
    """Parse the logger prefix in ``line[:pos]`` into ``row``; False if it is not a clean prefix."""
    if not pos:
        row["time"] = None
        return True
    m = PREFIX.match(line, 0, pos)   # all optional: it always matches, maybe nothing
    rest = line[m.end():pos]
    row["time"] = m.group("ts")
    if m.group("proc") is not None:
        row["process"] = m.group("proc")
    if rest:
        e = _ENGINE.match(rest)
        if e is None:
            return False
        row["engine_index"] = int(e.group("eng")) if e.group("eng") is not None else None
        if e.group("agg") is not None:
            row["engines_aggregated"] = int(e.group("agg"))
    return True


def parse_throughput(line: str, lineno: int, pos: int, st) -> int:
    """``[Engine 000: ]Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s, ...``"""
    row: dict[str, Any] = {}
    if not _prefix(line, pos, row):
        return TORN
    row["line"] = lineno
    body = line[pos:].rstrip("\r\n .")
    if not pairs(body, row, strict=False):
        return TORN
    row["prompt_throughput"] = row.pop("avg_prompt_throughput", None)
    row["generation_throughput"] = row.pop("avg_generation_throughput", None)
    if row["generation_throughput"] is None:
        return TORN
    st.throughput.add(row)
    st.last_gen_throughput = row["generation_throughput"]
    st.last_gen_line = lineno
    return TAKEN


# each variant's printed fields (snake case) of the record's columns
_SPEC_FIELDS = {
    "v1": {"accepted_tokens": "accepted", "draft_tokens": "drafted"},
    "v0": {"k": "number_of_speculative_tokens", "accepted_tokens": "number_of_accepted_tokens",
           "draft_tokens": "number_of_draft_tokens", "emitted_tokens": "number_of_emitted_tokens",
           "system_efficiency": "system_efficiency"},
    "v1-early": {"accepted_tokens": "number_of_accepted_tokens", "draft_tokens": "number_of_draft_tokens"},
}


def parse_spec(line: str, lineno: int, pos: int, st) -> int:
    """``SpecDecoding metrics: ...`` (V1) or ``Speculative metrics: ...`` (V0, early V1), values as printed
    (normalised after the scan, when version and k are known: ``_spec.py``)."""
    row: dict[str, Any] = {}
    if not _prefix(line, pos, row):
        return TORN
    row["line"] = lineno
    body = line[pos:].rstrip("\r\n ")
    head, _, body = body.partition(": ")
    if body.endswith(",") or body.endswith("."):
        body = body[:-1]
    per_pos = None
    m = _PER_POS.search(body)
    if m is not None:
        per_pos = tuple(float(x) for x in m.group(1).split(", "))
        body = body[:m.start()] + body[m.end():]
    fields: dict[str, Any] = {}
    if not pairs(body, fields, strict=False):
        return TORN
    if head.startswith("SpecDecoding"):
        variant = "v1"
    else:
        variant = "v0" if "system_efficiency" in fields or "number_of_emitted_tokens" in fields else "v1-early"
    rate = fields.get("draft_acceptance_rate")
    if variant == "v1":
        rate = fields.get("avg_draft_acceptance_rate", rate)
    for col, printed in _SPEC_FIELDS[variant].items():
        row[col] = fields.get(printed)
    if rate is None and row.get("accepted_tokens") is None:
        return TORN
    row["variant"] = variant
    row["printed_accept_rate"] = rate
    row["printed_accept_len"] = fields.get("mean_acceptance_length")
    row["per_position"] = per_pos
    if "current_speculative_depth" in fields:
        row["k"] = fields["current_speculative_depth"]
    # The throughput line is logged right before the spec line by the same log() call.
    row["gen_throughput"] = st.last_gen_throughput if st.last_gen_line == lineno - 1 else None
    st.vllm_spec.add(row)
    return TAKEN


_LINE = re.compile(r"(?:\([^)]*? pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_BACKEND = re.compile(r"Using (?:AttentionBackendEnum\.)?([\w ]+?) backend(?: on V1 engine| out of potential)?\.?")
_CAPTURE_SIZES = re.compile(r"['\"]?cudagraph_capture_sizes['\"]?\s*[:=]\s*\[([\d,\s]*)\]")


_metrics = records.first_of(("SpecDecoding metrics", "Speculative metrics"), parse_spec, "vllm")
_throughput_line = records.first_of(("Avg prompt throughput",), parse_throughput, "vllm")


def _throughput(line: str, lineno: int, st) -> int:
    """The periodic ``Avg prompt throughput`` line (not one that also says ``metrics: ``)."""
    return 0 if "metrics: " in line else _throughput_line(line, lineno, st)


def _args(line: str) -> dict | None:
    """The ``non-default args: {...}`` dict or the ``with config: k=v, ...`` list as a dict."""
    p = line.find("non-default args:")
    if p >= 0:
        body = line[p + len("non-default args:"):].strip()
        try:
            v = ast.literal_eval(body)
            return v if isinstance(v, dict) else None
        except (ValueError, SyntaxError):
            try:
                return parse_server_args(body)
            except LogFormatError:
                return None
    p = line.find("with config:")
    if p >= 0:
        try:
            return parse_server_args("ServerArgs(" + line[p + len("with config:"):].strip().rstrip(".") + ")")
        except LogFormatError:
            return None
    return None


def _config(line: str, lineno: int, st) -> int:
    """An engine-config line: the log's ``server_args`` (our keys) and the settings evidence of its arguments.
    Returns 0: the same line may also be the version banner."""
    cfg = parse_config(line)
    if cfg and st.server_args is None:
        st.server_args = cfg
        st.server_args_line = lineno
    if cfg:
        st.hits["vllm"] += 1
    args = _args(line)
    if args:
        if "tensor_parallel_size" in args:
            args.setdefault("tp_size", args["tensor_parallel_size"])
        st.say(lineno, "args", (args, "vLLM engine config", "vllm"), "vLLM engine config")
        m = _CAPTURE_SIZES.search(line)
        if m and m.group(1).strip():
            bs = sorted(int(x) for x in m.group(1).split(",") if x.strip())
            text = records.clip(line)
            st.say(lineno, "value", ("cuda_graph_bs", bs, text), None)
            st.say(lineno, "value", ("cuda_graph_max_bs", max(bs), text), None)
    return 0


def _non_default(line: str, lineno: int, st) -> int:
    """A ``non-default args`` line (one that also says ``with config:`` was read as that)."""
    return 0 if "with config:" in line else _config(line, lineno, st)


def _backend(line: str, lineno: int, st) -> bool:
    """The attention backend vLLM chose (not a MoE, sampling or runner backend)."""
    if "ttention" not in line and "Using " not in line:
        return False
    m = _BACKEND.search(line)
    if m and ("ttention" in line or "on V1 engine" in line or "Flash" in m.group(1) or "MLA" in m.group(1)):
        b = m.group(1).replace("Flash Attention", "flash_attn").replace("FlashInfer", "flashinfer")
        if "MoE" not in line and "sampling" not in line.lower() and "runner" not in line:
            st.say(lineno, "value", ("attention_backend", records.norm_backend(b), records.clip(line)),
                   "attention backend line")
            return True
    return False


def _build(st, warnings: list[str]) -> dict:
    """The ``throughput`` table (first window after idle flagged) and the raw speculative lines
    (``vllm_spec``, normalised with SGLang's by ``kit.logs._spec``); impossible values dropped and counted."""
    throughput = check_values(st.throughput.frame(THROUGHPUT_COLUMNS), "throughput", warnings)
    if len(throughput):
        throughput["after_idle"] = flag_after_idle(throughput["generation_throughput"])
    return {"throughput": throughput, "vllm_spec": check_vllm_spec(st.vllm_spec.frame(), warnings)}


def _batches(tables: dict):
    """The running requests of each throughput line (vLLM does not say per line whether a graph ran)."""
    t = tables["throughput"]
    if not len(t) or "running" not in t.columns:
        return None
    ok = t["running"].notna()
    rows = pd.DataFrame({"line": t["line"][ok], "running": t["running"][ok], "graph": None})
    return rows, "Running: {n} reqs"


FORMAT = records.LogFormat(
    "vllm", engine=True, header=_LINE,
    take=(("metrics: ", _metrics), ("throughput: ", _throughput), ("with config:", _config),
          ("non-default args:", _non_default)),
    banner=(("ersion ", "engine (v"), VERSION),
    notes=(("backend", _backend),),
    tables={"throughput": records.columns("%m-%d %H:%M:%S"), "vllm_spec": records.columns("%m-%d %H:%M:%S")},
    build=_build, batches=_batches)
