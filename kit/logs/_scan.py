"""The streaming scanner behind ``kit.logs.read`` (private).

One pass over the lines; each line is dispatched by cheap substring checks (``'batch' in line``,
``'throughput' in line`` ...) before any regex runs, so the common uninteresting line (an HTTP
access log, a model-loading message) costs a handful of C-level scans. Records go into
column lists (:class:`kit.logs._table.Columns`); raw lines are never kept.
"""
from __future__ import annotations

import io
import re
from typing import Iterable

from kit.errors import LogFormatError
from kit.logs import _bench as B
from kit.logs import _nccl as N
from kit.logs import _sglang as S
from kit.logs import _vllm as V
from kit.logs._table import Columns, TemplateTable
from kit.util import strip_ansi

_VLLM_LINE = re.compile(r"(?:\([^)]*? pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_EVIDENCE_LIMIT = 20000  # unknown lines inspected for engine evidence; later ones are only counted


class State:
    """Everything one scan accumulates."""

    def __init__(self) -> None:
        self.decode = Columns("ISO8601")        # rows the fast path cannot take
        self.prefill = Columns("ISO8601")
        self.decode_fast = TemplateTable(S.FAST_HEAD, "ISO8601")
        self.prefill_fast = TemplateTable(S.FAST_HEAD, "ISO8601")
        self.throughput = Columns("%m-%d %H:%M:%S")
        self.vllm_spec = Columns("%m-%d %H:%M:%S")
        self.bench = Columns()
        self.nccl = Columns()
        self.evidence = {"sglang": 0, "vllm": 0, "nccl": 0, "bench": 0}
        self.server_args: dict | None = None
        self.server_args_line: int | None = None
        self.versions: list[tuple[str, str, int]] = []  # (engine, version, line)
        self.last_gen_throughput = None
        self.last_gen_line = -10
        self.block: B.Block | None = None
        self.bench_phase: str | None = None
        self.lines = 0
        self.unknown = 0
        self.torn = 0
        self.torn_examples: list[int] = []
        self.warnings: list[str] = []
        self.bulk_templates: list = []  # (regex, table, template, bracket) of SGLang lines seen so far
        # set by the parallel reader (kit.logs._parallel): engine evidence found in unknown lines is
        # recorded as (unknown-line ordinal, engine) instead of counted, because whether a line is
        # inspected depends on the unknown lines of the pieces before this one
        self.unknown_hits: list | None = None
        self.evidence_limit = _EVIDENCE_LIMIT  # 0 in a worker whose piece comes after that many unknown lines


_NOTHING: frozenset = frozenset()




def scan(lines: Iterable[str], st: State, skip: set[int] | frozenset = _NOTHING) -> State:
    """Feed every line of ``lines`` through the parsers, updating ``st``; line numbers in ``skip``
    were already taken by the block extractor."""
    lineno = st.lines
    decode_sig, prefill_sig = "Decode batch", "Prefill batch"
    batch_line = S.parse_batch_line
    for line in lines:
        lineno += 1
        if lineno in skip:
            continue  # a line already taken by the block extractor (extract_block)
        line = strip_ansi(line) if "\x1b" in line else line
        if st.block is not None and _fed_block(st, line):
            continue
        if line.startswith("#"):
            st.unknown += 1  # comment/header lines (nccl-tests tables, annotated excerpts): never a record
            continue
        r = 0
        if "batch" in line:
            p = line.find(decode_sig)
            if p >= 0:
                r = batch_line(line, lineno, "Decode", p, st)
            else:
                p = line.find(prefill_sig)
                if p >= 0:
                    r = batch_line(line, lineno, "Prefill", p, st)
            if r:
                st.evidence["sglang"] += 1
        elif "metrics: " in line or "throughput: " in line:
            r = _vllm_line(line, lineno, st)
        if not r and "NCCL" in line:
            r = _nccl_line(line, lineno, st)
        if not r:
            r = _other(line, lineno, st)
        if r == 1:
            continue
        if r == 2:
            _torn(st, lineno)
            continue
        st.unknown += 1
        if st.unknown < st.evidence_limit:
            _unknown_evidence(line, st)
    st.lines = lineno
    return st


def _fed_block(st: State, line: str) -> bool:
    """Feed ``line`` to the open benchmark block: True when the block took it (closed at its end);
    else the block is closed (truncated, for a serving block) and the line is read as any other."""
    blk = st.block
    if blk.feed(line):
        if blk.closed:
            _close_block(st, truncated=False)
        return True
    _close_block(st, truncated=isinstance(blk, B.ServingBlock))
    return False


def _torn(st: State, lineno: int) -> None:
    st.torn += 1
    if len(st.torn_examples) < 5:
        st.torn_examples.append(lineno)


def _vllm_line(line: str, lineno: int, st: State) -> int:
    """A vLLM SpecDecoding / Speculative metrics line or a throughput line; 0 when it is neither."""
    r = 0
    if "metrics: " in line:
        p = line.find("SpecDecoding metrics")
        if p < 0:
            p = line.find("Speculative metrics")
        if p >= 0:
            r = V.parse_spec(line, lineno, p, st)
    else:
        p = line.find("Avg prompt throughput")
        if p >= 0:
            r = V.parse_throughput(line, lineno, p, st)
    if r:
        st.evidence["vllm"] += 1
    return r


def _nccl_line(line: str, lineno: int, st: State) -> int:
    """An NCCL INFO / WARN debug line; 0 when it is not one."""
    p = line.find("NCCL I")
    if p < 0:
        p = line.find("NCCL W")
    if p < 0:
        return 0
    r = N.parse_nccl_line(line, lineno, p, st)
    if r:
        st.evidence["nccl"] += 1
    return r


def _unknown_evidence(line: str, st: State) -> None:
    """An unparsed line whose prefix still says which engine wrote it counts as evidence of that engine."""
    if line.startswith("[") and S.HEADER.match(line):
        hit = "sglang"
    elif _VLLM_LINE.match(line):
        hit = "vllm"
    else:
        return
    if st.unknown_hits is None:
        st.evidence[hit] += 1
    else:
        st.unknown_hits.append((st.unknown, hit))


BLOCK_CHARS = 1 << 20
FIRST_BLOCK_CHARS = 1 << 15


def scan_file(f, st: State) -> State:
    """Scan an open text file in blocks of whole lines: lines of SGLang templates already seen are
    pulled out of each block in bulk (one regex pass per template, C speed), the rest of the block
    goes through :func:`scan` line by line. Same records as ``scan(f, st)``, faster on big logs."""
    while True:
        # until the first SGLang templates are known, read small blocks: their lines go line by line
        block = f.read(BLOCK_CHARS if st.bulk_templates else min(BLOCK_CHARS, FIRST_BLOCK_CHARS))
        if not block:
            break
        if block[-1] != "\n":
            block += f.readline()
        taken = _NOTHING
        if st.bulk_templates and st.block is None and block.isascii():
            taken = S.extract_block(block, st.lines + 1, st)
        scan(io.StringIO(block), st, taken)
    return st


def finish(st: State) -> None:
    """Close a block still open at the end of the input (a truncated paste)."""
    if st.block is not None:
        _close_block(st, truncated=isinstance(st.block, B.ServingBlock) and not st.block.closed)


def _close_block(st: State, truncated: bool) -> None:
    blk = st.block
    st.block = None
    B.finish_serving_tool(blk.row)
    blk.finish(st, truncated)
    st.evidence["bench"] += 1
    eng = blk.row.get("engine")
    if eng in st.evidence:
        st.evidence[eng] += 1


def _other(line: str, lineno: int, st: State) -> int:
    """Lines that are rare in a log: server_args dump, version banners, benchmark block starts."""
    if "server_args=" in line:
        try:
            args = S.parse_server_args(line)
        except LogFormatError:
            return 0
        if st.server_args is None:
            st.server_args = args
            st.server_args_line = lineno
        st.evidence["sglang"] += 1
        return 1
    if "with config:" in line or "non-default args:" in line:
        cfg = V.parse_config(line)
        if cfg and st.server_args is None:
            st.server_args = cfg
            st.server_args_line = lineno
        if cfg:
            st.evidence["vllm"] += 1
    if "ustom allreduce is disabled" in line or "ustom all-reduce is disabled" in line:
        st.warnings.append(f"line {lineno}: the engine disabled its custom all-reduce (it does not run on more "
                           "than two PCIe-only GPUs): every TP all-reduce goes through NCCL")
        return 1
    if "ersion " in line or "engine (v" in line:
        m = V.VERSION.search(line)
        if m is not None:
            st.versions.append(("vllm", m.group(1), lineno))
            st.evidence["vllm"] += 1
            return 1
    if "latency:" in line or "Benchmark Result" in line or line.startswith("batch size: "):
        blk = B.start_block(line, lineno, st)
        if blk is not None:
            st.block = blk
            return 1
    if line.startswith("Warmup ..."):
        st.bench_phase = "warmup"
        return 1
    if line.startswith("Benchmark ..."):
        st.bench_phase = "benchmark"
        return 1
    return 0
