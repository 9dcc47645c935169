"""The graph-off reference run of a serving command: the run ``kit.profile.load(trace, reference=REF)``
aligns a CUDA-graph profile with (issue 32).

A graph replay records no CPU op or module for its kernels; a run of the same engine and configuration
with graphs off records them. The reference belongs at the graph's padded batch size (a batch of 3
runs the graph of 4), and must be the same program: SGLang's ``--disable-cuda-graph`` turns graphs off
only; vLLM's ``--enforce-eager`` also turns torch.compile off (no Inductor fusions, no custom passes: a
different program), so where the version has it the graph mode alone is set to NONE through
``--compilation-config``; TensorRT-LLM takes ``cuda_graph_config: null`` in its extra options file.
One table, not branches.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from kit.errors import UsageError

_VLLM_CG_MODE = (0, 10)   # first vLLM minor with compilation_config.cudagraph_mode
# engine -> (flags that turn graphs on or off already in a command, how to turn graphs off, same program?, note)
GRAPH_OFF = {
    "sglang": (r"--disable-cuda-graph|--cuda-graph-max-bs(?:=\S+|\s+\S+)", ["--disable-cuda-graph"], True,
               "graphs off (--disable-cuda-graph), compilation as configured"),
    "vllm": (r"--enforce-eager|--compilation-config(?:=\S+|\s+\S+)|-O\d|-O(?:=\S+|\s+\S+)",
             ["--compilation-config", '{"cudagraph_mode": "NONE"}'], True,
             "graphs off (compilation_config.cudagraph_mode NONE), torch.compile kept"),
    "vllm-old": (r"--enforce-eager", ["--enforce-eager"], False,
                 "--enforce-eager: graphs AND torch.compile off, a different program (no Inductor fusions, no custom "
                 "passes); kernels fused by compilation in the profiled run have no counterpart and stay unplaced"),
}


@dataclass(frozen=True)
class ReferenceCommand:
    """A graph-off command for the reference run: ``cmd``, ``mode`` (what was turned off), ``same_program``
    and ``warning`` (set when the reference is another program than the profiled run)."""

    cmd: str
    mode: str
    same_program: bool
    warning: str | None = None


def _version(v: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def reference_command(engine: str, cmd: str, *, version: str | None = None) -> ReferenceCommand:
    """The command of ``engine`` (``sglang`` or ``vllm``; ``version``: vLLM's, e.g. ``"0.11.0"``) with CUDA
    graphs turned off and everything else kept, for recording the reference of a graph profile at the
    graph's padded batch size. Flags that set graphs already are replaced. TensorRT-LLM's graphs are
    set in its options file (``cuda_graph_config: null``): a UsageError says so."""
    key = engine.lower()
    if key in ("trtllm", "tensorrt-llm", "tensorrt_llm"):
        raise UsageError("reference_command: TensorRT-LLM's CUDA graphs are set in the extra LLM API options file; "
                         "write cuda_graph_config: null there for the reference run")
    if key == "vllm" and (_version(version) or (99, 0)) < _VLLM_CG_MODE:
        key = "vllm-old"
    if key not in GRAPH_OFF:
        raise UsageError(f"reference_command: engine must be sglang or vllm, not {engine!r}")
    strip, add, same, mode = GRAPH_OFF[key]
    base = re.sub(rf"\s+(?:{strip})(?=\s|$)", "", " " + cmd).strip()
    new = f"{base} {' '.join(shlex.quote(a) for a in add)}"
    warning = None if same else f"the reference run is another program than the profiled one: {mode}"
    return ReferenceCommand(new, mode, same, warning)
