"""Module-stack truth for attribution tests: each kernel's category from the Python stack enclosing
its launch in a ``with_stack`` trace. Shares NO code with ``kit`` (own JSON walk, own table).

For every GPU kernel the launch (runtime event with the same ``correlation``) is placed inside the
``python_function`` frames of its thread; the innermost frame that says what it is decides:

- anything inside an MoE block (``*SparseMoeBlock``, ``*MoE``, ``*Experts``, ``*TopKRouter`` ...,
  ``GptOssMLP``, ``DbrxFFN``, ``*SparseMLP``) is ``moe``;
- inside a sequence mixer (``*Mixer``, ``*MambaLayer``, ``*GatedDeltaNet``, and the linear recurrences
  whatever their class says: ``RwkvSelfAttention``, RecurrentGemma's ``*RecurrentBlock`` / ``*Rglru``,
  ``xLSTMLayer``, MiniMax's ``*LightningAttention``, LFM2's ``*ShortConv``) everything but its
  ``Linear`` projections is ``ssm``;
- else the innermost of: the functions ``apply_rotary_pos_emb*`` / ``rotate_half`` (``rope``),
  ``cache_utils.py(..): update`` (``kv-cache write``), and module classes by suffix
  (``Linear`` and GPT-2's ``Conv1D`` gemm, ``*Norm`` norm, ``*RotaryEmbedding`` rope, ``*Attention``
  attention, ``*MLP`` / ``*FeedForward`` / T5's ``*DenseActDense`` and activation modules activation,
  ``*Embedding`` elementwise); layers, models and other classes are
  ``elementwise`` (residual adds, masks);
- outside every module: the op enclosing the launch, ``aten::argmax`` / ``multinomial`` is
  ``sampling``, anything else ``elementwise``; GPU memcpy/memset events are ``memcpy/memset``.
"""
from __future__ import annotations

import gzip
import re
from collections import defaultdict
from pathlib import Path

import orjson

_MOE = re.compile(r"(SparseMoeBlock|MoE|Moe|Experts|TopKRouter|TopkRouter|Router|"
                  r"^GptOssMLP|^DbrxFFN|SparseMLP)$")   # GPT-OSS's, DBRX's, Switch's MoE blocks by name
# sequence mixers: state-space, linear attention and linear recurrences (whatever their class says)
_MIXER = re.compile(r"(Mixer|MambaLayer|GatedDeltaNet|^RwkvSelfAttention|RecurrentBlock|Rglru|^xLSTMLayer|"
                    r"mLSTMLayer|LightningAttention|ShortConv)$")
_CLASS = [
    (re.compile(r"^(Linear|Conv1D)$"), "gemm"),   # GPT-2's Conv1D: a transposed-weight projection (addmm)
    (re.compile(r"RotaryEmbedding$"), "rope"),
    (re.compile(r"Norm(Gated)?$"), "norm"),
    (re.compile(r"Attention$"), "attention"),
    (re.compile(r"(MLP|Mlp|^SiLU|^GELU|Activation|Gelu|FeedForward|DenseActDense|DenseGatedActDense)$"),
     "activation"),
    (re.compile(r"Embedding$"), "elementwise"),
]
_FUNC = [(re.compile(r"\): (apply_rotary\w*|rotate_half)$"), "rope"),
         (re.compile(r"cache_utils\.py\(\d+\): update$"), "kv-cache write")]
_RUNTIME = {"cuda_runtime", "cuda_driver"}


def _cls(name: str) -> str:
    return re.sub(r"_\d+$", "", name[len("nn.Module: "):])


def _category(frames: list[str], op: str | None) -> str:
    """frames: innermost first (module and function names)."""
    classes = [_cls(f) for f in frames if f.startswith("nn.Module: ")]
    if any(_MOE.search(c) for c in classes):
        return "moe"
    in_mixer = any(_MIXER.search(c) for c in classes)
    for f in frames:
        if f.startswith("nn.Module: "):
            c = _cls(f)
            if in_mixer:
                return "gemm" if c in ("Linear", "Conv1D") else "ssm"
            for rx, cat in _CLASS:
                if rx.search(c):
                    return cat
        else:
            for rx, cat in _FUNC:
                if rx.search(f):
                    return "ssm" if in_mixer else cat
    if in_mixer:
        return "ssm"
    if classes:
        return "elementwise"
    return "sampling" if op in ("aten::argmax", "aten::multinomial") else "elementwise"


def truth(path: str | Path, step_prefix: str = "decode_step_") -> dict:
    """{category: kernel time (us)} of the kernels inside the GPU-side ``decode_step_N`` ranges."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    ev = [e for e in orjson.loads(data)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "gpu_user_annotation" and str(e.get("name", "")).startswith(step_prefix))
    assert steps, f"{path}: no GPU-side {step_prefix}N ranges"
    per_tid = defaultdict(list)
    launch = {}
    for e in ev:
        c = e.get("cat")
        if c == "python_function" or c == "cpu_op":
            per_tid[e["tid"]].append((e["ts"], -e["dur"], e["ts"] + e["dur"], c, e["name"]))
        elif c in _RUNTIME and "correlation" in (e.get("args") or {}):
            launch[e["args"]["correlation"]] = (e["tid"], e["ts"])
    wanted = defaultdict(list)
    kernels = []
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            t = e["ts"]
            if not any(s <= t <= f for s, f in steps):
                continue
            kernels.append(e)
            if e["cat"] == "kernel" and e["args"].get("correlation") in launch:
                tid, lt = launch[e["args"]["correlation"]]
                wanted[tid].append((lt, e["args"]["correlation"]))
    cat_of = {}
    for tid, ls in wanted.items():
        fr = sorted(per_tid.get(tid, []))
        ls.sort()
        stack, j = [], 0
        for lt, corr in ls:
            while j < len(fr) and fr[j][0] <= lt:
                stack.append(fr[j])
                j += 1
            stack = [f for f in stack if f[2] >= lt]
            inner = [f for f in reversed(stack) if f[3] == "python_function"]
            ops = [f for f in reversed(stack) if f[3] == "cpu_op"]
            cat_of[corr] = _category([f[4] for f in inner], ops[-1][4] if ops else None)
    out: dict[str, float] = defaultdict(float)
    for e in kernels:
        if e["cat"] != "kernel":
            out["memcpy/memset"] += e["dur"]
        else:
            out[cat_of.get(e["args"].get("correlation"), "elementwise")] += e["dur"]
    return dict(out)


def shares(times: dict) -> dict:
    tot = sum(times.values())
    return {k: v / tot for k, v in times.items()}


def launched_under(path: str | Path, op: str) -> set:
    """Correlation ids of the runtime launches enclosed (same thread, in time) by a ``cpu_op`` named ``op``."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    ev = [e for e in orjson.loads(data)["traceEvents"] if e.get("ph") == "X"]
    spans = defaultdict(list)
    for e in ev:
        if e.get("cat") == "cpu_op" and e.get("name") == op:
            spans[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    out = set()
    for e in ev:
        if e.get("cat") in _RUNTIME and "correlation" in (e.get("args") or {}):
            if any(s <= e["ts"] <= f for s, f in spans.get(e["tid"], ())):
                out.add(e["args"]["correlation"])
    return out


def without_python_frames(path: str | Path, out: Path) -> Path:
    """The trace with every ``python_function`` event removed (as if recorded without with_stack)."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = orjson.loads(data)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "python_function"]
    out.write_bytes(gzip.compress(orjson.dumps(doc)))
    return out


def without_cpu_ops(path: str | Path, out: Path) -> Path:
    """The trace with every ``cpu_op`` and ``python_function`` event removed (as if recorded with CUDA
    activities only: kernels, their launches and the step ranges remain)."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = orjson.loads(data)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("cpu_op", "python_function")]
    out.write_bytes(gzip.compress(orjson.dumps(doc)))
    return out
