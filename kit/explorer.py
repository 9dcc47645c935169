"""Interactive explorer of a decode profile (ipywidgets) and the static views that back it up.

``explore(profile)`` gives a live-session widget: pick a rank, a step and a category, see the time
per category of that selection and its top kernels. Widgets need a kernel to recompute, so every
view it shows also exists as a plain function returning a DataFrame or a matplotlib figure
(``top_kernels``, ``category_time``, ``category_plot``); the notebooks call those, so the exported
report is complete without a kernel. Two more static views the notebooks share live here:
``link_matrix_plot`` (the ``nvidia-smi topo -m`` matrix as a coloured grid) and ``ab_plot``
(single-stream tok/s of the compared configurations against a baseline).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["explore", "top_kernels", "category_time", "category_plot", "link_matrix_plot", "ab_plot"]


def _select(profile: Any, *, rank: int | None = None, step: int | None = None, category: str | None = None,
            phase: str | None = "decode") -> pd.DataFrame:
    k = profile.kernels
    if phase and phase != "all" and "phase" in k:
        k = k[k["phase"] == phase]
    if rank is not None:
        k = k[k["rank"] == rank]
    if step is not None:
        k = k[k["step"] == step]
    if category is not None:
        k = k[k["category"] == category]
    return k


def top_kernels(profile: Any, *, rank: int | None = None, step: int | None = None, category: str | None = None,
                phase: str | None = "decode", n: int = 10) -> pd.DataFrame:
    """The ``n`` kernels with the most GPU time in the selection: name, category, calls, time, share."""
    k = _select(profile, rank=rank, step=step, category=category, phase=phase)
    if not len(k):
        return pd.DataFrame(columns=["name", "category", "calls", "time_us", "share"])
    g = (k.groupby(["name", "category"], observed=True)["dur_us"].agg(["count", "sum"]).reset_index()
         .rename(columns={"count": "calls", "sum": "time_us"}).sort_values("time_us", ascending=False))
    g["share"] = g["time_us"] / float(k["dur_us"].sum())
    g["name"] = g["name"].map(lambda s: s if len(s) <= 90 else s[:87] + "...")
    return g.head(n).reset_index(drop=True)


def category_time(profile: Any, *, rank: int | None = None, step: int | None = None,
                  phase: str | None = "decode") -> pd.DataFrame:
    """GPU time per category in the selection (µs and share of kernel time), largest first."""
    k = _select(profile, rank=rank, step=step, phase=phase)
    if not len(k):
        return pd.DataFrame(columns=["category", "time_us", "share"])
    g = k.groupby("category", observed=True)["dur_us"].sum().sort_values(ascending=False)
    out = g.rename("time_us").reset_index()
    out["share"] = out["time_us"] / float(g.sum())
    return out


def category_plot(profile: Any, *, rank: int | None = None, step: int | None = None,
                  phase: str | None = "decode", title: str | None = None, ax: Any = None) -> Any:
    """Horizontal bars of GPU time per category for the selection; returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    t = category_time(profile, rank=rank, step=step, phase=phase)
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 0.35 * max(len(t), 3) + 1))
    else:
        fig = ax.figure
    ax.barh(t["category"][::-1], t["time_us"][::-1] / 1e3, color="#4c72b0")
    for y, (v, s) in enumerate(zip(t["time_us"][::-1], t["share"][::-1])):
        ax.text(v / 1e3, y, f" {s:.1%}", va="center", fontsize=8)
    ax.set_xlabel("GPU time (ms)")
    where = ", ".join(x for x in (f"rank {rank}" if rank is not None else "all ranks",
                                  f"step {step}" if step is not None else "all steps", phase or "") if x)
    ax.set_title(title or f"GPU time per category ({where})")
    fig.tight_layout()
    return fig


def explore(profile: Any, *, phase: str = "decode", n: int = 10) -> Any:
    """Widget: rank / step / category pickers -> category bars and the top kernels (live kernel only)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    k = _select(profile, phase=phase)
    ranks = sorted(int(r) for r in k["rank"].dropna().unique())
    steps = sorted(int(s) for s in k["step"].dropna().unique()) if "step" in k else []
    cats = sorted(str(c) for c in k["category"].dropna().unique())
    rank_w = w.Dropdown(options=[("all", None)] + [(str(r), r) for r in ranks], description="rank")
    step_w = w.Dropdown(options=[("all", None)] + [(str(s), s) for s in steps], description="step")
    cat_w = w.Dropdown(options=[("all", None)] + [(c, c) for c in cats], description="category")
    out = w.Output()

    def render(*_: Any) -> None:
        with out:
            out.clear_output(wait=True)
            fig = category_plot(profile, rank=rank_w.value, step=step_w.value, phase=phase)
            display(fig)
            plt.close(fig)
            display(top_kernels(profile, rank=rank_w.value, step=step_w.value, category=cat_w.value,
                                phase=phase, n=n))

    for widget in (rank_w, step_w, cat_w):
        widget.observe(render, names="value")
    render()
    return w.VBox([w.HBox([rank_w, step_w, cat_w]), out])


_LINK_COLOURS = {"X": "#ffffff", "NV": "#1a7f37", "PIX": "#9be9a8", "PXB": "#fff8c5", "PHB": "#ffd8b5",
                 "NODE": "#ffb3a7", "SYS": "#cf222e"}


def link_matrix_plot(topology: Any, *, title: str | None = None, ax: Any = None) -> Any:
    """The GPU-GPU link matrix of a :class:`kit.env.Topology` as a coloured grid (NVLink green, SYS red)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    m = topology.gpu_links
    n = len(m)
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.0 + 0.6 * max(n, 2), 0.8 + 0.5 * max(n, 2)))
    else:
        fig = ax.figure
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
    fig.tight_layout()
    return fig


def ab_plot(table: pd.DataFrame, *, value: str = "tok_s", label: str = "config", baseline: str | None = None,
            title: str = "Single-stream decode", unit: str = "tok/s", ax: Any = None) -> Any:
    """Bars of ``value`` per configuration, annotated with the ratio to ``baseline`` (a label)."""
    import matplotlib.pyplot as plt

    t = table[[label, value]].dropna()
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 0.45 * max(len(t), 3) + 1.2))
    else:
        fig = ax.figure
    base = float(t.loc[t[label] == baseline, value].iloc[0]) if baseline is not None and (t[label] == baseline).any() else None
    colours = ["#8c959f" if lab == baseline else "#4c72b0" for lab in t[label]]
    ax.barh(list(t[label])[::-1], list(t[value])[::-1], color=colours[::-1])
    for y, v in enumerate(list(t[value])[::-1]):
        note = f" {v:.1f}" + (f"  (x{v / base:.2f})" if base else "")
        ax.text(v, y, note, va="center", fontsize=8)
    ax.set_xlabel(unit)
    ax.set_title(title + (f" (baseline: {baseline})" if baseline else ""))
    ax.set_xlim(0, float(t[value].max()) * 1.25)
    fig.tight_layout()
    return fig

