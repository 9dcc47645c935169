"""The inter-token latency waterfall of a :class:`kit.bench.Reconciliation`: each part of the client's gap
stacked from 0 to the gap, around the median gap and in the slowest 1 % of tokens, side by side."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from kit.plots._profile import MAX_WIDTH_IN, fit_text

_COLORS = {"http": "#8172b3", "output": "#937860", "prefill": "#da8bc3", "host": "#ccb974", "sched": "#b0b0b0",
           "forward": "#4c72b0", "gpu_busy": "#4c72b0", "gpu_idle": "#c7d3e8", "residual": "#ffffff"}


def itl_waterfall(rec, *, ax=None, title: str | None = None) -> Figure:
    """Two waterfalls (median band, slowest 1 %): one bar per part rising from the previous one, ending at
    the client's ITL. A refused reconciliation draws its reason instead of bars."""
    fig = ax.figure if ax is not None else plt.subplots(figsize=(min(MAX_WIDTH_IN, 9.0), 4.4))[1].figure
    ax = ax or fig.axes[0]
    if rec.refused:
        ax.axis("off")
        ax.text(0.5, 0.5, textwrap.fill("Reconciliation refused: " + rec.refused, 90), ha="center", va="center",
                fontsize=10)
        plt.close(fig)
        return fig
    t = rec.table.set_index("part")
    names = [p for p in [*rec.parts, "residual"] if p in t.index]
    labels = [t.loc[p, "label"] for p in names] + ["client ITL"]
    width = 0.38
    x = np.arange(len(labels))
    top = 0.0
    mid, slow = rec.band_columns
    for off, band, edge in ((-width / 2, mid, "#333333"), (width / 2, slow, "#aa3333")):
        level = 0.0
        for i, p in enumerate(names):
            v = float(t.loc[p, band])
            top = max(top, level, level + v)
            ax.bar(x[i] + off, abs(v), bottom=level if v >= 0 else level + v, width=width,
                   color=_COLORS.get(p, "#999999"), edgecolor=edge, linewidth=0.7,
                   hatch="" if band == mid else "//")
            level += v
        gap = float(t.loc["client ITL", band])
        ax.bar(x[-1] + off, gap, width=width, color="#dd8452", edgecolor=edge, linewidth=0.7,
               hatch="" if band == mid else "//",
               label=f"{'tokens around the median' if band == mid else 'slowest 1 %'}: "
                                                            f"{gap:.2f} ms")
        top = max(top, gap)
    ax.set_ylim(0, 1.15 * top)
    ax.set_xticks(x)
    ax.set_xticklabels([textwrap.fill(lbl, 14) for lbl in labels], fontsize=8)
    ax.set_ylabel("ms per token")
    ax.legend(fontsize=8, loc="upper left")
    src = "GPU split by " + rec.trace if rec.trace else "forward not split (no trace)"
    ax.set_title(title or f"Where the inter-token latency goes (clock offset {rec.offset_ms:+.2f} "
                          f"+/- {rec.offset_bound_ms:.2f} ms; {src})", fontsize=10)
    fit_text(fig)
    plt.close(fig)
    return fig
