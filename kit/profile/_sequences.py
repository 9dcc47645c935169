"""Unfused op sequences: what a run of a thread's outermost CPU ops computes, without module frames.

Eager code writes RMSNorm as ``to pow mean add rsqrt mul to mul``, RoPE's ``rotate_half`` as
``mul neg cat mul add``, a DynamicCache update as two ``cat`` right before the attention op and an
MoE block as a router (``linear softmax|sigmoid .. topk``) followed by its experts up to the next
norm. None of these ops says what it is alone (``mul``, ``cat``, ``topk`` are everywhere), but the
run does. The ``[[sequence]]`` rules of ``categories.toml`` are regexes over the thread's outermost
ops (ops no other op encloses; view ops are already dropped by the reader), written as their names
without ``aten::``, each followed by one space. Rules are tried in order and each claims the ops of
its matches that no earlier rule claimed (ops an earlier rule claimed are written
``<category>:<name>``, context a later rule may use); named groups ``x``, ``x2``, ... limit the claim
to those groups (the rest is context). A kernel launched under a claimed op takes the rule's category when its own frame
evidence is none or a generic op (``container = true``: also over a meaningful op).
"""
from __future__ import annotations

import numpy as np

from kit.profile._categories import Rule


def token(name: str) -> str:
    """The name of an op as the sequence rules see it."""
    return name[6:] if name.startswith("aten::") else name


# shape-only ops: left out of the text the rules see (a reader may or may not keep them, and they
# launch work only to make a tensor contiguous); one between two ops of the same claim joins it
TRANSPARENT = frozenset(("reshape", "view", "_unsafe_view", "contiguous", "flatten", "unflatten", "transpose",
                         "permute", "expand", "expand_as", "unsqueeze", "squeeze", "slice", "select", "t",
                         "detach", "alias", "_reshape_alias", "chunk", "split", "split_with_sizes", "narrow",
                         "as_strided", "view_as", "unbind", "lift_fresh", "resolve_conj", "resolve_neg"))


def claim(names: list[str], rules: list[Rule]) -> list[Rule | None]:
    """The sequence rule claiming each op of ``names`` (a thread's outermost ops in time order), or None.

    Each rule sees the ops as text, the ones earlier rules claimed written ``<category>:<name>``
    (spaces in a category as ``_``: ``rope:add kv-cache_write:cat``), so a rule can use what was
    found before it as context and cannot claim it again. Shape-only ops (``TRANSPARENT``) are left
    out of the text; one lying between two ops of the same claim is claimed with them, one right
    before a container's claim (not after another claim) by the container."""
    n = len(names)
    out: list[Rule | None] = [None] * n
    if not n or not rules:
        return out
    toks_all = [token(x).replace(" ", "_") for x in names]
    vis = [i for i, t in enumerate(toks_all) if t not in TRANSPARENT]
    toks = [toks_all[i] for i in vis]
    m_ = len(vis)
    got: list[Rule | None] = [None] * m_
    for r in rules:
        rx = r._rx  # type: ignore[attr-defined]
        words = [t if got[i] is None else f"{got[i].category.replace(' ', '_')}:{t}" for i, t in enumerate(toks)]
        if not words:
            break
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
        if ts[i] >= cur_end:
            keep.append(i)
            cur_end = end[i]
        elif end[i] > cur_end:   # overlapping, not nested (odd trace): treat as a new outermost op
            keep.append(i)
            cur_end = end[i]
    return np.asarray(keep, dtype=np.int64)

