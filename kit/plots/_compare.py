"""Comparison figures: the waterfall from run A's step time to run B's, top kernel families side by side."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kit.plots._profile import CATEGORY_COLORS, MAX_WIDTH_IN, _detach
from kit.util import clip, signed

_KIND_COLORS = {"overlap": "#c5b0d5", "gpu-idle": CATEGORY_COLORS["idle"], "launch-gap": "#b0b0b0",
                "unattributed": "#ffffff"}


def waterfall(first: str, last: str, start: float, end: float, steps: list[tuple[str, float, str, bool]], *,
              per_bar_in: float, height_in: float, ylabel: str, title: str):
    """A waterfall from ``start`` (bar ``first``) through ``steps`` ((label, delta, colour, beyond noise): a
    step within noise is hatched, its delta written on it) to ``end`` (bar ``last``), on a new figure sized to
    its bars: (fig, ax, x, bottoms, heights)."""
    labels, bottoms, heights, colors = [first], [0.0], [start], ["#4c72b0"]
    level = start
    for label, d, color, _ in steps:
        labels.append(label)
        bottoms.append(level if d >= 0 else level + d)
        heights.append(abs(d))
        colors.append(color)
        level += d
    labels, bottoms, heights, colors = labels + [last], bottoms + [0.0], heights + [end], colors + ["#dd8452"]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(7.0, per_bar_in * len(labels) + 2)), height_in))
    x = np.arange(len(labels))
    bars = ax.bar(x, heights, bottom=bottoms, color=colors, edgecolor="#333333", linewidth=0.6)
    for i, (bar, (_, d, _, beyond)) in enumerate(zip(bars[1:], steps), start=1):
        bar.set_hatch("" if beyond else "//")
        ax.annotate(signed(d), (x[i], bottoms[i] + heights[i]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(facecolor="white", edgecolor="#333333", hatch="//", label="within noise")],
              loc="upper left", fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return fig, ax, x, bottoms, heights


def compare_waterfall(cmp, *, top: int = 8, title: str | None = None) -> Figure:
    """Waterfall of a :class:`kit.profile.Comparison`: A's step time, then each part of the
    difference (the ``top`` largest; the rest as one bar), ending at B's step time (measured if the
    comparison was given measured times). Hatched bars are within the step-to-step noise."""
    a_lab, b_lab = cmp.labels
    parts = cmp.parts[cmp.parts["kind"] != "total"].copy()
    parts = parts.reindex(parts["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    keep, rest = parts.head(top), parts.iloc[top:]
    start = cmp.measured_ms[0] * 1e3 if cmp.measured_ms else cmp.step_us[0]
    end = start + cmp.delta_us
    steps = [(clip(str(r.part), 22, ellipsis="…"), float(r.delta_us),
              CATEGORY_COLORS.get(r.part, _KIND_COLORS.get(r.kind, "#999999")), bool(r.beyond_noise))
             for r in keep.itertuples()]
    if len(rest):
        steps.append((f"{len(rest)} other parts", float(rest["delta_us"].sum()), "#999999", False))
    fig, ax, x, bottoms, heights = waterfall(
        f"{a_lab}\nstep", f"{b_lab}\nstep", start, end, steps, per_bar_in=0.85, height_in=4.6,
        ylabel="us per decode step", title=title or f"Where the gap goes: {a_lab} -> {b_lab} "
        f"({signed(cmp.delta_us)} us/step, noise +-{cmp.noise_us:,.1f})")
    ax.annotate(f"{start:,.1f}", (x[0], start), ha="center", va="bottom", fontsize=8)
    ax.annotate(f"{end:,.1f}", (x[-1], end), ha="center", va="bottom", fontsize=8)
    lo = min(bottoms[1:-1]) if steps else 0.0
    ax.set_ylim(bottom=max(0.0, min(lo, start, end) - 0.15 * max(abs(cmp.delta_us), 1.0) - 0.02 * max(start, end)))
    return _detach(fig)  # like every kit figure: drawn once, as the cell's value or through display()


def compare_families(cmp, *, n: int = 10, title: str | None = None) -> Figure:
    """The ``n`` kernel families with the largest time in either run, A and B side by side
    (us per step), coloured by category; families of one run only are marked."""
    f = cmp.families.copy()
    f["top"] = f[["a_us", "b_us"]].max(axis=1)
    f = f.sort_values(["top", "family"], ascending=[False, True]).head(n).iloc[::-1]
    fig, ax = plt.subplots(figsize=(9.0, 0.42 * len(f) + 1.6))
    y = np.arange(len(f))
    cols = [CATEGORY_COLORS.get(str(c), "#444444") for c in f["category"]]
    ax.barh(y + 0.2, f["a_us"], height=0.38, color=cols, edgecolor="#333333", linewidth=0.5, label=cmp.labels[0])
    ax.barh(y - 0.2, f["b_us"], height=0.38, color=cols, edgecolor="#333333", linewidth=0.5, hatch="..",
            label=cmp.labels[1])
    names = [("* " if p != "both" else "") + clip(str(nm), 48, ellipsis="…")
             for nm, p in zip(f["family"], f["presence"])]
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel("us per decode step")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or f"Top kernel families: {cmp.labels[0]} (plain) vs {cmp.labels[1]} (dotted); "
                          "* = in one run only", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _detach(fig)  # like every kit figure: drawn once, as the cell's value or through display()
