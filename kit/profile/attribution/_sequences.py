"""Unfused op sequences: what a run of a thread's outermost CPU ops computes, without module frames.

Eager code writes RMSNorm as ``to pow mean add rsqrt mul to mul``, RoPE's ``rotate_half`` as ``mul neg cat mul
add``, a DynamicCache update as two ``cat`` before the attention op and an MoE block as a router (``linear
softmax|sigmoid .. topk``) and its experts. No op says what it is alone, but the run does. The ``[[sequence]]``
rules of ``categories.toml`` are regexes over the thread's outermost ops, written as their names without
``aten::``, each followed by one space (see :func:`claim`). A kernel launched under a claimed op takes the
rule's category when its own frame evidence is none or a generic op (``container = true``: also over a
meaningful op).

Kernels replayed from a CUDA graph have no CPU ops around them, but eager PyTorch kernels say which op launched
them (``rsqrt_kernel_cuda``, ``MeanOps``, ``CatArrayBatchedCopy``, a cuBLAS GEMM): :func:`kernel_token` reads
each as the op it stands for and the same rules run over one replay's kernels in order (``kernel sequence``).
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from kit.profile.attribution._categories import Rule

# kernel name -> the op it stands for (first match); eager ATen kernels and the GEMM / attention
# libraries. Order matters: a copy kernel's template may name a functor of another op.
KERNEL_TOKENS = tuple((re.compile(rx), tok) for rx, tok in (
    (r"CatArrayBatchedCopy|\bcat_", "cat"),
    (r"index_copy", "index_copy_"),
    (r"MeanOps", "mean"), (r"rsqrt_kernel", "rsqrt"), (r"pow_tensor_(?:scalar|tensor)|pow_kernel", "pow"),
    (r"neg_kernel", "neg"), (r"\bcos_kernel", "cos"), (r"\bsin_kernel", "sin"), (r"silu_kernel", "silu"),
    (r"gelu_kernel", "gelu"), (r"sigmoid_kernel", "sigmoid"), (r"softplus_kernel", "softplus"),
    (r"ArgMaxOps", "argmax"), (r"(?i)softmax", "softmax"), (r"(?i)topk|sbtopk|gatherTopK", "topk"),
    (r"copy_kernel", "to"),
    (r"MulFunctor", "mul"), (r"CUDAFunctor(?:OnSelf)?_add|AddFunctor", "add"), (r"DivFunctor|div_true", "div"),
    (r"CUDAFunctor(?:OnSelf)?_sub|SubFunctor|\bsub_kernel", "sub"),
    (r"FillFunctor", "fill_"),
    (r"exp_kernel", "exp"),
    (r"(?i)conv_depthwise|convolution|conv[12]d|winograd|implicit_gemm|cudnn::.*conv", "conv1d"),
    (r"(?i)flash|fmha|sdpa|attention|attn", "scaled_dot_product_attention"),
    (r"(?i)nvjet|gemm|gemv|cutlass|cublas|xmma", "linear"),
))


def kernel_token(name: str) -> str:
    """The op a kernel of eager PyTorch stands for (see ``KERNEL_TOKENS``), or ``?`` (opaque: no rule spans it;
    also inductor's fused Triton kernels, whose fused name decides)."""
    if name.startswith("triton_"):
        return "?"
    return next((tok for rx, tok in KERNEL_TOKENS if rx.search(name)), "?")


# shape-only ops: left out of the text the rules see (a reader may or may not keep them, and they
# launch work only to make a tensor contiguous); one between two ops of the same claim joins it
TRANSPARENT = frozenset(("reshape", "view", "_unsafe_view", "contiguous", "flatten", "unflatten", "transpose",
                         "permute", "expand", "expand_as", "unsqueeze", "squeeze", "slice", "select", "t",
                         "detach", "alias", "_reshape_alias", "chunk", "split", "split_with_sizes", "narrow",
                         "as_strided", "view_as", "unbind", "lift_fresh", "resolve_conj", "resolve_neg"))


@lru_cache(maxsize=None)
def _anchored(pattern: str) -> re.Pattern:
    """A rule's regex, starting only where an op starts (``copy_`` must not match inside ``index_copy_``)."""
    return re.compile(r"(?<![^ ])(?:" + pattern + ")")


def claim(names: list[str], rules: list[Rule]) -> list[Rule | None]:
    """The sequence rule claiming each op of ``names`` (a thread's outermost ops in time order), or None.

    Rules are tried in order; each sees the ops as text, those earlier rules claimed written
    ``<category>:<name>`` (``rope:add kv-cache_write:cat``: context it cannot claim again), and claims its
    matches (named groups ``x``, ``x2`` ...: only those). Shape-only ops (``TRANSPARENT``) are left out of the
    text; one between two ops of one claim joins it, one right before a container's claim is the container's."""
    out: list[Rule | None] = [None] * len(names)
    toks_all = [x.removeprefix("aten::").replace(" ", "_") for x in names]   # ops as the rules see them
    vis = [i for i, t in enumerate(toks_all) if t not in TRANSPARENT]
    if not vis or not rules:
        return out
    toks = [toks_all[i] for i in vis]
    m_ = len(vis)
    got: list[Rule | None] = [None] * m_
    for r in rules:
        rx = _anchored(r.pattern)
        words = [t if got[i] is None else f"{got[i].category.replace(' ', '_')}:{t}" for i, t in enumerate(toks)]
        starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
        text = " ".join(words) + " "
        groups = [g for g in rx.groupindex if g == "x" or (g.startswith("x") and g[1:].isdigit())] or [0]
        for m in rx.finditer(text):
            for g in groups:
                a, b = m.span(g)
                if b <= a:
                    continue
                i = int(np.searchsorted(starts, a, side="right")) - 1
                j = int(np.searchsorted(starts, b, side="left"))
                for t in range(max(i, 0), min(j, m_)):
                    if got[t] is None:
                        got[t] = r
    for t, i in enumerate(vis):
        out[i] = got[t]
        nxt, prev = got[t], got[t - 1] if t else None
        # shape ops inside one claim join it; right before a container's claim (an SSM mixer's first
        # ops after its projection) they are the container's
        if nxt is not None and (nxt is prev or (nxt.container and prev is None)):
            for h in range(vis[t - 1] + 1 if t else 0, i):
                out[h] = nxt
    return out


def outermost(ts: np.ndarray, end: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Indices (into time-sorted frames) of the op frames no other op frame encloses."""
    keep = []
    cur_end = -np.inf
    for i in np.flatnonzero(is_op):
        if ts[i] >= cur_end or end[i] > cur_end:   # overlapping, not nested (odd trace): a new outermost op too
            keep.append(i)
            cur_end = end[i]
    return np.asarray(keep, dtype=np.int64)

