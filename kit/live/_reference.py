"""The graph-off reference run of a serving command: the run ``kit.profile.load(trace, reference=REF)``
aligns a CUDA-graph profile with (issue 32).

A graph replay records no CPU op or module for its kernels; a run of the same engine and configuration
with graphs off records them. The reference belongs at the graph's padded batch size (a batch of 3
runs the graph of 4), and must be the same program: SGLang's ``--disable-cuda-graph`` turns graphs off
only; vLLM's ``--enforce-eager`` also turns torch.compile off (no Inductor fusions, no custom passes: a
different program), so where the version has it the graph mode alone is set to NONE through
``--compilation-config``; TensorRT-LLM takes ``cuda_graph_config: null`` in its extra options file.
Each engine's rows are in its own module (``kit.engines``: ``Engine.graph_off``), not branches here.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import kit.engines
from kit.errors import UsageError


@dataclass(frozen=True)
class ReferenceCommand:
    """A graph-off command for the reference run: ``cmd``, ``mode`` (what was turned off), ``same_program``
    and ``warning`` (set when the reference is another program than the profiled run)."""

    cmd: str
    mode: str
    same_program: bool
    warning: str | None = None


def reference_command(engine: str, cmd: str, *, version: str | None = None) -> ReferenceCommand:
    """The command of ``engine`` (a name of ``kit.engines.names()``; ``version``: the engine's, e.g.
    ``"0.11.0"`` for vLLM) with CUDA graphs turned off and everything else kept, for recording the reference
    of a graph profile at the graph's padded batch size. Flags that set graphs already are replaced. An
    engine whose graphs are set in an options file (TensorRT-LLM: ``cuda_graph_config: null``) or that has no
    known graph-off mode: a UsageError says so."""
    try:
        row = kit.engines.engine(engine).graph_off_for(version)
    except UsageError:
        row = None
        if str(engine).lower() in ("tensorrt-llm", "tensorrt_llm"):
            row = kit.engines.engine("trtllm").graph_off_for(version)
    if row is None:
        with_mode = [e.name for e in kit.engines.engines() if e.graph_off and e.graph_off[0].options is None]
        raise UsageError(f"reference_command: engine must be one of {', '.join(with_mode)}, not {engine!r}")
    if row.options is not None:
        opts = ", ".join(f"{k}: {'null' if v is None else v}" for k, v in row.options.items())
        raise UsageError(f"reference_command: {engine}'s CUDA graphs are set in the extra LLM API options file; "
                         f"write {opts} there for the reference run")
    base = re.sub(rf"\s+(?:{row.strip})(?=\s|$)", "", " " + cmd).strip()
    new = f"{base} {' '.join(shlex.quote(a) for a in row.add)}"
    warning = None if row.same_program else f"the reference run is another program than the profiled one: {row.mode}"
    return ReferenceCommand(new, row.mode, row.same_program, warning)
