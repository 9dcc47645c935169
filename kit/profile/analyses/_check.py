"""A self-check users can run: attribute a trace with and without its Python frames and compare.

On a trace recorded with ``with_stack=True`` the module frames decide most categories. The same
trace attributed from its CPU ops alone (module and function frames left out, as in a trace recorded
without ``with_stack``) shows how far the op rules, op sequences and kernel names would carry on
traces of this model without frames: the share of kernel time whose category agrees, and each
category's share both ways. Both runs go through the one loader and the one attribution
(``_load.load_files`` and ``_assemble.assemble``), so nothing is attributed twice differently.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Union

import numpy as np
import pandas as pd

from kit.errors import TraceError, UsageError
from kit.profile import _load
from kit.profile._assemble import assemble
from kit.profile._profile import PHASES
from kit.profile.attribution._categories import build_rules
from kit.profile.attribution._evidence import undecided
from kit.util import frame_records, jsonable

__all__ = ["AttributionCheck", "check_attribution"]


@dataclass(eq=False)
class AttributionCheck:
    """Agreement of the attribution with and without Python frames (see :func:`check_attribution`).

    ``agreement``: share of kernel time whose category is the same both ways (NaN without module
    frames: nothing to check against). ``categories``: category, ``with_frames`` and
    ``without_frames`` shares of kernel time and their ``difference`` (points). ``moves``: kernel time
    share per (with frames -> without frames) category pair that differs, largest first.
    ``undecided_without``: the share of kernel time the attribution without frames states as
    undecided (a generic kernel name alone, or an op sequence with two readings): where the two
    disagree, that is how much of it the summary of a trace without frames already flags."""

    files: list[str]
    phase: str
    module_frames: int
    kernel_time_us: float
    agreement: float
    categories: pd.DataFrame
    moves: pd.DataFrame
    undecided_without: float = np.nan
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return jsonable({"files": [os.path.basename(f) for f in self.files], "phase": self.phase,
                         "module_frames": self.module_frames, "kernel_time_us": round(self.kernel_time_us, 6),
                         "agreement": round(self.agreement, 6), "undecided_without": round(self.undecided_without, 6),
                         **{t: frame_records(getattr(self, t).round(6)) for t in ("categories", "moves")},
                         "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        ag = "n/a" if np.isnan(self.agreement) else f"{100 * self.agreement:.1f}%"
        und = "" if np.isnan(self.undecided_without) else (f"; without frames "
                                                             f"{100 * self.undecided_without:.1f}% is stated undecided")
        lines = [f"AttributionCheck(phase={self.phase}, module frames={self.module_frames:,}, kernel time "
                 f"agreeing with and without frames: {ag}{und})",
                 f"{'category':<20}{'with frames':>13}{'without':>10}{'diff (pts)':>12}"]
        for r in self.categories.itertuples():
            lines.append(f"{r.category:<20}{100 * r.with_frames:>12.1f}%{100 * r.without_frames:>9.1f}%"
                         f"{100 * r.difference:>+12.1f}")
        for r in self.moves.head(8).itertuples():
            lines.append(f"  {100 * r.share:5.1f}% of kernel time: {r.with_frames} with frames, {r.without_frames} "
                         f"without")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def check_attribution(paths: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]], *, rules=None,
                      phase: str = "all", cache: bool = True) -> AttributionCheck:
    """Attribute ``paths`` (one trace per rank) with all CPU frames and with CPU ops only; compare
    the categories kernel by kernel (``phase``: 'all', 'decode' or 'prefill')."""
    if phase not in PHASES:
        raise UsageError(f"check_attribution: phase must be one of {', '.join(PHASES)}, not {phase!r}")
    plist = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
    if not plist:
        raise TraceError("no trace files given")
    rule_list = build_rules(rules)
    parsed = _load.load_files(plist, cache=cache)
    with_f = assemble(plist, parsed, rule_list)
    def ops_only(d: dict) -> dict:
        fr = d.get("frames")
        keep = fr is not None and len(fr)
        return {**d, "frames": fr[fr["kind"].astype(str) == "op"].reset_index(drop=True)} if keep else dict(d)

    without = assemble(plist, [ops_only(d) for d in parsed], rule_list)
    ka, kb = with_f["kernels"], without["kernels"]
    nmod = sum(int(m.get("module_frames") or 0) for m in with_f["meta"]["ranks"].values())
    warnings = []
    if len(ka) and phase != "all":
        sel = (ka["phase"] == phase).to_numpy()
        if sel.any():
            ka, kb = ka[sel], kb[sel]
        else:
            warnings.append(f"no kernel is in a {phase} step; the check covers all kernels")
            phase = "all"
    dur = ka["dur_us"].to_numpy(float) if len(ka) else np.empty(0)
    tot = float(dur.sum())
    ca = ka["category"].astype(str).to_numpy() if len(ka) else np.empty(0, object)
    cb = kb["category"].astype(str).to_numpy() if len(kb) else np.empty(0, object)
    if not nmod:
        warnings.append("no module frames in this trace (recorded without with_stack=True): both attributions "
                        "use the same evidence, there is nothing to check against")
    agree = float(dur[ca == cb].sum()) / tot if tot > 0 and nmod else np.nan
    cats = sorted(set(ca) | set(cb))
    def shares(cat: np.ndarray) -> list[float]:
        return [float(dur[cat == c].sum()) / tot if tot > 0 else np.nan for c in cats]

    table = pd.DataFrame({"category": cats, "with_frames": shares(ca), "without_frames": shares(cb)})
    table["difference"] = table["without_frames"] - table["with_frames"]
    table = table.sort_values("with_frames", ascending=False).reset_index(drop=True)
    diff = ca != cb
    moves = (pd.DataFrame({"with_frames": ca[diff], "without_frames": cb[diff], "t": dur[diff]})
             .groupby(["with_frames", "without_frames"]).agg(share=("t", "sum")).reset_index())
    moves["share"] = moves["share"] / tot if tot > 0 else np.nan
    moves = moves.sort_values("share", ascending=False).reset_index(drop=True)
    und = undecided(kb, rule_list)[0] if len(kb) else np.nan
    return AttributionCheck([str(p) for p in plist], phase, nmod, tot, agree, table, moves, und, warnings)
