"""Load figures (from :class:`kit.bench.LoadResult`): the latency CDF per level, throughput against
latency over a sweep of request rates or concurrencies, and a single-stream run's decode and output
tok/s against concurrency, with the intervals of its repeats."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from kit.errors import UsageError

_NAMES = {"ttft_ms": "TTFT", "itl_ms": "ITL", "tpot_ms": "TPOT", "e2e_ms": "E2E latency"}
_FIELD = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2e_ms": "latency"}   # a request's field of each metric (not ITL)


def _values(level: dict, metric: str) -> np.ndarray:
    ok = [r for r in level["requests"] if r.get("ok")]
    xs = [x for r in ok for x in r["itl"]] if metric == "itl_ms" else [r.get(_FIELD[metric]) for r in ok]
    a = np.asarray([x for x in xs if x is not None and math.isfinite(x)], dtype=float) * 1e3
    return np.sort(a)


def latency_cdf(result, *, metric: str = "ttft_ms", title: str | None = None, ax=None) -> Figure:
    """Empirical CDF of ``metric`` (``ttft_ms``, ``itl_ms``, ``tpot_ms``, ``e2e_ms``), one line per
    level, with p50/p90/p99 marked: the tail that a mean hides."""
    if metric not in _NAMES:
        raise UsageError(f"metric must be one of {', '.join(_NAMES)}, not {metric!r}")
    fig, ax = (plt.subplots(figsize=(6.4, 3.6), constrained_layout=True) if ax is None else (ax.figure, ax))
    for lv in result.levels:
        xs = _values(lv, metric)
        if not len(xs):
            continue
        ys = np.arange(1, len(xs) + 1) / len(xs)
        line, = ax.step(xs, ys, where="post", label=f"{lv['label']} (n={len(xs)})")
        for q in (50, 90, 99):
            v = float(np.percentile(xs, q))
            ax.plot([v], [q / 100], marker="o", ms=3, color=line.get_color())
    ax.set_xlabel(f"{_NAMES[metric]} (ms)")
    ax.set_ylabel("share of " + ("token gaps" if metric == "itl_ms" else "requests"))
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or f"{_NAMES[metric]} CDF; dots: p50, p90, p99", fontsize=10)
    plt.close(fig)
    return fig


KINDS = {"rate": "open loop (req/s)", "concurrency": "closed loop (concurrency)", "users": "multi-turn users",
         "trace": "trace replay"}


def _kind_line(ax, rows: list[dict], mode: str, metric: str, stat: str, throughput: str) -> None:
    """One load kind's levels as one line, with error bars (repeats) and goodput where asked."""
    xs = [r[f"{metric}_{stat}"] for r in rows]
    ys = [r[throughput] for r in rows]
    line, = ax.plot(xs, ys, marker="o", label=KINDS.get(mode, mode))
    if rows and f"{throughput}_lo" in rows[0]:  # repeats: 95 % intervals over the runs
        ax.errorbar(xs, ys, yerr=[[max(0.0, y - r[f"{throughput}_lo"]) for y, r in zip(ys, rows)],
                                  [max(0.0, r[f"{throughput}_hi"] - y) for y, r in zip(ys, rows)]],
                    fmt="none", ecolor="black", capsize=3, lw=1)
    for x, y, r in zip(xs, ys, rows):
        ax.annotate(r["level"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if "goodput" in (rows[0] if rows else {}) and throughput == "request_throughput":
        ax.plot(xs, [r["goodput"] for r in rows], marker="s", ls="--", color=line.get_color(),
                label=f"{KINDS.get(mode, mode)}: goodput (met every SLO)")


def throughput_latency(result, *, metric: str = "e2e_ms", stat: str = "p50", throughput: str = "output_tok_s",
                       title: str | None = None, ax=None) -> Figure:
    """Throughput (``output_tok_s`` or ``request_throughput``; ``goodput`` where SLOs were given)
    against the ``stat`` (mean, p50, p90, p99) of a latency, one point per level and one line per
    load kind (open loop, closed loop, sessions, trace: their levels are not on one axis, so never
    joined): the curve where more load stops buying throughput and only adds latency."""
    rows = result.summary()
    fig, ax = (plt.subplots(figsize=(6.4, 3.6), constrained_layout=True) if ax is None else (ax.figure, ax))
    for mode in dict.fromkeys(r["mode"] for r in rows):  # one line per load kind, in sweep order
        _kind_line(ax, [r for r in rows if r["mode"] == mode], mode, metric, stat, throughput)
    ax.legend(fontsize=8)
    ax.set_xlabel(f"{_NAMES[metric]} {stat} (ms)")
    ax.set_ylabel({"output_tok_s": "output tok/s", "request_throughput": "requests/s"}.get(throughput, throughput))
    ax.grid(alpha=0.3)
    ax.set_title(title or f"Throughput vs {_NAMES[metric]} {stat}", fontsize=10)
    plt.close(fig)
    return fig


def concurrency_scaling(result, *, title: str | None = None) -> Figure:
    """Decode tok/s per request and aggregate output tok/s against concurrency (a ``single_stream`` run),
    with the 95 % interval over its repeats where there are several."""
    rows = [r for r in result.summary() if r["mode"] == "concurrency"]
    cs = [r["target"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    for ax, m, label in ((axes[0], "decode_tok_s", "decode tok/s per request"),
                         (axes[1], "output_tok_s", "output tok/s (all requests)")):
        ys = [_num(r.get(m)) for r in rows]
        err = [[max(0.0, y - _num(r.get(f"{m}_lo"))) if math.isfinite(_num(r.get(f"{m}_lo"))) else 0.0
                for y, r in zip(ys, rows)],
               [max(0.0, _num(r.get(f"{m}_hi")) - y) if math.isfinite(_num(r.get(f"{m}_hi"))) else 0.0
                for y, r in zip(ys, rows)]]
        ax.errorbar(cs, ys, yerr=err, marker="o", capsize=4)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(label)
        ax.set_xticks(cs)
        ax.grid(alpha=0.3)
    data = getattr(result, "data", {})
    fig.suptitle(title or f"single_stream {data.get('model', '')} ({data.get('where', 'measured')})", fontsize=10)
    plt.close(fig)
    return fig


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan
