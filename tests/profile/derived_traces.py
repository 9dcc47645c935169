"""Traces derived from the real fixtures for situations the GPU run did not produce directly.

Each function reads a recorded trace of ``tests/data/traces`` and writes a new gzipped Kineto file
with a documented, minimal change (nothing invented: every event kept is a real one):

- :func:`collectives_only`: the CPU side of the first ``n`` world-size-1 all-reduce calls of
  ``moe_decode`` (``c10d::allreduce_`` with its ``record_param_comms`` child, the ``nccl:all_reduce``
  range and the runtime calls inside: ``cudaStreamIsCapturing``, ``cudaEventRecord``), no GPU
  kernel: a window in which nothing was launched, so nothing can be missing.
- :func:`graph_without_timing`: ``compiled_graph`` (a decode step captured in a CUDA graph and
  replayed 8 times) as a profiler that does not time graph kernels writes it (issue 20's trace):
  every kernel of a replay has ``ts = 0`` and ``dur = 0`` and carries the correlation id of the
  first replay's ``cudaGraphLaunch``, so the replays repeat the same correlation ids; kernels stay
  in the order the replays ran. The CPU side and the GPU-side ``decode_step_N`` annotations are
  unchanged.
- :func:`hf_graph_without_timing`: ``hf_graph_replay`` (transformers Llama, StaticCache, one graph
  replayed per step, each replay's kernels carrying its own launch's correlation id, plus a few
  eager kernels per step) with the graph kernels' ``ts`` and ``dur`` set to 0 (eager ones keep
  theirs).
"""
from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from tests.conftest import TEST_DATA

OWN = TEST_DATA / "traces"
_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _read(scenario: str) -> dict:
    return orjson.loads(gzip.decompress((OWN / scenario / "trace.json.gz").read_bytes()))


def _write(doc: dict, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(orjson.dumps(doc)))
    return out


def collectives_only(out: Path, n: int = 16) -> Path:
    """The first ``n`` all-reduce calls of ``moe_decode`` and the CPU events inside them (see module doc)."""
    doc = _read("moe_decode")
    ev = doc["traceEvents"]
    calls = sorted((e for e in ev if e.get("name") == "c10d::allreduce_"), key=lambda e: e["ts"])[:n]
    spans = [(c["tid"], c["ts"], c["ts"] + c["dur"]) for c in calls]
    keep = [e for e in ev if e.get("ph") == "M" or (e.get("ph") == "X" and e.get("cat") not in _KERNEL_CATS and any(
        e.get("tid") == t and s <= e["ts"] <= f for t, s, f in spans))]
    doc["traceEvents"] = keep
    return _write(doc, out)


def graph_without_timing(out: Path) -> tuple[Path, int]:
    """``compiled_graph`` with its graph kernels untimed (see module doc); (path, kernels per replay)."""
    doc = _read("compiled_graph")
    ev = doc["traceEvents"]
    launches = sorted((e for e in ev if e.get("name") == "cudaGraphLaunch"), key=lambda e: e["ts"])
    first = launches[0]["args"]["correlation"]
    ids = {e["args"]["correlation"] for e in launches}
    kern = [e for e in ev if e.get("cat") in _KERNEL_CATS]
    kern.sort(key=lambda e: e["ts"])
    per = sum(1 for e in kern if e["args"].get("correlation") == first)
    rest = [e for e in ev if e.get("cat") not in _KERNEL_CATS and e.get("cat") != "ac2g"]
    for e in kern:
        assert e["args"].get("correlation") in ids
        e["ts"] = 0
        e["dur"] = 0
        e["args"]["correlation"] = first
    doc["traceEvents"] = rest + kern
    return _write(doc, out), per


def hf_graph_without_timing(out: Path) -> Path:
    """``hf_graph_replay`` with its graph-replayed kernels untimed (see module doc)."""
    doc = _read("hf_graph_replay")
    ev = doc["traceEvents"]
    ids = {e["args"]["correlation"] for e in ev if e.get("name") == "cudaGraphLaunch"}
    kern = sorted((e for e in ev if e.get("cat") in _KERNEL_CATS), key=lambda e: e["ts"])
    rest = [e for e in ev if e.get("cat") not in _KERNEL_CATS and e.get("cat") != "ac2g"]
    for e in kern:
        if e["args"].get("correlation") in ids:
            e["ts"] = 0
            e["dur"] = 0
    doc["traceEvents"] = rest + kern
    return _write(doc, out)


def projection_class_renamed(out: Path, scenario: str = "hf_llama_stack", cls: str = "Conv1D") -> Path:
    """``scenario`` (a with_stack twin) with every ``nn.Module: Linear_N`` frame renamed ``<cls>_N`` and
    every ``aten::linear`` op renamed ``aten::addmm``: the projections of a model whose projection class
    is a transposed-weight module calling ``addmm`` (GPT-2's ``Conv1D``), which no role rule claims. The
    kernels, their launches and every other frame are unchanged."""
    doc = _read(scenario)
    for e in doc["traceEvents"]:
        n = e.get("name")
        if e.get("cat") == "python_function" and isinstance(n, str) and n.startswith("nn.Module: Linear"):
            e["name"] = n.replace("nn.Module: Linear", f"nn.Module: {cls}", 1)
        elif e.get("cat") == "cpu_op" and n == "aten::linear":
            e["name"] = "aten::addmm"
    return _write(doc, out)


def module_class_renamed(out: Path, scenario: str, old: str, new: str) -> Path:
    """``scenario`` with every ``nn.Module: <old>_N`` frame renamed ``<new>_N`` (a class no rule claims
    when ``new`` says nothing); everything else unchanged."""
    doc = _read(scenario)
    for e in doc["traceEvents"]:
        n = e.get("name")
        if e.get("cat") == "python_function" and isinstance(n, str) and n.startswith(f"nn.Module: {old}"):
            e["name"] = n.replace(f"nn.Module: {old}", f"nn.Module: {new}", 1)
    return _write(doc, out)


def without_annotations(out: Path, scenario: str = "mixed_window", cats: tuple = ("user_annotation",
                                                                                  "gpu_user_annotation")) -> Path:
    """``scenario`` with its ``record_function`` ranges (CPU and GPU side) removed: an unannotated window,
    whose steps can only be inferred from gaps between kernel bursts (phase unknown)."""
    doc = _read(scenario)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in cats]
    return _write(doc, out)


def graph_without_timing_or_gpu_ranges(out: Path) -> Path:
    """:func:`graph_without_timing` with the GPU-side ``decode_step_N`` annotations removed too: graph
    kernels with ``ts = dur = 0`` and only the CPU-side step ranges, in which the host does not wait
    for the GPU (no synchronize per step)."""
    path, _ = graph_without_timing(out)
    doc = orjson.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "gpu_user_annotation"]
    return _write(doc, out)


_STEP_RANGE = ("user_annotation", "gpu_user_annotation")


def _is_step_range(e: dict) -> bool:
    n = e.get("name")
    return e.get("cat") in _STEP_RANGE and isinstance(n, str) and n.lower().startswith(("decode", "prefill"))


def ranges_renamed(out: Path, scenario: str, new: str | None) -> Path:
    """``scenario`` with its step ranges (the recorder's ``decode_step_N`` / ``prefill``, CPU and GPU side)
    named ``new`` (one name for every instance, a name no engine table knows: a serving loop's own), or
    removed (``new=None``: a loop with no step range at all); everything else unchanged."""
    doc = _read(scenario)
    ev = []
    for e in doc["traceEvents"]:
        if _is_step_range(e):
            if new is None:
                continue
            e["name"] = new
        ev.append(e)
    doc["traceEvents"] = ev
    return _write(doc, out)


def profiler_steps_around(out: Path, scenario: str, new: str, per: int) -> Path:
    """:func:`ranges_renamed` plus ``ProfilerStep#K`` CPU ranges each enclosing ``per`` consecutive step
    ranges (a profiler stepped once per several iterations of the loop)."""
    path = ranges_renamed(out, scenario, new)
    doc = orjson.loads(gzip.decompress(path.read_bytes()))
    cpu = sorted((e for e in doc["traceEvents"] if e.get("cat") == "user_annotation" and e.get("name") == new),
                 key=lambda e: e["ts"])
    for k in range(0, len(cpu), per):
        grp = cpu[k:k + per]
        end = max(e["ts"] + e["dur"] for e in grp)
        doc["traceEvents"].append({**grp[0], "name": f"ProfilerStep#{k // per}", "ts": grp[0]["ts"] - 1,
                                   "dur": end - grp[0]["ts"] + 2})
    return _write(doc, out)


def profiler_steps_with_inner(out: Path, scenario: str, module: str, inner: str) -> Path:
    """``scenario`` with its step ranges named ``ProfilerStep#N`` (CPU and GPU side, one per step, as a
    training loop's) and a ``record_function`` range ``inner`` around each call of module class ``module``
    (a part of the step, repeated: not a step)."""
    doc = _read(scenario)
    n = {"user_annotation": 0, "gpu_user_annotation": 0}
    add = []
    for e in sorted(doc["traceEvents"], key=lambda e: e.get("ts", 0)):
        if _is_step_range(e):
            e["name"] = f"ProfilerStep#{n[e['cat']]}"
            n[e["cat"]] += 1
        elif e.get("cat") == "python_function" and str(e.get("name", "")).startswith(f"nn.Module: {module}_"):
            add.append({**e, "cat": "user_annotation", "name": inner, "args": {}})
    doc["traceEvents"] += add
    return _write(doc, out)
