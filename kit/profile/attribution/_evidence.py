"""What the attribution's decisions add up to: kernel time per kind of evidence (``decided_by``), per module
class and per layer, and the undecided share (kernel time whose category the kit could be wrong about) with
the warning that names what would decide it. Read by the summary, ``Profile.health()`` and the self-check."""
from __future__ import annotations

import numpy as np
import pandas as pd

from kit.profile.attribution._attribution import EVIDENCE
from kit.profile.attribution._categories import GEMM, OTHER, Rule
from kit.profile.reading._columns import TIME_CALLS, among, strings


def evidence_table(k: pd.DataFrame) -> pd.DataFrame:
    """Kernel time and calls per kind of evidence that decided the category (``decided_by``)."""
    if not len(k) or "decided_by" not in k:
        return pd.DataFrame(columns=["decided_by", "time_us", "calls", "share_of_kernel"])
    g = _time_calls(k, ["decided_by"])
    g = g.set_index("decided_by").reindex([e for e in EVIDENCE if e in set(g["decided_by"])]).reset_index()
    return _shares(g.assign(decided_by=g["decided_by"].astype(str)), float(g["time_us"].sum()))


def _time_calls(k: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Kernel time and calls per ``keys``."""
    return k.groupby(keys, observed=True)[["dur_us", "count"]].sum().rename(columns=TIME_CALLS).reset_index()


def _shares(g: pd.DataFrame, tot: float) -> pd.DataFrame:
    """``g`` with its time's share of ``tot`` kernel time and whole calls."""
    return g.assign(share_of_kernel=g["time_us"] / tot if tot > 0 else np.nan, calls=g["calls"].astype(int))


def module_table(k: pd.DataFrame, by: str = "module") -> pd.DataFrame:
    """Kernel time per module class (``by='module'``: innermost module; ``'block'``: the module inside
    the layer) or per layer index (``by='layer'``: rows layer x block, with the layer's ``kind``:
    the roles inside it, e.g. ``attention+mlp``, ``ssm``, ``attention+moe``)."""
    if not len(k) or "module" not in k:
        return pd.DataFrame(columns=[by, "time_us", "calls", "share_of_kernel"])
    tot = float(k["dur_us"].sum())
    use = [c for c in ("module", "block", "layer", "layer_kind", "dur_us", "count") if c in k]
    km = k[use].assign(module=k["module"].astype(object).fillna("(no module)"),
                       block=k["block"].astype(object).fillna(k["module"].astype(object)).fillna("(no module)"))
    if by == "layer":
        km = km[km["layer"] >= 0]
        km = km.assign(kind=km["layer_kind"].astype(object).fillna(OTHER) if "layer_kind" in km else OTHER)
        g = _time_calls(km, ["layer", "kind", "block"]).sort_values(["layer", "time_us"], ascending=[True, False])
    else:
        g = _time_calls(km, ["block", "module"] if by == "module" else ["block"])
        g = g.sort_values("time_us", ascending=False)
    return _shares(g, tot).reset_index(drop=True)


# kernel time decided by a generic kernel name alone above this share is flagged
UNDECIDED_WARN = 0.05


def _undecided_mask(k: pd.DataFrame, rules: list[Rule]) -> np.ndarray:
    """The kernels whose category the kit could be wrong about (see :func:`undecided_detail`)."""
    generic = {r.category for r in rules if "kernel" in r.on and r.generic} | {OTHER}
    guesses = {r.role or r.pattern for r in rules if "sequence" in r.on and r.generic}
    by, cat = k["decided_by"], k["category"]
    sel = among(by, ["kernel name", "kernel name (no launch)", "none"]) & among(cat, generic)
    sel |= among(by, ["sequence", "kernel sequence"]) & among(k["evidence"], guesses, missing=False)
    sel |= among(by, ["enclosing module", "structure"])
    # a GEMM op without a weight operand (generic: mm, bmm, matmul) decided and nothing enclosing
    # confirmed it: a product of two activations can be attention's, a recurrence's or experts'
    # (an activation or the sampler's argmax says what it is)
    op_rules = [r for r in rules if "op" in r.on]
    ev = k["evidence"].astype(object)
    is_op = among(by, ["op"])
    if is_op.any():   # the ops whose deciding rule (the first match) is a generic GEMM one
        weak = {x for x in pd.unique(ev[is_op].dropna().astype(str))
                if (r := next((r for r in op_rules if r.matches(x)), None)) and r.generic and r.category == GEMM}
        sel |= is_op & among(ev, weak, missing=False)
    return np.asarray(sel, dtype=bool)


def undecided(k: pd.DataFrame, rules: list[Rule]) -> tuple[float, dict]:
    """:func:`undecided_detail`'s share of kernel time and share per category."""
    return undecided_detail(k, rules)[:2]


def undecided_detail(k: pd.DataFrame, rules: list[Rule]) -> tuple[float, dict, dict]:
    """Share of kernel time whose category only a generic kernel name gave (``generic = true`` name rules:
    elementwise), nothing gave (``other``), a generic op sequence guessed (readings the ops cannot tell apart),
    a generic GEMM op alone gave, or only the role of a module enclosing a class no rule claims gave (``enclosing
    module``, ``structure``); that share per category, and per innermost class no rule claims."""
    tot = float(k["dur_us"].sum()) if len(k) and "decided_by" in k else 0.0
    if not tot > 0:
        return 0.0, {}, {}
    sel = _undecided_mask(k, rules)
    dur = k["dur_us"].to_numpy(float)
    per = pd.Series(dur[sel]).groupby(strings(k["category"])[sel]).sum()
    weak = sel & among(k["decided_by"], ["enclosing module"])
    cls = pd.Series(dur[weak]).groupby(strings(k["evidence"])[weak]).sum() if weak.any() else pd.Series(dtype=float)
    return (float(dur[sel].sum()) / tot, {c: float(v) / tot for c, v in per.items() if v > 0},
            {c: float(v) / tot for c, v in cls.items() if v > 0})


def undecided_warning(k: pd.DataFrame, rules: list[Rule], module_frames: int) -> str | None:
    """The warning for an undecided share of at least ``UNDECIDED_WARN``, naming what would decide it."""
    share, per, classes = undecided_detail(k, rules)
    if share < UNDECIDED_WARN:
        return None
    parts = ", ".join(f"{c} {100 * v:.1f}%" for c, v in sorted(per.items(), key=lambda x: -x[1]))
    why = ("record the trace with torch.profiler.profile(with_stack=True) (module frames say what each "
           "kernel computes)" if not module_frames else
           "the trace has module frames but no [[role]] rule claims the enclosing classes: add one "
           "(kit.profile.load(..., rules=FILE))")
    if classes:
        named = ", ".join(f"{c} {100 * v:.1f}%" for c, v in sorted(classes.items(), key=lambda x: -x[1])[:6])
        why = (f"inside classes no [[role]] rule claims ({named}) the category is only the enclosing module's role: "
               f"add a [[role]] rule for them (kit.profile.load(..., rules=FILE)); " + why)
    return (f"{100 * share:.1f}% of kernel time ({parts}) is decided by a generic kernel name alone, by an op "
            f"sequence with more than one reading or by the role of a module around a class no rule claims: "
            f"their categories are undecided; {why}")
