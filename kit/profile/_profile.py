"""Load, Profile and Summary: the public façade (documented in the package docstring)."""
from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Union

import numpy as np
import pandas as pd

from kit.errors import TraceError, UsageError
from kit.profile import _summary as S
from kit.profile._categories import OTHER, Rule, build_rules, categorise, category_order
from kit.profile._io import sniff
from kit.profile._kineto import absolute_offset_us
from kit.profile._load import load_files, rank_of
from kit.profile._windows import assign_steps

__all__ = ["load", "Profile", "Summary", "PHASES", "default_rules"]

PHASES = ("all", "decode", "prefill")
PathsArg = Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]]


def default_rules() -> list[Rule]:
    """The packaged category rule table, in match order."""
    from kit.profile._categories import default_rules as _d

    return _d()


def load(paths: PathsArg, *, rules=None, cache: bool = True, host=None, python: str = "python3",
         _prefetched: dict | None = None) -> "Profile":
    """Read trace files (one per rank) into a :class:`Profile`.

    ``paths``: a file or a list of files (Kineto JSON/gzip — detected by magic bytes — nsys stats
    CSV, nsys SQLite). ``rules``: extra category rules tried before the packaged table — a TOML file
    path (``replace = true`` in it replaces the table) or a list of ``(pattern, category)``.
    ``cache``: reuse/write the parsed tables under ``$KIT_CACHE_DIR`` (default
    ``~/.cache/decode-kit``), keyed by file identity.
    Traces on a host are read where they lie: ``"HOST:/path/rank*.json.gz"`` specs, or paths (globs
    allowed) with ``host=`` (a :class:`kit.remote.Host`): the kit's reader runs there with the host's
    ``python`` and only the kernel tables come back (``_remote.py``); the Profile is the same.
    """
    from kit.profile._remote import is_remote

    if not isinstance(paths, (str, os.PathLike)):
        paths = list(paths)
    if is_remote(paths, host):
        from kit.profile._remote import load_remote

        return load_remote(paths, host=host, rules=rules, cache=cache, python=python)
    if isinstance(paths, (str, os.PathLike)):
        plist = [Path(paths)]
    else:
        plist = [Path(p) for p in paths]
    if not plist:
        raise TraceError("no trace files given")
    rule_list = build_rules(rules)
    key = None
    if cache and len(plist) > 1:
        # several ranks: one cache entry for the assembled set (a single file reopens from its own entry)
        from kit.profile import _cache as _trace_cache

        for p in plist:
            sniff(p)  # bad input says so even when a cache entry exists
        key = _trace_cache.profile_key(plist, rule_list)
        hit = _trace_cache.load_profile(key)
        if hit is not None:
            meta = hit["meta"]
            meta["ranks"] = {int(r): {**m, "cached": True} for r, m in meta["ranks"].items()}
            return Profile([str(p) for p in plist], hit["kernels"], hit["annotations"], hit["steps"], meta,
                           list(hit["warnings"]), rule_list)
    # several ranks are cached as one assembled entry (below), a single file as its own entry
    parsed = load_files(plist, cache=cache, prefetched=_prefetched, store=cache and len(plist) == 1)
    prof = _assemble(plist, parsed, rule_list, cache)
    if key is not None:
        _trace_cache.store_profile(key, {"kernels": prof.kernels, "annotations": prof.annotations,
                                         "steps": prof.steps}, {"meta": prof.meta, "warnings": prof.warnings})
    return prof


def _assemble(paths: list[Path], parsed: list[dict], rules: list[Rule], cache: bool = False) -> "Profile":
    warnings: list[str] = []
    ranks, rank_src = [], []
    for i, (p, d) in enumerate(zip(paths, parsed)):
        r, src = rank_of(p, d["meta"], i)
        ranks.append(r)
        rank_src.append(src)
    if len(set(ranks)) != len(ranks):
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        warnings.append(f"rank(s) {dup} appear in several files; ranks renumbered by file order 0..{len(ranks) - 1}")
        ranks = list(range(len(paths)))
        rank_src = ["file order"] * len(paths)
    # clock: each file's ts -> absolute microseconds
    offsets, spans = [], []
    for p, d in zip(paths, parsed):
        k = d["kernels"]
        first = float(k["ts"].min()) if len(k) and k["ts"].notna().any() else None
        off, w = absolute_offset_us(d["meta"], first)
        if w:
            warnings.append(f"{p.name}: {w}")
        offsets.append(off)
        if first is not None:
            spans.append((off + first, off + float((k["ts"] + k["dur"]).max())))
    origin = min((s for s, _ in spans), default=0.0)
    kern, ann, steps_all = [], [], []
    meta_ranks = {}
    for p, d, r, src, off in zip(paths, parsed, ranks, rank_src, offsets):
        warnings.extend(d.get("warnings", []))
        k = d["kernels"].copy()
        a = d["annotations"].copy()
        la = d["launches"]
        shift = off - origin
        if not len(k):
            warnings.append(f"{p.name}: no GPU kernels in this trace (CPU-only profile, or CUDA activity not "
                            f"recorded)")
        step, phase, steps = assign_steps(k, a, la)
        k["step"] = step
        k["phase"] = phase
        k["rank"] = r
        k["file"] = p.name
        k["start_us"] = k["ts"] + shift
        k = k.rename(columns={"dur": "dur_us"}).drop(columns=["ts"])
        kern.append(k)
        a["rank"] = r
        a["start_us"] = a["ts"] + shift
        ann.append(a.rename(columns={"dur": "dur_us"}).drop(columns=["ts"]))
        if len(steps):
            steps = steps.copy()
            for c in ("start_us", "end_us", "marker_start_us", "marker_end_us"):
                steps[c] = steps[c] + shift
            steps.insert(0, "rank", r)
            steps_all.append(steps)
        zero = int((k["dur_us"] == 0).sum()) if len(k) else 0
        if zero:
            frac = zero / len(k)
            msg = (f"{p.name} (rank {r}): {zero:,} of {len(k):,} kernels ({100 * frac:.1f}%) have zero duration "
                   f"(CUDA-graph replay recorded without per-kernel timing by this PyTorch/CUPTI?)")
            if frac >= 0.5:
                msg += "; the per-kernel breakdown is unavailable, use the graph-level step times (Profile.steps)"
            warnings.append(msg)
        meta = d["meta"] or {}
        meta_ranks[r] = {
            "file": p.name, "rank_from": src, "format": meta.get("source", "kineto"),
            "device_properties": meta.get("deviceProperties", []), "distributed": meta.get("distributedInfo", {}),
            "versions": {key: meta[key] for key in sorted(meta) if key.endswith("_version") or key == "schemaVersion"},
            "events": d.get("events"), "bytes": d.get("bytes"), "cached": d.get("cached", False),
            "truncated": d.get("truncated", False), "clock_offset_us": off,
        }
    kernels = pd.concat(kern, ignore_index=True) if kern else pd.DataFrame()
    if len(kernels):
        names = kernels["name"].astype("category")
        kernels["name"] = names
        if cache:
            from kit.profile._cache import category_map

            cmap = category_map(names.cat.categories, rules, lambda ns: categorise(ns, rules))
        else:
            cmap = categorise(names.cat.categories, rules)
        cat = names.map(cmap).astype(object)
        coll = kernels["collective"].astype(object)
        has = coll.notna().to_numpy()
        if has.any():
            is_ar = coll.str.replace("_", "").str.lower().str.contains("allreduce").fillna(False).to_numpy(bool)
            cat = np.where(has & is_ar, "allreduce", np.where(has & (cat == OTHER), "other-collectives", cat))
        kernels["category"] = pd.Categorical(np.asarray(cat, dtype=object), categories=category_order(rules))
        kernels = kernels[["rank", "device", "stream", "name", "category", "start_us", "dur_us", "correlation", "step",
                           "phase", "kind", "count", "collective", "file"]]
    annotations = pd.concat(ann, ignore_index=True) if ann else pd.DataFrame()
    steps_df = pd.concat(steps_all, ignore_index=True) if steps_all else pd.DataFrame(
        columns=["rank", "step", "name", "phase", "start_us", "end_us", "wall_us", "gap_before_us", "kernels", "source"])
    # clock bases: ranks whose time ranges do not overlap were not recorded on one clock (or not together)
    if len(spans) > 1:
        latest_start = max(s for s, _ in spans)
        earliest_end = min(e for _, e in spans)
        if latest_start > earliest_end:
            warnings.append(f"ranks' time ranges do not overlap (gap {latest_start - earliest_end:,.0f} us): different "
                            f"clock bases or different runs; cross-rank comparison is by step index only")
    meta = {"ranks": meta_ranks, "origin_us": origin, "rules": len(rules)}
    return Profile([str(p) for p in paths], kernels, annotations, steps_df, meta, warnings, rules)


@dataclass(eq=False)
class Profile:
    """Parsed profile: ``kernels`` (rank, device, stream, name, category, start_us, dur_us, correlation,
    step, phase, ...), ``annotations``, ``steps`` (one row per rank and step), ``meta`` and ``warnings``."""

    files: list[str]
    kernels: pd.DataFrame
    annotations: pd.DataFrame
    steps: pd.DataFrame
    meta: dict
    warnings: list[str]
    rules: list[Rule] = field(repr=False, default_factory=list)

    @property
    def ranks(self) -> list[int]:
        return sorted(self.meta.get("ranks", {}))

    @property
    def provenance(self):
        """Where the trace files came from (``kit.session.Provenance``, from the nearest session
        manifest or the files' marks); the first file's when they agree, else ``unknown`` with a note
        listing them."""
        from kit.session import Provenance, provenance_of

        found = []
        for f in self.files:
            pv = provenance_of(f)
            if pv not in found:
                found.append(pv)
        if len(found) == 1:
            return found[0]
        return Provenance("unknown", note="; ".join(p.label for p in found) or None)

    def summary(self, phase: str = "all", *, top: int = 5) -> "Summary":
        """Category breakdown of ``phase`` ('all', 'decode' or 'prefill'); see :class:`Summary`."""
        if phase not in PHASES:
            raise UsageError(f"Profile.summary: phase must be one of {', '.join(PHASES)}, not {phase!r}")
        return _summarise(self, phase, top)

    def __repr__(self) -> str:
        ph = self.steps["phase"].value_counts().sort_index() if len(self.steps) else pd.Series(dtype=int)
        steps = ", ".join(f"{k} {v}" for k, v in ph.items())
        return (f"Profile(files={len(self.files)}, ranks={self.ranks}, kernels={len(self.kernels):,}, "
                f"steps={len(self.steps)}{f' ({steps})' if steps else ''}, warnings={len(self.warnings)})")

    def _repr_html_(self) -> str:
        w = "".join(f"<li>{html.escape(x)}</li>" for x in self.warnings)
        return (f"<div><b>{html.escape(repr(self))}</b><br>source: {self.provenance._repr_html_()}"
                f"{'<ul>' + w + '</ul>' if w else ''}</div>")


@dataclass(eq=False)
class Summary:
    """Category shares of one phase of a profile, with idle, per step/rank, comm and AllReduce spread.

    ``categories``: category, time_us, calls, share_of_kernel, share_of_wall (+ an ``idle`` row).
    ``per_rank``: kernel/wall/idle time, total and exposed communication, AllReduce time and calls.
    ``per_step``: one row per rank and step with wall, kernel time and time per category.
    ``allreduce_spread``: per-rank AllReduce time and its max-min spread (a long all-reduce on one
    rank is often waiting for another). ``top``: top kernels per category. ``warnings``: what the
    numbers cannot show. ``rank_categories``: time per category (columns, plus ``idle``) per rank.
    """

    phase: str
    files: list[str]
    ranks: list[int]
    steps: int
    kernel_time_us: float
    wall_time_us: float
    categories: pd.DataFrame
    per_rank: pd.DataFrame
    per_step: pd.DataFrame
    allreduce_spread: dict
    top: pd.DataFrame
    warnings: list[str]
    rank_categories: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_dict(self, full: bool = False) -> dict:
        """The CLI's JSON: files, ranks, kernel_time_us, wall_time_us, steps, categories, warnings
        (``full=True`` adds phase, per_rank, allreduce_spread and top kernels)."""
        def num(x):
            return None if x is None or (isinstance(x, float) and np.isnan(x)) else round(float(x), 6)

        cats = [{"category": r.category, "time_us": num(r.time_us), "share_of_kernel": num(r.share_of_kernel),
                 "share_of_wall": num(r.share_of_wall)} for r in self.categories.itertuples()]
        d = {"files": [os.path.basename(f) for f in self.files], "ranks": self.ranks,
             "kernel_time_us": num(self.kernel_time_us), "wall_time_us": num(self.wall_time_us), "steps": self.steps,
             "categories": cats, "warnings": list(self.warnings)}
        if full:
            d["phase"] = self.phase
            d["per_rank"] = [{k: (num(v) if isinstance(v, float) else v) for k, v in r.items()}
                             for r in self.per_rank.to_dict("records")]
            d["allreduce_spread"] = {k: (num(v) if isinstance(v, float) else v) for k, v in self.allreduce_spread.items()}
            d["top"] = [{k: (num(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.top.to_dict("records")]
        return d

    def share(self, category: str, of: str = "kernel") -> float:
        """Share of kernel (``of='kernel'``) or wall (``of='wall'``) time of one category (0 if absent)."""
        row = self.categories[self.categories["category"] == category]
        return float(row[f"share_of_{of}"].iloc[0]) if len(row) else 0.0

    def _table_rows(self) -> list[tuple[str, str, str, str]]:
        rows = []
        for r in self.categories.itertuples():
            sk = "" if pd.isna(r.share_of_kernel) else f"{100 * r.share_of_kernel:.1f}%"
            sw = "" if pd.isna(r.share_of_wall) else f"{100 * r.share_of_wall:.1f}%"
            rows.append((r.category, f"{r.time_us:,.1f}", sk, sw))
        return rows

    def _head(self) -> str:
        wall = "n/a" if np.isnan(self.wall_time_us) else f"{self.wall_time_us:,.1f} us"
        return (f"Summary(phase={self.phase}, ranks={self.ranks}, steps={self.steps}, "
                f"kernel={self.kernel_time_us:,.1f} us, wall={wall})")

    def __repr__(self) -> str:
        lines = [self._head(), f"{'category':<20}{'time_us':>14}{'%kernel':>9}{'%wall':>8}"]
        lines += [f"{c:<20}{t:>14}{k:>9}{w:>8}" for c, t, k, w in self._table_rows()]
        if len(self.per_rank) > 1 or (len(self.per_rank) and self.per_rank["comm_us"].fillna(0).sum() > 0):
            for r in self.per_rank.itertuples():
                lines.append(f"rank {r.rank}: comm {r.comm_us:,.1f} us, exposed {r.exposed_comm_us:,.1f} us, "
                             f"allreduce {r.allreduce_us:,.1f} us x{r.allreduce_calls}")
        sp = self.allreduce_spread
        if sp.get("ranks", 0) > 1:
            lines.append(f"allreduce spread across ranks: min {sp['min_us']:,.1f} us, max {sp['max_us']:,.1f} us "
                         f"(rank {sp['max_rank']}), spread {sp['spread_us']:,.1f} us")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><td>{html.escape(c)}</td><td style='text-align:right'>{t}</td>"
                       f"<td style='text-align:right'>{k}</td><td style='text-align:right'>{w}</td></tr>"
                       for c, t, k, w in self._table_rows())
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        sp = self.allreduce_spread
        spread = ""
        if sp.get("ranks", 0) > 1:
            spread = (f"<p>AllReduce across {sp['ranks']} ranks: min {sp['min_us']:,.1f} us, max "
                      f"{sp['max_us']:,.1f} us (rank {sp['max_rank']}), spread {sp['spread_us']:,.1f} us</p>")
        return (f"<div><b>{html.escape(self._head())}</b><table><thead><tr><th>category</th><th>time (us)</th>"
                f"<th>% kernel</th><th>% wall</th></tr></thead><tbody>{body}</tbody></table>{spread}"
                f"{'<p>Warnings:</p><ul>' + warn + '</ul>' if warn else ''}</div>")


def _summarise(p: Profile, phase: str, top: int) -> Summary:
    warnings = list(p.warnings)
    k = p.kernels
    steps = p.steps
    order = category_order(p.rules)
    if phase != "all" and len(k):
        sel = k["phase"] == phase
        if not sel.any():
            have = sorted(set(k["phase"].astype(str)))
            warnings.append(f"no kernel is in a {phase} step (phases found: {', '.join(have)}); the summary covers "
                            f"all kernels")
            phase_used = "all"
        else:
            k = k[sel]
            steps = steps[steps["phase"] == phase]
            phase_used = phase
    else:
        phase_used = "all"
    per_rank_rows = []
    for r in p.ranks:
        kr = k[k["rank"] == r] if len(k) else k
        sr = steps[steps["rank"] == r] if len(steps) else steps
        fig = S.rank_figures(kr, sr) if len(kr) else {"kernel_us": 0.0, "wall_us": np.nan, "busy_us": np.nan,
                                                      "idle_us": np.nan, "comm_us": np.nan, "exposed_comm_us": np.nan}
        zero = float((kr["dur_us"] == 0).mean()) if len(kr) else 0.0
        if zero >= 0.5:
            # most kernels carry no duration (graph replay without per-kernel timing): their time would
            # count as GPU idle, so idle/busy/communication overlap cannot be computed from them
            fig.update(busy_us=np.nan, idle_us=np.nan, comm_us=np.nan, exposed_comm_us=np.nan)
            warnings.append(f"rank {r}: {100 * zero:.0f}% of its {phase_used} kernels were recorded without duration: "
                            f"GPU idle and exposed communication are not computed; wall time (the steps' GPU "
                            f"spans, {fig['wall_us']:,.0f} us) is the graph-level time")
        ar = kr[kr["category"] == "allreduce"] if len(kr) else kr
        fig.update(rank=r, allreduce_us=float(ar["dur_us"].sum()) if len(ar) else 0.0,
                   allreduce_calls=int(ar["count"].sum()) if len(ar) else 0)
        fig["allreduce_share_of_kernel"] = fig["allreduce_us"] / fig["kernel_us"] if fig["kernel_us"] else 0.0
        per_rank_rows.append(fig)
    per_rank = pd.DataFrame(per_rank_rows, columns=["rank", "kernel_us", "wall_us", "busy_us", "idle_us", "comm_us",
                                                    "exposed_comm_us", "allreduce_us", "allreduce_calls",
                                                    "allreduce_share_of_kernel"])
    kernel_time = float(k["dur_us"].sum()) if len(k) else 0.0
    wall = float(per_rank["wall_us"].sum(min_count=1)) if len(per_rank) else np.nan
    if len(k):
        g = k.groupby("category", observed=False).agg(time_us=("dur_us", "sum"), calls=("count", "sum"))
        g = g.reindex(order).fillna(0.0)
        g = g[(g["time_us"] > 0) | (g["calls"] > 0)]
        cats = g.reset_index()
        cats["category"] = cats["category"].astype(str)
        cats["calls"] = cats["calls"].astype(int)
    else:
        cats = pd.DataFrame({"category": [], "time_us": [], "calls": []})
    cats["share_of_kernel"] = cats["time_us"] / kernel_time if kernel_time else np.nan
    cats["share_of_wall"] = cats["time_us"] / wall if wall and not np.isnan(wall) else np.nan
    idle = float(per_rank["idle_us"].sum(min_count=1)) if len(per_rank) else np.nan
    if not np.isnan(idle):
        cats = pd.concat([cats, pd.DataFrame([{"category": "idle", "time_us": idle, "calls": 0,
                                               "share_of_kernel": np.nan, "share_of_wall": idle / wall if wall else np.nan}])],
                         ignore_index=True)
    # per step
    if len(k) and len(steps):
        ks = k[k["step"] >= 0]
        piv = ks.pivot_table(index=["rank", "step"], columns="category", values="dur_us", aggfunc="sum",
                             observed=True, fill_value=0.0)
        piv.columns = [str(c) for c in piv.columns]
        base = steps[["rank", "step", "name", "phase", "start_us", "wall_us", "kernels"]].set_index(["rank", "step"])
        per_step = base.join(piv, how="left").fillna({c: 0.0 for c in piv.columns})
        per_step.insert(4, "kernel_us", piv.sum(axis=1).reindex(per_step.index).fillna(0.0))
        per_step = per_step.reset_index().sort_values(["rank", "step"]).reset_index(drop=True)
    else:
        per_step = pd.DataFrame(columns=["rank", "step", "name", "phase", "start_us", "wall_us", "kernels", "kernel_us"])
    if len(k):
        rc = k.pivot_table(index="rank", columns="category", values="dur_us", aggfunc="sum", observed=True,
                           fill_value=0.0)
        rc = rc[[c for c in order if c in rc.columns]]
        rc.columns = [str(c) for c in rc.columns]
        rc["idle"] = per_rank.set_index("rank")["idle_us"].reindex(rc.index)
    else:
        rc = pd.DataFrame()
    spread = _spread(per_rank, per_step)
    if len(p.ranks) > 1 and spread.get("ranks", 0) > 1 and spread["max_us"] > 0:
        if spread["min_us"] > 0 and spread["max_us"] / spread["min_us"] > 1.5:
            warnings.append(f"AllReduce time differs {spread['max_us'] / spread['min_us']:.1f}x across ranks "
                            f"({spread['min_us']:,.0f}..{spread['max_us']:,.0f} us): the longer all-reduces likely "
                            f"include waiting for a slower rank, not transfer time")
    nsteps = int(len(steps)) if len(steps) else 0
    return Summary(phase_used, p.files, p.ranks, nsteps, kernel_time, wall, cats, per_rank, per_step, spread,
                   S.top_kernels(k, top) if len(k) else S.top_kernels(pd.DataFrame(), top), warnings, rc)


def _spread(per_rank: pd.DataFrame, per_step: pd.DataFrame) -> dict:
    if per_rank.empty or per_rank["allreduce_calls"].sum() == 0:
        return {"ranks": 0}
    pr = per_rank[["rank", "allreduce_us"]]
    i_max = int(pr["allreduce_us"].idxmax())
    i_min = int(pr["allreduce_us"].idxmin())
    out = {"ranks": int(len(pr)), "min_us": float(pr["allreduce_us"].min()), "max_us": float(pr["allreduce_us"].max()),
           "min_rank": int(pr.loc[i_min, "rank"]), "max_rank": int(pr.loc[i_max, "rank"]),
           "mean_us": float(pr["allreduce_us"].mean())}
    out["spread_us"] = out["max_us"] - out["min_us"]
    out["max_over_min"] = out["max_us"] / out["min_us"] if out["min_us"] > 0 else float("inf")
    if "allreduce" in per_step.columns and per_step["rank"].nunique() > 1:
        st = per_step.pivot_table(index="step", columns="rank", values="allreduce", aggfunc="sum")
        st = st.dropna()
        if len(st):
            out["per_step_spread_us_median"] = float((st.max(axis=1) - st.min(axis=1)).median())
    return out
