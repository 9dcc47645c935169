"""Benchmark outputs (private to ``kit.logs``): the text blocks of ``sglang.bench_serving``, ``vllm bench
serve``, ``sglang.bench_one_batch``, ``sglang.bench_one_batch_server`` and ``vllm bench latency`` (the scan
hands every line to the open :class:`Block` first), and their JSON / JSONL result files: one row per run,
normalised column names (``BENCH_COLUMNS`` first; ``decode_tok_s`` derived, see :func:`add_decode_tok_s`).
"""
from __future__ import annotations

import json
import re
from typing import Any

from kit.errors import LogFormatError
from kit.logs._checks import check_values
from kit.logs._kit_result import is_kit_result, kit_rows, normalise_kit_result
from kit.logs._records import TAKEN, LogFormat, columns
from kit.logs._table import snake, value

BENCH_COLUMNS = ("tool", "engine", "line", "completed", "duration_s", "output_throughput",
                 "total_throughput", "mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                 "mean_itl_ms", "median_itl_ms", "accept_length")

# Printed label -> column, where the generic rule (snake case, "(ms)" -> "_ms") is not enough.
_LABELS = {
    "Traffic request rate": "request_rate",
    "Request rate configured (RPS)": "request_rate",
    "Max request concurrency": "max_concurrency",
    "Max reqeuest concurrency": "max_concurrency",  # sglang <= 0.4.x typo
    "Maximum request concurrency": "max_concurrency",
    "Successful requests": "completed",
    "Failed requests": "failed",
    "Benchmark duration (s)": "duration_s",
    "Total generated tokens": "total_output_tokens",
    "Total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "Input token throughput (tok/s)": "input_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Peak output token throughput (tok/s)": "peak_output_throughput",
    "Total token throughput (tok/s)": "total_throughput",
    "Total Token throughput (tok/s)": "total_throughput",  # vLLM <= 0.10
    "Acceptance rate (%)": "spec_acceptance_rate",
    "Acceptance length": "spec_acceptance_length",
    "Drafts": "spec_drafts",
    "Draft tokens": "spec_draft_tokens",
    "Accepted tokens": "spec_accepted_tokens",
}
_METRIC = re.compile(r"^(Mean|Median|Std|Max|Min|P\d+(?:\.\d+)?) (.+?) \(ms\)$")
_METRIC_NAMES = {"e2e latency": "e2e_latency", "e2el": "e2e_latency", "ttft": "ttft", "tpot": "tpot",
                 "itl": "itl"}
# a section title or label only one engine's serving benchmark prints -> that engine
_ENGINE_OF = {**dict.fromkeys(("Inter-Token Latency", "Backend", "Total generated tokens (retokenized)",
                               "Accept length", "Max reqeuest concurrency", "Traffic request rate"), "sglang"),
              **dict.fromkeys(("Inter-token Latency", "Speculative Decoding", "Failed requests",
                               "Total Token throughput (tok/s)", "Maximum request concurrency",
                               "Request rate configured (RPS)"), "vllm")}
_PCT_LABELS = {"Acceptance rate (%)", "Cache hit rate"}
_ONE_BATCH = re.compile(r"latency: *([0-9.]+) (m?s), (median )?throughput: *([0-9.]+) token/s")
_LATENCY_PCT = re.compile(r"^(\d+)% percentile latency: ([0-9.eE+-]+) seconds")

SERVING_END = "=" * 50
_SERVING_TOOLS = {"sglang": "sglang.bench_serving", "vllm": "vllm bench serve"}


def _label_column(label: str) -> str:
    col = _LABELS.get(label)
    if col is not None:
        return col
    m = _METRIC.match(label)
    if m is not None:
        stat = m.group(1).lower()
        metric = _METRIC_NAMES.get(m.group(2).lower(), snake(m.group(2)))
        return f"{stat}_{metric}_ms"
    return snake(label)


def _conv(text: str) -> Any:
    try:
        return value(text)
    except ValueError:
        return text.strip()


class Block:
    """An open multi-line benchmark block (``st.block``): the scan offers it every line first (:meth:`take`)."""

    def __init__(self, tool: str, lineno: int, engine: str | None = None) -> None:
        self.row: dict[str, Any] = {"tool": tool, "engine": engine, "line": lineno}
        self.closed = False
        self.per_position: list[float] = []

    def feed(self, line: str) -> bool:  # overridden
        raise NotImplementedError

    def take(self, st, line: str) -> bool:
        """True when the block took ``line`` (closed at its end); else the block is closed (truncated, for a
        serving block) and the line is read as any other."""
        if self.feed(line):
            if self.closed:
                self.close(st, truncated=False)
            return True
        self.close(st, truncated=isinstance(self, ServingBlock))
        return False

    def close(self, st, truncated: bool | None = None) -> None:
        """The block's row added to ``st.bench``; ``truncated`` None: at the end of the input (a serving block
        not closed by its end line was cut)."""
        row = self.row
        if truncated is None:
            truncated = isinstance(self, ServingBlock) and not self.closed
        st.block = None
        if row["tool"] == "serving":
            row["tool"] = _SERVING_TOOLS.get(row["engine"], "bench serve")
        if self.per_position:
            row["spec_per_position"] = tuple(self.per_position)
        if truncated:
            row["truncated"] = True
        st.bench.add(row)
        st.hits["bench"] += 1
        if row["engine"] in st.hits:
            st.hits[row["engine"]] += 1


class ServingBlock(Block):
    """``==== Serving Benchmark Result ====`` ... ``=====`` (sglang.bench_serving / vllm bench serve)."""

    def feed(self, line: str) -> bool:
        s = line.strip()
        if not s:
            return True
        if s.startswith("="):
            if s == SERVING_END:
                self.closed = True
                return True
            return False
        if s.startswith("-"):
            self.row["engine"] = self.row["engine"] or _ENGINE_OF.get(s.strip("-"))
            return True
        label, sep, text = s.partition(":")
        if not sep:
            return False
        if label.startswith("Position "):
            try:
                self.per_position.append(float(text.strip().rstrip("%")) / 100.0)
            except ValueError:
                return False
            return True
        if not label[:1].isupper():
            return False
        text = text.strip()
        if not text and label.startswith("Per-position"):
            return True
        col = _label_column(label)
        val = _conv(text)
        if label in _PCT_LABELS and isinstance(val, (int, float)) and not text.endswith("%"):
            val = val / 100.0
        self.row[col] = val
        self.row["engine"] = self.row["engine"] or _ENGINE_OF.get(label)
        return True


class OneBatchBlock(Block):
    """``python -m sglang.bench_one_batch``: Prefill. / Decode i. / Decode.  median / Total. lines."""

    def feed(self, line: str) -> bool:
        s = line.strip()
        if s.startswith("Decode") and "Batch size:" in s:
            try:
                self.row["batch_size"] = int(s.split("Batch size:", 1)[1].split(",", 1)[0])
            except ValueError:
                return False
            return True
        if s.startswith("Decode. "):
            return self.summary(s, "median_decode_latency_s", "output_throughput")
        self.closed = s.startswith("Total. ")
        return self.closed and self.summary(s, "total_latency_s", "overall_throughput")

    def summary(self, s: str, latency: str, throughput: str) -> bool:
        """A ``latency: X s, [median ]throughput: Y token/s`` line (the median decode latency also in ms)."""
        m = _ONE_BATCH.search(s)
        if m is None:
            return False
        decode = latency == "median_decode_latency_s"   # the one printed in ms too, and the TPOT
        lat = self.row[latency] = float(m.group(1)) / (1000.0 if decode and m.group(2) == "ms" else 1.0)
        if decode:
            self.row["median_tpot_ms"] = round(lat * 1000.0, 9)
        self.row[throughput] = float(m.group(4))
        return True


_SERVER_KEYS = {
    "batch size": "batch_size", "input_len": "input_len", "output_len": "output_len",
    "latency": "latency_s", "input throughput": "input_throughput", "output throughput": "output_throughput",
    "last_ttft": "last_ttft_s", "last generation throughput": "last_gen_throughput",
    "acc_length": "accept_length", "cache hit rate": "cache_hit_rate",
    "(input + output) throughput": "overall_throughput",
}


class OneBatchServerBlock(Block):
    """``python -m sglang.bench_one_batch_server``: ``batch size: 1`` / ``latency: 1.23 s`` ... lines."""

    def feed(self, line: str) -> bool:
        s = line.strip()
        key, sep, text = s.partition(": ")
        col = _SERVER_KEYS.get(key)
        if not sep or col is None or col in self.row:
            return False
        try:
            self.row[col] = value(text)
        except ValueError:
            return False
        return True


class LatencyBlock(Block):
    """``vllm bench latency``: ``Avg latency: X seconds`` then ``P% percentile latency: X seconds``."""

    def feed(self, line: str) -> bool:
        m = _LATENCY_PCT.match(line.strip())
        if m is None:
            return False
        self.row[f"p{m.group(1)}_latency_s"] = float(m.group(2))
        return True


_JSON_RENAME = {
    "duration": "duration_s",
    "total_token_throughput": "total_throughput",
    "max_output_tokens_per_s": "peak_output_throughput",
    "max_concurrent_requests": "peak_concurrent_requests",
    "prefill_latency": "prefill_latency_s",
    "median_decode_latency": "median_decode_latency_s",
    "median_decode_throughput": "output_throughput",
    "total_latency": "total_latency_s",
    "latency": "latency_s",
    "last_ttft": "last_ttft_s",
    "acc_length": "accept_length",
    "avg_latency": "avg_latency_s",
    "spec_decode_acceptance_rate": "spec_acceptance_rate",
    "spec_decode_acceptance_length": "spec_acceptance_length",
    "spec_decode_num_drafts": "spec_drafts",
    "spec_decode_draft_tokens": "spec_draft_tokens",
    "spec_decode_accepted_tokens": "spec_accepted_tokens",
    "spec_decode_per_position_acceptance_rates": "spec_per_position",
    "model_id": "model",
}


def _json_tool(obj: dict) -> tuple[str, str] | None:
    keys = obj.keys()
    if "avg_latency" in keys and "latencies" in keys:
        return "vllm bench latency", "vllm"
    if "median_decode_throughput" in keys:
        return "sglang.bench_one_batch", "sglang"
    if "last_gen_throughput" in keys or ("acc_length" in keys and "output_throughput" in keys):
        return "sglang.bench_one_batch_server", "sglang"
    if "output_throughput" in keys and ("completed" in keys or "duration" in keys):
        if "endpoint_type" in keys or "total_token_throughput" in keys or "model_id" in keys:
            return "vllm bench serve", "vllm"
        return "sglang.bench_serving", "sglang"
    return None


def json_row(obj: Any, name: str, index: int) -> dict:
    """One benchmark result object -> normalised row; LogFormatError if it is not one."""
    if not isinstance(obj, dict):
        raise LogFormatError(f"{name}: record {index} is {type(obj).__name__}, not a benchmark result object",
                             path=name)
    tool = _json_tool(obj)
    if tool is None:
        keys = ", ".join(sorted(obj)[:8])
        raise LogFormatError(f"{name}: JSON record {index} is not a benchmark result "
                             f"(keys: {keys or 'none'})", path=name)
    row: dict[str, Any] = {"tool": tool[0], "engine": tool[1], "line": index + 1}
    for key, val in obj.items():
        col = _JSON_RENAME.get(key, key)
        if col == "percentiles" and isinstance(val, dict):
            for p, v in val.items():
                row[f"p{p}_latency_s"] = v
            continue
        if col.startswith(("mean_e2el", "median_e2el", "std_e2el")) or (col.startswith("p") and "_e2el_" in col):
            col = col.replace("e2el", "e2e_latency")
        if col == "spec_per_position" and isinstance(val, list):
            row[col] = tuple(float(x) / 100.0 if x > 1 else float(x) for x in val)
            continue
        if isinstance(val, (list, dict)):
            continue  # per-request arrays, server_info: not one value per run
        if col == "spec_acceptance_rate" and isinstance(val, (int, float)):
            val = val / 100.0  # vLLM stores percent, as printed
        row[col] = val
    return row


def parse_json_text(text: str, name: str) -> list[dict]:
    """A JSON object, a JSON list of objects or JSONL (one object per line) -> rows."""
    text = text.strip()
    objs: list[Any]
    try:
        doc = json.loads(text)
        objs = doc if isinstance(doc, list) else [doc]
    except RecursionError:
        raise LogFormatError(f"{name}: JSON nested too deep to be a benchmark result", path=name) from None
    except json.JSONDecodeError:
        objs = []
        for i, ln in enumerate(text.splitlines(), 1):
            if not ln.strip():
                continue
            try:
                objs.append(json.loads(ln))
            except RecursionError:
                raise LogFormatError(f"{name}: line {i} is JSON nested too deep to be a benchmark result",
                                     path=name) from None
            except json.JSONDecodeError as exc:
                raise LogFormatError(f"{name}: line {i} is not valid JSON ({exc.msg})", path=name) from None
    if not objs:
        raise LogFormatError(f"{name}: JSON holds no benchmark result", path=name)
    if len(objs) == 1 and is_kit_result(objs[0]):  # the kit's own result: one row per level
        return kit_rows(normalise_kit_result(objs[0]), name)
    return [json_row(o, name, i) for i, o in enumerate(objs)]


def add_decode_tok_s(bench):
    """``bench`` with ``decode_tok_s``, the per-request decode speed a run measured, comparable across tools:
    ``last_gen_throughput`` (``bench_one_batch_server``), else 1000 / median TPOT (ms); NaN when neither."""
    if not len(bench):
        return bench
    out = 1000.0 / bench["median_tpot_ms"].astype(float) if "median_tpot_ms" in bench else None
    if "last_gen_throughput" in bench:
        gen = bench["last_gen_throughput"].astype(float)
        out = gen if out is None else gen.fillna(out)
    if "decode_tok_s" in bench:  # the kit's own results give it (median over requests of 1 / TPOT)
        given = bench["decode_tok_s"].astype(float)
        out = given if out is None else given.fillna(out)
    return bench.assign(decode_tok_s=out if out is not None else float("nan"))


def _start(line: str, lineno: int, st) -> int:
    """A line that opens a result block (then ``st.block``); 0 when it opens none."""
    s, blk = line.strip(), None
    if "Benchmark Result" in line and s.startswith("="):
        blk = ServingBlock("serving", lineno)
    elif s.startswith("Prefill. latency:"):
        blk = OneBatchBlock("sglang.bench_one_batch", lineno, "sglang")
        blk.row["phase"] = st.bench_phase
        blk = blk if blk.summary(s, "prefill_latency_s", "prefill_throughput") else None
    elif s.startswith("batch size: "):
        blk = OneBatchServerBlock("sglang.bench_one_batch_server", lineno, "sglang")
        blk = blk if blk.feed(s) else None
    elif s.startswith("Avg latency: ") and s.endswith("seconds"):
        blk = LatencyBlock("vllm bench latency", lineno, "vllm")
        try:
            blk.row["avg_latency_s"] = float(s.split()[2])
        except (ValueError, IndexError):
            blk = None
    if blk is None:
        return 0
    st.block = blk
    return TAKEN


def _sized(line: str, lineno: int, st) -> int:
    """``batch size: ...`` at the start of a line: a ``bench_one_batch_server`` block."""
    return _start(line, lineno, st) if line.startswith("batch size: ") else 0


def _phase(line: str, lineno: int, st) -> int:
    """``Warmup ...`` / ``Benchmark ...`` of ``bench_one_batch``: the phase of the blocks that follow."""
    for start, phase in (("Warmup ...", "warmup"), ("Benchmark ...", "benchmark")):
        if line.startswith(start):
            st.bench_phase = phase
            return TAKEN
    return 0


def _build(st, warnings: list[str]) -> dict:
    """The ``bench`` table: impossible values dropped and counted, decode tok/s added."""
    return {"bench": add_decode_tok_s(check_values(st.bench.frame(BENCH_COLUMNS), "bench", warnings))}


FORMAT = LogFormat("bench", take=(("latency:", _start), ("Benchmark Result", _start), ("batch size: ", _sized),
                                  ("Warmup ...", _phase), ("Benchmark ...", _phase)),
                   tables={"bench": columns()}, build=_build)
