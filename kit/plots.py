"""The kit's plots: matplotlib figures sized and labelled to read well in an exported HTML report.

Profile plots (from :class:`kit.profile.Summary`):

- :func:`category_shares` — stacked bars of kernel-category shares, one bar per rank of one summary
  or per configuration (a dict of labelled summaries), GPU idle as its own segment.
- :func:`step_timeline` — per-step stacked category time with the step's wall time as a line.
- :func:`top_kernels` — the top kernels of each category, horizontal bars.

Log and speculative-decoding plots (from :mod:`kit.logs` / :mod:`kit.models`):

- :func:`acceptance_over_time`, :func:`acceptance_per_position`, :func:`throughput_over_time`,
  :func:`speedup_curves` (defined in ``kit._plots_logs``).

Every function returns the ``Figure`` (nothing is shown or saved here); colours are fixed per
category so figures side by side compare.
"""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from kit._plots_logs import (
    acceptance_over_time,
    acceptance_per_position,
    speedup_curves,
    throughput_over_time,
)

__all__ = [
    "CATEGORY_COLORS",
    "acceptance_over_time",
    "acceptance_per_position",
    "category_shares",
    "speedup_curves",
    "step_timeline",
    "throughput_over_time",
    "top_kernels",
]

CATEGORY_COLORS = {
    "allreduce": "#d62728", "other-collectives": "#ff9896", "attention": "#1f77b4", "moe": "#9467bd",
    "gemm": "#2ca02c", "norm": "#bcbd22", "activation": "#17becf", "rope": "#e377c2", "quantization": "#8c564b",
    "kv-cache write": "#aec7e8", "convolution": "#393b79", "sampling": "#ffbb78", "memcpy/memset": "#c49c94",
    "elementwise": "#98df8a", "other": "#7f7f7f", "idle": "#e0e0e0",
}


def _color(cat: str) -> str:
    return CATEGORY_COLORS.get(cat, "#444444")


def _short(name: str, n: int = 60) -> str:
    s = name.replace("void ", "")
    return s if len(s) <= n else s[: n - 1] + "…"


def category_shares(summaries, *, of: str = "wall", title: str | None = None) -> Figure:
    """Stacked bars of category shares: one bar per rank (a single Summary) or per configuration
    (a ``{label: Summary}`` mapping, each bar the summary's whole breakdown). ``of='wall'`` includes
    GPU idle as a segment; ``of='kernel'`` shows shares of kernel time only."""
    if of not in ("wall", "kernel"):
        raise ValueError("of must be 'wall' or 'kernel'")
    if isinstance(summaries, Mapping):
        rows = {}
        for label, s in summaries.items():
            t = s.categories.set_index("category")["time_us"]
            rows[str(label)] = t
        table = pd.DataFrame(rows).T.fillna(0.0)
        xlabel = "configuration"
    else:
        table = summaries.rank_categories.copy().fillna(0.0)
        table.index = [f"rank {r}" for r in table.index]
        xlabel = "rank"
    if of == "kernel" and "idle" in table.columns:
        table = table.drop(columns=["idle"])
    denom = table.sum(axis=1).where(lambda x: x > 0, 1.0)
    shares = table.div(denom, axis=0) * 100.0
    cols = [c for c in shares.columns if shares[c].sum() > 0]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(shares) + 3.5), 4.2), constrained_layout=True)
    bottom = pd.Series(0.0, index=shares.index)
    for c in cols:
        ax.bar(shares.index, shares[c], bottom=bottom, label=c, color=_color(c), edgecolor="white", linewidth=0.5)
        bottom += shares[c]
    ax.set_ylabel(f"% of {'wall' if of == 'wall' else 'kernel'} time")
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, 100)
    ax.set_title(title or f"Kernel categories, share of {of} time")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    if len(shares) > 6:
        ax.tick_params(axis="x", labelrotation=45)
    return fig


def step_timeline(summary, *, rank: int | None = None, title: str | None = None) -> Figure:
    """Per-step stacked category time (kernel time) with the step's GPU wall time as a line."""
    ps = summary.per_step
    if ps.empty:
        raise ValueError("this summary has no steps (no step annotations, graph launches or bursts found)")
    r = ps["rank"].min() if rank is None else rank
    ps = ps[ps["rank"] == r].sort_values("step")
    fixed = {"rank", "step", "name", "phase", "start_us", "wall_us", "kernels", "kernel_us"}
    cats = [c for c in ps.columns if c not in fixed and ps[c].sum() > 0]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(ps) + 3.5), 4.2), constrained_layout=True)
    x = range(len(ps))
    bottom = pd.Series(0.0, index=ps.index)
    for c in cats:
        ax.bar(x, ps[c], bottom=bottom, label=c, color=_color(c), width=0.8)
        bottom += ps[c]
    ax.plot(list(x), ps["wall_us"], color="black", marker=".", label="step wall (GPU span)")
    ax.set_xticks(list(x))
    ax.set_xticklabels([str(n)[:18] for n in ps["name"]], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("time per step (µs)")
    ax.set_title(title or f"Per-step kernel time by category, rank {r} ({summary.phase})")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    return fig


def top_kernels(summary, *, categories: list[str] | None = None, n: int = 5, title: str | None = None) -> Figure:
    """Horizontal bars of the top ``n`` kernels in each category (default: the categories with time)."""
    top = summary.top
    if top.empty:
        raise ValueError("this summary has no kernels")
    cats = categories or [c for c in summary.categories["category"] if c in set(top["category"])]
    rows = pd.concat([top[top["category"] == c].head(n) for c in cats], ignore_index=True)
    fig, ax = plt.subplots(figsize=(9.0, max(2.5, 0.28 * len(rows) + 1.2)), constrained_layout=True)
    y = list(range(len(rows)))[::-1]
    ax.barh(y, rows["time_us"], color=[_color(c) for c in rows["category"]])
    ax.set_yticks(y)
    ax.set_yticklabels([f"[{c}] {_short(nm)}" for c, nm in zip(rows["category"], rows["name"])], fontsize=7)
    ax.set_xlabel("kernel time (µs)")
    ax.set_title(title or f"Top kernels per category ({summary.phase})")
    return fig
