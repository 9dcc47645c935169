"""Profile figures: category shares, step timeline, top kernels; link matrix, A/B (documented in the package
docstring), and the sizes every kit figure keeps to."""
from __future__ import annotations

import re
import textwrap
from typing import Any, Mapping

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kit.errors import UsageError
from kit.profile import category_colours
from kit.util import clip

CATEGORY_COLORS = {**category_colours(), "idle": "#e0e0e0"}   # categories.toml's [[category]] colours


# The widest figure drawn here, in inches: at the inline backend's 100 dpi it stays inside the output
# column of a report page (kit.report.PAGE_WIDTH_PX), legend included, so the page never shrinks it.
MAX_WIDTH_IN = 10.0
# The smallest text drawn here, in points (~9.7 px at 100 dpi): tick labels of crowded axes.
MIN_FONT_PT = 7


def _detach(fig: Figure) -> Figure:
    """Finish ``fig`` (:func:`fit_text`) and close it in pyplot before handing it back: a notebook then
    draws it once, as the cell's value or through ``display(fig)``, not a second time when the inline
    backend flushes open figures."""
    fit_text(fig)
    plt.close(fig)
    return fig


def fit_ticks(ax, wrap: int = 14) -> None:
    """Bar labels along the x axis that do not overlap: long ones wrapped (at ``_``, ``-``, ``/``, spaces) to
    ``wrap`` characters a line, at most four lines; if neighbours still overlap, turned 35 degrees."""
    def wrapped(text: str) -> str:
        spaced = re.sub(r"([_/-])", r"\1 ", text)
        lines = textwrap.wrap(spaced, wrap, break_long_words=True) or [text]
        out = [ln.replace("_ ", "_").replace("/ ", "/").replace("- ", "-") for ln in lines]
        return "\n".join(out[:4]) + ("…" if len(out) > 4 else "")

    labels = [t.get_text() for t in ax.get_xticklabels()]
    if not any(len(t) > wrap for t in labels):
        return
    ax.set_xticks(ax.get_xticks(), [wrapped(t) for t in labels])
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    if any(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:])):
        ax.tick_params(axis="x", labelrotation=35)
        for t in ax.get_xticklabels():
            t.set_ha("right")


def fit_text(fig: Figure) -> Figure:
    """Wrap every title, suptitle and axis label of ``fig`` to the figure's width, line by line, and
    lay the figure out again. A long provenance caption in a title would otherwise widen the saved
    image (the inline backend crops to the content, ``bbox_inches="tight"``) until the plot is a
    sliver of a picture that the page then shrinks, legend and all, below readable size."""
    across = fig.get_figwidth() * 72.0  # text sizes are in points: measure the figure in points too
    texts = [(fig._suptitle, across)] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.axes:
        texts += [(ax.title, across), (ax._left_title, across), (ax._right_title, across),
                  (ax.xaxis.label, across), (ax.yaxis.label, fig.get_figheight() * 72.0)]
    for t, room in texts:
        if not t.get_text():
            continue
        limit = max(20, int(room / (0.65 * t.get_fontsize())))  # DejaVu Sans: ~0.6 em per character
        lines = [w for line in t.get_text().split("\n")
                 for w in (textwrap.wrap(line, limit, break_on_hyphens=False) or [""])]
        t.set_text("\n".join(lines))
    if not fig.get_layout_engine():
        fig.tight_layout()
    return fig


def _color(cat: str) -> str:
    return CATEGORY_COLORS.get(cat, "#444444")


def _short(name: str, n: int = 60) -> str:
    return clip(name.replace("void ", ""), n, ellipsis="…")


def category_shares(summaries, *, of: str = "wall", title: str | None = None) -> Figure:
    """Stacked bars of category shares: one bar per rank (a single Summary) or per configuration
    (a ``{label: Summary}`` mapping, each bar the summary's whole breakdown). ``of='wall'``: shares
    of the wall time (GPU span of the steps), GPU idle as a segment; kernels that overlap on several
    streams stack past 100%. ``of='kernel'``: shares of kernel time only (bars sum to 100%)."""
    if of not in ("wall", "kernel"):
        raise UsageError(f"of must be 'wall' or 'kernel', not {of!r}")
    if isinstance(summaries, Mapping):
        table = pd.DataFrame({str(label): s.categories.set_index("category")["time_us"]
                              for label, s in summaries.items()}).T.fillna(0.0)
        wall = pd.Series({str(label): s.wall_time_us for label, s in summaries.items()}, dtype=float)
        xlabel = "configuration"
    else:
        table = summaries.rank_categories.copy().fillna(0.0)
        wall = summaries.per_rank.set_index("rank")["wall_us"].reindex(table.index).astype(float)
        table.index = wall.index = [f"rank {r}" for r in table.index]
        xlabel = "rank"
    if of == "kernel" and "idle" in table.columns:
        table = table.drop(columns=["idle"])
    # Shares of wall time use each bar's wall time (the steps' GPU spans): kernels overlapping on
    # several streams can then stack past 100%, which is the overlap, not an error. Without a wall
    # time (graph replays without per-kernel timing) the bar falls back to its own total.
    denom = table.sum(axis=1) if of == "kernel" else wall.where(wall > 0, table.sum(axis=1))
    shares = table.div(denom.where(denom > 0, 1.0), axis=0) * 100.0
    cols = [c for c in shares.columns if shares[c].sum() > 0]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(5.0, 0.9 * len(shares) + 3.5)), 4.2), constrained_layout=True)
    bottom = pd.Series(0.0, index=shares.index)
    for c in cols:
        ax.bar(shares.index, shares[c], bottom=bottom, label=c, color=_color(c), edgecolor="white", linewidth=0.5)
        bottom += shares[c]
    ax.set_ylabel(f"% of {'wall' if of == 'wall' else 'kernel'} time")
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, max(100.0, float(bottom.max()) * 1.02) if len(bottom) else 100.0)
    ax.set_title(title or f"Kernel categories, share of {of} time")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fit_ticks(ax)
    return _detach(fig)


def step_timeline(summary, *, rank: int | None = None, title: str | None = None) -> Figure:
    """Per-step stacked category time (kernel time) with the step's GPU wall time as a line."""
    ps = summary.per_step
    if ps.empty:
        raise ValueError("this summary has no steps (no step annotations, graph launches or bursts found)")
    r = ps["rank"].min() if rank is None else rank
    ps = ps[ps["rank"] == r].sort_values("step")
    fixed = {"rank", "step", "name", "phase", "start_us", "wall_us", "kernels", "kernel_us"}
    cats = [c for c in ps.columns if c not in fixed and ps[c].sum() > 0]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(6.0, 0.35 * len(ps) + 3.5)), 4.2), constrained_layout=True)
    x = range(len(ps))
    bottom = pd.Series(0.0, index=ps.index)
    for c in cats:
        ax.bar(x, ps[c], bottom=bottom, label=c, color=_color(c), width=0.8)
        bottom += ps[c]
    ax.plot(list(x), ps["wall_us"], color="black", marker=".", label="step wall (GPU span)")
    every = max(1, -(-len(ps) // 24))  # at most ~24 step labels across the figure
    ax.set_xticks(list(x)[::every])
    ax.set_xticklabels([str(n)[:18] for n in ps["name"]][::every], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("time per step (µs)")
    ax.set_title(title or f"Per-step kernel time by category, rank {r} ({summary.phase})")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    return _detach(fig)


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
    return _detach(fig)


def module_time(summary, *, n: int = 12, title: str | None = None) -> Figure:
    """The module view: kernel time per module class (left: the module inside the layer › the innermost
    module, top ``n``) and per layer index (right: stacked by the module inside the layer). Needs a
    trace recorded with module frames (``with_stack=True``); raises ValueError otherwise."""
    mods, layers = summary.modules, summary.layers
    if mods.empty or set(mods["block"]) <= {"(no module)"}:
        raise ValueError("this summary has no module frames (record the trace with with_stack=True)")
    if mods["time_us"].isna().all():
        raise ValueError("module times are unavailable: " + str(summary.categories_unavailable))
    rows = mods.head(n).iloc[::-1]
    blocks = list(dict.fromkeys(mods.sort_values("time_us", ascending=False)["block"]))
    palette = plt.get_cmap("tab20").colors
    colour = {b: palette[i % len(palette)] for i, b in enumerate(blocks)}
    has_layers = len(layers) > 0
    fig, axes = plt.subplots(1, 2 if has_layers else 1, figsize=(MAX_WIDTH_IN if has_layers else 8.0,
                             max(3.0, 0.3 * len(rows) + 1.4)), constrained_layout=True, squeeze=False)
    ax = axes[0][0]
    labels = [b if b == m else f"{b} › {m}" for b, m in zip(rows["block"], rows["module"])]
    ax.barh(range(len(rows)), rows["time_us"], color=[colour[b] for b in rows["block"]])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_short(x, 48) for x in labels], fontsize=8)
    for i, sh in enumerate(rows["share_of_kernel"]):
        ax.annotate(f" {100 * sh:.1f}%", (rows["time_us"].iloc[i], i), va="center", fontsize=7)
    ax.set_xlabel("kernel time (µs)")
    ax.set_title("by module class")
    if has_layers:
        ax2 = axes[0][1]
        piv = layers.pivot_table(index="layer", columns="block", values="time_us", aggfunc="sum", fill_value=0.0)
        piv = piv[[b for b in blocks if b in piv.columns]]
        bottom = pd.Series(0.0, index=piv.index)
        # each layer's kind (attention+mlp, ssm, attention+moe ...) under its index: hybrids at a glance
        kind = layers.drop_duplicates("layer").set_index("layer")["kind"] if "kind" in layers else None
        ticks = [f"{i}\n{kind.get(i, '')}" if kind is not None else str(i) for i in piv.index]
        for b in piv.columns:
            ax2.bar(ticks, piv[b], bottom=bottom.to_numpy(), label=b, color=colour[b])
            bottom += piv[b]
        ax2.set_xlabel("layer index and kind")
        ax2.set_ylabel("kernel time (µs)")
        ax2.set_title("by layer")
        ax2.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
        if len(piv) > 16:
            ax2.tick_params(axis="x", labelrotation=90, labelsize=MIN_FONT_PT)
    fig.suptitle(title or f"Kernel time per module ({summary.phase})")
    return _detach(fig)


# Environment and A/B views

_LINK_COLOURS = {"X": "#ffffff", "NV": "#1a7f37", "PIX": "#9be9a8", "PXB": "#fff8c5", "PHB": "#ffd8b5",
                 "NODE": "#ffb3a7", "SYS": "#cf222e"}


def link_matrix_plot(topology: Any, *, title: str | None = None, ax: Any = None) -> Any:
    """The GPU-GPU link matrix of a :class:`kit.env.Topology` as a coloured grid (NVLink green, SYS red)."""
    m = topology.gpu_links
    n = len(m)
    own = ax is None  # a figure made here is closed before it is returned; a caller's axes are not
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * max(n, 2), 0.8 + 0.5 * max(n, 2))) if own else (ax.figure, ax)
    seen = {}
    for i, row in enumerate(m.index):
        for j, col in enumerate(m.columns):
            tok = str(m.loc[row, col]).strip()
            key = "NV" if tok.startswith("NV") else tok
            colour = _LINK_COLOURS.get(key, "#d0d7de")
            seen.setdefault(key, colour)
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="#57606a", lw=0.5))
            ax.text(j + 0.5, i + 0.5, tok, ha="center", va="center", fontsize=8)
    ax.set_xlim(0, n)
    ax.set_ylim(n, 0)
    ax.set_xticks([x + 0.5 for x in range(n)], list(m.columns), fontsize=8)
    ax.set_yticks([y + 0.5 for y in range(n)], list(m.index), fontsize=8)
    ax.set_aspect("equal")
    ax.set_title(title or f"GPU link matrix ({topology.summary})", fontsize=10)
    handles = [Patch(facecolor=c, edgecolor="#57606a", label=k) for k, c in seen.items() if k != "X"]
    if handles:
        ax.legend(handles=handles, bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8, frameon=False)
    return _detach(fig) if own else fit_text(fig)


def ab_plot(table: pd.DataFrame, *, value: str = "tok_s", label: str = "config", baseline: str | None = None,
            title: str = "Single-stream decode", unit: str = "tok/s", ax: Any = None) -> Any:
    """Bars of ``value`` per configuration, annotated with the ratio to ``baseline`` (a label)."""
    t = table[[label, value]].dropna()
    own = ax is None
    fig, ax = plt.subplots(figsize=(8, 0.45 * max(len(t), 3) + 1.2)) if own else (ax.figure, ax)
    has_base = baseline is not None and (t[label] == baseline).any()
    base = float(t.loc[t[label] == baseline, value].iloc[0]) if has_base else None
    colours = ["#8c959f" if lab == baseline else "#4c72b0" for lab in t[label]]
    ax.barh(list(t[label])[::-1], list(t[value])[::-1], color=colours[::-1])
    for y, v in enumerate(list(t[value])[::-1]):
        note = f" {v:.1f}" + (f"  (x{v / base:.2f})" if base else "")
        ax.text(v, y, note, va="center", fontsize=8)
    ax.set_xlabel(unit)
    ax.set_title(title + (f" (baseline: {baseline})" if baseline else ""))
    ax.set_xlim(0, float(t[value].max()) * 1.25)
    return _detach(fig) if own else fit_text(fig)

