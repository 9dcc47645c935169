"""The structural waterfall of a :class:`kit.profile.StructuralDiff`: from A's step to B's, one bar per
(layer kind, operation family) node."""
from __future__ import annotations

from matplotlib.figure import Figure

from kit.plots._compare import waterfall
from kit.plots._profile import _detach
from kit.util import clip


def structure_waterfall(diff, *, top: int = 8, title: str | None = None) -> Figure:
    """A's step time, then the ``top`` largest node differences (the rest as one bar), then B's step time.
    Hatched bars are within noise; a merged node (one side fuses what the other splits) is marked ``*``."""
    a_lab, b_lab = diff.labels
    nodes = diff.nodes.reindex(diff.nodes["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    keep, rest = nodes.head(top), nodes.iloc[top:]
    start, end = diff.step_us
    rows = [(f"{r.family}{' *' if r.merged else ''}\n{clip(str(r.layer_kind), 18, ellipsis='…')}", float(r.delta_us),
             bool(r.beyond_noise)) for r in keep.itertuples()]
    if len(rest):
        rows.append((f"{len(rest)} other nodes", float(rest["delta_us"].sum()), False))
    if abs(diff.residual_us) > 1e-6:
        rows.append(("residual", diff.residual_us, False))
    steps = [(name, d, "#c44e52" if d > 0 else "#55a868", beyond) for name, d, beyond in rows]
    fig, ax, _, bottoms, _ = waterfall(
        f"{a_lab}\nstep", f"{b_lab}\nstep", start, end, steps, per_bar_in=0.9, height_in=4.8,
        ylabel="us per step (wall)", title=title or f"Where the step-time gap sits, by layer kind and operation: "
        f"{a_lab} -> {b_lab} ({end - start:+,.1f} us/step)")
    ax.set_ylim(bottom=max(0.0, min([start, end] + bottoms[1:-1]) - 0.1 * max(abs(end - start), 1.0)))
    return _detach(fig)
