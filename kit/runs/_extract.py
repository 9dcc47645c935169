"""What a result records: its headline figures, facts, tables, inputs and settings, one extractor per
result type (a table, by class name, so this module imports no other kit package).

Each extractor gets the result and the call's bound arguments and returns keyword arguments for
:func:`kit.runs.record`. A type not in the table records its call's settings and, for a DataFrame, the
frame itself and its numeric cells of the first rows as figures.
"""
from __future__ import annotations

import math
import os
from typing import Any

_MAX_FIGURE_ROWS = 64
_SKIP_SETTINGS = {"self", "host", "session", "prefetched", "clocks", "a", "b", "path", "paths", "source"}


def _settings(args: dict) -> dict:
    from kit.util import jsonable

    return {k: jsonable(v) for k, v in args.items()
            if k not in _SKIP_SETTINGS and (v is None or isinstance(v, (str, int, float, bool, list, tuple, dict)))}


def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def frame_figures(df, key: str | None = None, unit_of=None) -> list[tuple]:
    """Numeric cells of the first rows of ``df`` as figures (name = column, item = the row's ``key``)."""
    out = []
    if df is None or not len(df):
        return out
    cols = [c for c in df.columns if str(df[c].dtype)[:3] in ("int", "flo", "Int", "Flo", "uin")]
    for i, r in enumerate(df.head(_MAX_FIGURE_ROWS).to_dict("records")):
        item = r.get(key) if key else (i if len(df) > 1 else None)
        for c in cols:
            if c != key and _num(r[c]) is not None:
                out.append((str(c), r[c], unit_of(c) if unit_of else _unit(str(c)), item))
    return out


def _unit(name: str) -> str:
    for suffix, unit in (("_us", "us"), ("_ms", "ms"), ("_s", "s"), ("share", "fraction"), ("_tok_s", "tok/s"),
                         ("throughput", "tok/s"), ("rate", "fraction")):
        if name.endswith(suffix) or suffix in name:
            return unit
    return ""


def _summary(s, args) -> dict:
    figs = [("kernel_time_us", s.kernel_time_us, "us", None), ("wall_time_us", s.wall_time_us, "us", None),
            ("steps", s.steps, "", None)]
    if s.steps:
        figs.append(("step_us", s.wall_time_us / max(1, s.steps), "us", None))
    figs += [(f"share_of_kernel.{r.category}", r.share_of_kernel, "fraction", None) for r in s.categories.itertuples()]
    figs += [(f"share_of_wall.{r.category}", r.share_of_wall, "fraction", None) for r in s.categories.itertuples()]
    figs += frame_figures(s.per_rank, key="rank")
    verdict = s.verdict.get("verdict") if isinstance(s.verdict, dict) else None
    return {"inputs": list(s.files), "settings": {"phase": s.phase, **_settings(args)}, "figures": figs,
            "facts": {"phase": s.phase, "verdict": verdict, "categories_unavailable": s.categories_unavailable},
            "tables": {"categories": s.categories, "per_rank": s.per_rank, "top": s.top,
                       "per_step": s.per_step, "collectives": s.collectives, "layers": s.layers},
            "warnings": list(s.warnings)}


def _comparison(c, args) -> dict:
    figs = [("delta_us", c.delta_us, "us", None), ("noise_us", c.noise_us, "us", None),
            ("step_us", c.step_us[0], "us", c.labels[0]), ("step_us", c.step_us[1], "us", c.labels[1]),
            ("spread_us", c.spread_us[0], "us", c.labels[0]), ("spread_us", c.spread_us[1], "us", c.labels[1])]
    figs += [(f"delta_us.{r.part}", r.delta_us, "us", None) for r in c.parts.itertuples()]
    within = abs(c.delta_us) < c.noise_us if _num(c.noise_us) is not None else None
    return {"inputs": [("a", f) for f in c.files[0]] + [("b", f) for f in c.files[1]],
            "settings": {"phase": c.phase, "labels": list(c.labels), **_settings(args)}, "figures": figs,
            "facts": {"labels": " -> ".join(c.labels), "phase": c.phase, "cause": c.cause or None,
                      "verdict": None if within is None else ("within noise" if within else "beyond noise")},
            "tables": {"parts": c.parts, "families": c.families, "per_rank": c.per_rank}, "warnings": list(c.warnings),
            "label": " -> ".join(c.labels)}


def _logdata(d, args) -> dict:
    figs = [(f"rows.{k}", len(t), "", None) for k, t in d.tables.items()]
    figs += [("lines", d.lines, "", None), ("unknown_lines", d.unknown_lines, "", None)]
    return {"inputs": [d.name], "settings": _settings(args), "figures": figs,
            "facts": {"engine": d.engine, "version": d.version}, "warnings": list(d.warnings),
            "tables": {k: t for k, t in d.tables.items() if len(t)}}


def _bench_result(r, args) -> dict:
    import pandas as pd

    table = pd.DataFrame(r.summary())
    key = "level" if "level" in table.columns else "concurrency" if "concurrency" in table.columns else None
    url = args.get("url") or getattr(r, "data", {}).get("url")
    return {"inputs": [url] if url else [], "settings": _settings(args), "figures": frame_figures(table, key),
            "tables": {"summary": table}}


def _audit(a, args) -> dict:
    import pandas as pd

    rows = [{"code": f.code, "severity": f.severity, "verdict": f.verdict, "run": f.run} for f in a.findings]
    sev: dict[str, int] = {}
    for r in rows:
        sev[r["severity"]] = sev.get(r["severity"], 0) + 1
    paths = args.get("paths")
    paths = [paths] if isinstance(paths, str) else list(paths or [])
    figs = [(f"findings.{k}", v, "", None) for k, v in sev.items()]
    return {"inputs": paths, "settings": _settings(args), "figures": figs,
            "tables": {"findings": pd.DataFrame(rows, columns=["code", "severity", "verdict", "run"])}}


def _experiment(e, args) -> dict:
    table = e.table
    figs = frame_figures(table, "slug" if "slug" in table else None)
    return {"inputs": [], "settings": _settings(args), "figures": figs,
            "tables": {"variants": table}, "label": getattr(e, "name", None)}


def _frame(df, args) -> dict:
    src = args.get("source")
    named = isinstance(src, (str, os.PathLike)) and "\n" not in str(src) and len(str(src)) < 4096
    return {"inputs": [src] if named else [], "settings": _settings(args), "figures": frame_figures(df),
            "tables": {"rows": df}, "warnings": list(df.attrs.get("warnings", []))}


def _gate(g, args) -> dict:
    figs = [("delta_us", g.delta_us, "us", None), ("noise_us", g.noise_us, "us", None),
            ("threshold_us", g.threshold_us, "us", None), ("step_us", g.step_us[0], "us", g.baseline),
            ("step_us", g.step_us[1], "us", "this run")]
    return {"inputs": [("b", f) for f in g.files], "settings": _settings(args), "figures": figs,
            "facts": {"verdict": g.verdict, "baseline": g.baseline, "baseline_run": g.baseline_run},
            "tables": {"where": g.where, "parts": g.comparison.parts}, "warnings": list(g.warnings),
            "label": f"against {g.baseline}"}


def _bench_gate(g, args) -> dict:
    figs = [(f"change.{r.metric}", r.change, "fraction", r.run or None) for r in g.table.itertuples()
            if r.change == r.change]      # a metric not compared has no change
    src = args.get("source")
    return {"inputs": [("b", src)] if isinstance(src, (str, os.PathLike)) else [], "settings": _settings(args),
            "figures": figs, "facts": {"verdict": g.verdict, "baseline": g.baseline, "baseline_run": g.baseline_run},
            "tables": {"metrics": g.table}, "warnings": list(g.warnings), "label": f"against {g.baseline}"}


def _rank_view(v, args) -> dict:
    figs = frame_figures(v.per_rank[["rank", "step_us", "compute_us", "comm_us"]], key="rank")
    s = v.straggler
    figs += [(k, s.get(k), "us", None) for k in ("excess_us", "noise_us") if s.get(k) is not None]
    return {"inputs": list(v.per_rank["source"]), "settings": {"phase": v.phase, **_settings(args)}, "figures": figs,
            "facts": {"straggler": None if s.get("rank") is None else str(s["rank"]),
                      "where": s.get("at") or s.get("kernel"), "straggler_reason": s.get("reason")},
            "tables": {"per_rank": v.per_rank, "where": v.where}, "warnings": list(v.warnings)}


EXTRACTORS = {"RankView": _rank_view, "Gate": _gate, "BenchGate": _bench_gate, "Summary": _summary,
              "Comparison": _comparison, "LogData": _logdata, "BenchResult": _bench_result,
              "LoadResult": _bench_result, "Audit": _audit, "Experiment": _experiment, "DataFrame": _frame}


def _provenance(inputs) -> str | None:
    """Where the inputs came from (``kit.session.provenance_of``: measured where and when, sample,
    third-party ...), one label per distinct answer."""
    from kit.provenance import provenance_of

    labels = []
    for i in inputs:
        path = i[1] if isinstance(i, tuple) else i
        if isinstance(path, (str, os.PathLike)) and os.path.exists(path):
            label = provenance_of(path).label
            if label not in labels:
                labels.append(label)
    return "; ".join(labels) or None


def extract(result: Any, args: dict) -> dict:
    """Keyword arguments of :func:`kit.runs.record` for ``result`` of a call made with ``args``."""
    fn = EXTRACTORS.get(type(result).__name__)
    if fn is None:
        return {"settings": _settings(args)}
    out = fn(result, args)
    if out.get("inputs") and "provenance" not in out:
        out["provenance"] = _provenance(out["inputs"])
    return out
