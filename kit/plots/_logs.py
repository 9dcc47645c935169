"""Plots of parsed serving logs and of the speculative-decoding model (after-idle windows drawn hollow:
summaries exclude them)."""
from __future__ import annotations

import math
from typing import Iterable, Mapping

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from kit import models
from kit.errors import KitError
from kit.logs import LogData, SpecSummary, spec_summary
from kit.plots._profile import _detach
from kit.util import percent_text


def _percent_ticks():
    """Percentage ticks without trailing zeros (``55.5%``, not ``55.50%``)."""
    return matplotlib.ticker.FuncFormatter(lambda x, _pos: percent_text(x))


def _spec_table(data) -> pd.DataFrame:
    spec = getattr(data, "spec", data)
    if not isinstance(spec, pd.DataFrame):
        raise KitError(f"plot needs a kit.logs.LogData or its .spec DataFrame, got {type(data).__name__}")
    return spec


def _x(df: pd.DataFrame) -> tuple[pd.Series, str]:
    if "elapsed_s" in df.columns and df["elapsed_s"].notna().any():
        return df["elapsed_s"], "time since first record (s)"
    return df["line"], "log line"


def _label(data, default: str) -> str:
    name = getattr(data, "name", None)
    return str(name).rsplit("/", 1)[-1] if name else default


def _runs(runs) -> dict:
    """One run or a ``{label: run}`` mapping as ``{label: run}``, each LogData summarised (``spec_summary``)."""
    runs = runs if isinstance(runs, Mapping) else {_label(runs, "run"): runs}
    return {label: spec_summary(r) if isinstance(r, LogData) else r for label, r in runs.items()}


def acceptance_over_time(data, *, title: str | None = None) -> Figure:
    """Mean acceptance length (left) and draft acceptance rate (right) per log window."""
    spec = _spec_table(data)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.0, 3.8), constrained_layout=True)
    if not len(spec):
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no speculative-decoding records", ha="center", va="center", transform=ax.transAxes)
    else:
        x, xlabel = _x(spec)
        idle = spec["after_idle"].fillna(False).astype(bool).to_numpy()
        for ax, col, ylabel in ((ax1, "mean_acceptance_length", "tokens per verify step (incl. bonus)"),
                                (ax2, "draft_acceptance_rate", "draft acceptance (excl. bonus)")):
            y = pd.to_numeric(spec[col], errors="coerce")
            # NaN at each after-idle window: the line breaks there instead of running across the idle gap
            ax.plot(x, y.where(~idle).to_numpy(dtype=float), "o-", color="#1f77b4", ms=4, lw=1, label="window")
            if idle.any():
                ax.plot(x[idle], y[idle], "o", mfc="none", color="#7f7f7f", ms=6, label="after idle (excluded)")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        ax2.yaxis.set_major_formatter(_percent_ticks())
        ax1.legend(fontsize=8, loc="best")
        eng = str(spec["engine"].iloc[0])
        ver = str(spec["version"].iloc[0])
        ks = pd.to_numeric(spec["k"], errors="coerce").dropna()
        k = f"k={int(ks.mode().iloc[0])}" if len(ks) else "k=?"
        fig.suptitle(title or f"Speculative acceptance over time — {eng} {ver}, {k}")
    if title and not len(spec):
        fig.suptitle(title)
    return _detach(fig)


def acceptance_per_position(runs, *, title: str | None = None) -> Figure:
    """Per-position acceptance (probability that draft token i is accepted) of one run or of a
    ``{label: run}`` mapping; a run is a LogData, a SpecSummary or a sequence of rates."""
    series: dict[str, list[float]] = {}
    for label, run in _runs(runs).items():
        pp = run.per_position if isinstance(run, SpecSummary) else run
        if pp:
            series[str(label)] = [float(p) for p in pp]
    fig, ax = plt.subplots(figsize=(6.5, 3.8), constrained_layout=True)
    if not series:
        ax.text(0.5, 0.5, "no per-position acceptance printed", ha="center", va="center", transform=ax.transAxes)
    else:
        width = 0.8 / len(series)
        for i, (label, pp) in enumerate(series.items()):
            pos = np.arange(1, len(pp) + 1) + (i - (len(series) - 1) / 2) * width
            ax.bar(pos, pp, width=width, label=label)
        ax.set_xlabel("draft position")
        ax.set_ylabel("acceptance")
        ax.set_xticks(range(1, max(len(p) for p in series.values()) + 1))
        ax.yaxis.set_major_formatter(_percent_ticks())
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    ax.set_title(title or "Acceptance per draft position")
    return _detach(fig)


def throughput_over_time(data, *, title: str | None = None) -> Figure:
    """Decode throughput (tok/s) per log window: SGLang decode lines and/or vLLM throughput lines."""
    fig, ax = plt.subplots(figsize=(8.0, 3.8), constrained_layout=True)
    drawn = False
    for table, col, label in ((getattr(data, "decode", None), "gen_throughput", "SGLang gen throughput"),
                              (getattr(data, "throughput", None), "generation_throughput",
                               "vLLM avg generation throughput")):
        if table is None or not len(table) or col not in table.columns:
            continue
        x, xlabel = _x(table)
        y = pd.to_numeric(table[col], errors="coerce")
        idle = table["after_idle"].fillna(False).astype(bool).to_numpy() if "after_idle" in table.columns \
            else np.zeros(len(table), bool)
        ax.plot(x[~idle], y[~idle], ".-", ms=4, lw=1, label=label)
        if idle.any():
            ax.plot(x[idle], y[idle], "o", mfc="none", color="#7f7f7f", ms=6, label=f"{label}: after idle")
        ax.set_xlabel(xlabel)
        drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no throughput records", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.set_ylabel("tokens/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax.set_title(title or f"Decode throughput over time — {_label(data, 'log')}")
    return _detach(fig)


def speedup_curves(c: float = 0.15, ks: Iterable[int] = range(1, 8), runs=None, *,
                   c_measured: bool = False, title: str | None = None) -> Figure:
    """Expected speed-up E[tokens]/(1 + k·c) vs i.i.d. acceptance for each k, at drafter cost ``c``.

    ``runs``: parsed runs to mark — a LogData / SpecSummary or a ``{label: run}`` mapping; each is
    drawn at the i.i.d. acceptance that gives its measured mean acceptance length and at its expected
    speed-up (measured mean acceptance length / (1 + k·c)), on the curve of its k, in that colour.
    """
    ks = list(ks)
    curves = models.speedup_curves(c, ks)
    fig, ax = plt.subplots(figsize=(7.5, 4.6), constrained_layout=True)
    cmap = matplotlib.colormaps["viridis"]
    colors = {k: cmap(i / max(1, len(ks) - 1)) for i, k in enumerate(ks)}
    for k in ks:
        d = curves[curves["k"] == k]
        be = models.break_even(k, c)
        lab = f"k={k}" + (f" (break-even {be:.0%})" if be is not None else " (no break-even)")
        ax.plot(d["acceptance"], d["speedup"], color=colors[k], lw=1.4, label=lab)
    ax.axhline(1.0, color="#444444", lw=0.8, ls="--")
    if runs is not None:
        for label, run in _runs(runs).items():
            if not isinstance(run, SpecSummary) or not run.k or math.isnan(run.mean_acceptance_length) \
                    or math.isnan(run.draft_acceptance_rate):
                continue
            s = run.mean_acceptance_length / (1.0 + run.k * c)
            # the x axis is the i.i.d. per-position acceptance: place the run at the one that gives its
            # measured length (on its k curve), not at its draft acceptance rate (accepted / drafted)
            a = models.acceptance_for_length(min(max(run.mean_acceptance_length, 1.0), run.k + 1.0), run.k)
            color = colors.get(run.k, "#d62728")
            ax.plot([a], [s], marker="*", ms=14, color=color, mec="black", ls="none")
            # labelled with the x it sits at (and the length it comes from), not with another rate
            ax.annotate(f"{label}\nlength {run.mean_acceptance_length:.2f} @k={run.k} = {a:.0%} i.i.d. → x{s:.2f}",
                        (a, s), textcoords="offset points", xytext=(8, 6), fontsize=8)
    ax.set_xlabel("draft acceptance per position (i.i.d. model)")
    ax.set_ylabel("expected speed-up")
    ax.xaxis.set_major_formatter(_percent_ticks())
    ax.set_xlim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title or f"Speculative speed-up vs acceptance, drafter cost c={c:g} "
                          f"({'inferred from tok/s' if c_measured else 'assumed'})")
    return _detach(fig)
