"""Interactive explorer of a decode profile (ipywidgets: pick a rank, a step and a category) and the static
views behind it (``top_kernels``, ``category_time``, ``category_plot``), which the notebooks call so the
exported report is complete without a kernel."""
from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from kit.util import clip

__all__ = ["explore", "top_kernels", "category_time", "category_plot"]


def _select(profile: Any, *, rank: int | None = None, step: int | None = None, category: str | None = None,
            phase: str | None = "decode") -> pd.DataFrame:
    k = profile.kernels
    if phase and phase != "all" and "phase" in k:
        k = k[k["phase"] == phase]
    for column, value in (("rank", rank), ("step", step), ("category", category)):
        if value is not None:
            k = k[k[column] == value]
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
    g["name"] = g["name"].map(lambda s: clip(s, 90))
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
    t = category_time(profile, rank=rank, step=step, phase=phase)
    own = ax is None
    fig, ax = plt.subplots(figsize=(7, 0.35 * max(len(t), 3) + 1)) if own else (ax.figure, ax)
    ax.barh(t["category"][::-1], t["time_us"][::-1] / 1e3, color="#4c72b0")
    for y, (v, s) in enumerate(zip(t["time_us"][::-1], t["share"][::-1])):
        ax.text(v / 1e3, y, f" {s:.1%}", va="center", fontsize=8)
    ax.set_xlabel("GPU time (ms)")
    where = ", ".join(x for x in (f"rank {rank}" if rank is not None else "all ranks",
                                  f"step {step}" if step is not None else "all steps", phase or "") if x)
    ax.set_title(title or f"GPU time per category ({where})")
    fig.tight_layout()
    if own:   # like every kit figure: drawn once, as the cell's value or through display()
        plt.close(fig)
    return fig


def explore(profile: Any, *, phase: str = "decode", n: int = 10) -> Any:
    """Widget: rank / step / category pickers -> category bars and the top kernels (live kernel only)."""
    k = _select(profile, phase=phase)
    ranks = sorted(int(r) for r in k["rank"].dropna().unique())
    steps = sorted(int(s) for s in k["step"].dropna().unique()) if "step" in k else []
    cats = sorted(str(c) for c in k["category"].dropna().unique())
    rank_w, step_w, cat_w = (widgets.Dropdown(options=[("all", None)] + [(str(v), v) for v in values], description=name)
                             for name, values in (("rank", ranks), ("step", steps), ("category", cats)))
    out = widgets.Output()

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
    return widgets.VBox([widgets.HBox([rank_w, step_w, cat_w]), out])
