"""The structural waterfall of a :class:`kit.profile.StructuralDiff`: from A's step to B's, one bar per
(layer kind, operation family) node."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kit.plots._compare import waterfall_bars
from kit.plots._profile import fit_text
from kit.util import clip, signed

__all__ = ["structure_waterfall"]


def structure_waterfall(diff, *, top: int = 8, title: str | None = None) -> Figure:
    """A's step time, then the ``top`` largest node differences (the rest as one bar), then B's step time.
    Hatched bars are within noise; a merged node (one side fuses what the other splits) is marked ``*``."""
    a_lab, b_lab = diff.labels
    nodes = diff.nodes.reindex(diff.nodes["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    keep, rest = nodes.head(top), nodes.iloc[top:]
    start, end = diff.step_us
    labels, bottoms, heights, colors, hatches, deltas = [f"{a_lab}\nstep"], [0.0], [start], ["#4c72b0"], [""], []
    level = start
    rows = [(f"{r.family}{' *' if r.merged else ''}\n{clip(str(r.layer_kind), 18, ellipsis='…')}", float(r.delta_us),
             bool(r.beyond_noise)) for r in keep.itertuples()]
    if len(rest):
        rows.append((f"{len(rest)} other nodes", float(rest["delta_us"].sum()), False))
    if abs(diff.residual_us) > 1e-6:
        rows.append(("residual", diff.residual_us, False))
    for name, d, beyond in rows:
        labels.append(name)
        bottoms.append(level if d >= 0 else level + d)
        heights.append(abs(d))
        colors.append("#c44e52" if d > 0 else "#55a868")
        hatches.append("" if beyond else "//")
        deltas.append(d)
        level += d
    for items, last in ((labels, f"{b_lab}\nstep"), (bottoms, 0.0), (heights, end), (colors, "#dd8452"), (hatches, "")):
        items.append(last)
    fig, ax, x = waterfall_bars(labels, bottoms, heights, colors, hatches, per_bar_in=0.9, height_in=4.8)
    for i, d in enumerate(deltas, start=1):
        ax.annotate(signed(d), (x[i], bottoms[i] + heights[i]), ha="center", va="bottom", fontsize=8)
    lo = min([start, end] + [b for b in bottoms[1:-1]])
    ax.set_ylim(bottom=max(0.0, lo - 0.1 * max(abs(end - start), 1.0)))
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("us per step (wall)")
    ax.set_title(title or f"Where the step-time gap sits, by layer kind and operation: {a_lab} -> {b_lab} "
                          f"({end - start:+,.1f} us/step)", fontsize=10)
    ax.legend(handles=[Patch(facecolor="white", edgecolor="#333333", hatch="//", label="within noise")],
              loc="upper left", fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig = fit_text(fig)
    plt.close(fig)
    return fig
