"""The pipeline's steps. Each calls one of the kit's analyses on both runs and says which; a step whose
inputs are missing is skipped with the reason; what a step finds beyond noise becomes a candidate cause."""
from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import kit.audit
import kit.bench
import kit.env
import kit.logs
import kit.models
import kit.profile
from kit.errors import KitError
from kit.stats import noise

# validity findings that make a run's figures wrong for the question (kit.audit codes) -> what they affect
INVALIDATING = {"failed-requests": ("gap", "itl"), "short-outputs": ("gap", "itl"),
                "throttled": ("gap", "itl", "structure", "floor")}
ALPHA = 0.05


@dataclass
class Step:
    """One step of the pipeline: its ``name``, the kit analysis it ``calls``, ``status`` (ran / skipped /
    refused) with the ``reason``, the ``lines`` it reports, its ``data`` (JSON) and the ``candidates`` it
    found beyond noise (the causes' raw material)."""

    name: str
    calls: str
    status: str = "ran"
    reason: str = ""
    lines: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    candidates: list[dict] = field(default_factory=list)

    def skip(self, reason: str, status: str = "skipped") -> "Step":
        self.status, self.reason = status, reason
        return self

    def gate(self, runs, invalid: dict, refused: str, files: str = "", what: str = "") -> "Step | None":
        """This step skipped when a run has no ``files`` (its ``what``), refused when ``invalid`` names it for
        a run (validity), else None: the step runs."""
        if files and not all(getattr(r, files) for r in runs):
            return self.skip(f"no {what} in " + " or ".join(r.label for r in runs if not getattr(r, files)))
        if any(self.name in invalid.get(r.label, ()) for r in runs):
            return self.skip("a run is invalid " + refused, "refused")
        return None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "candidates"}


def _two_se(a, b) -> float:
    """Two standard errors of the difference of two samples' means (``kit.stats.noise``)."""
    va, vb = (float(np.var(x, ddof=1)) / len(x) if len(x) > 1 else math.nan for x in (a, b))
    return float(noise(va, vb))


def inputs(runs) -> Step:
    s = Step("inputs", "kit.audit.audit(run, traces=False).inputs")
    for r in runs:
        s.lines.append(f"{r.label}: {len(r.traces)} trace(s), {len(r.references)} reference trace(s), "
                       f"{len(r.logs)} log/settings file(s), {len(r.bench)} benchmark file(s)"
                       + (f", config {r.config.name}" if r.config else "")
                       + (f", GPUs {r.gpus.name}" if r.gpus else ""))
        if r.missing:
            s.lines.append(f"{r.label}: missing {', '.join(r.missing)}")
        s.data[r.label] = {"files": r.files(), "missing": r.missing, "command": r.command}
    return s


def validity(runs) -> Step:
    """Each run's high-severity validity findings; ``data["invalid"]``: run -> what it affects."""
    s = Step("validity", "kit.audit.audit (failed requests, short outputs, throttled GPU clocks)")
    invalid: dict[str, list[str]] = {}
    for r in runs:
        bad = [f for f in r.audit.findings if f.code in INVALIDATING and f.severity == "high"]
        for f in bad:
            got = invalid.setdefault(r.label, [])
            got += [x for x in INVALIDATING[f.code] if x not in got]
            s.lines.append(f"{r.label} INVALID: {f.code}: {f.verdict} ({f.evidence[0] if f.evidence else f.run})")
        if not bad:
            s.lines.append(f"{r.label}: no failed requests, short outputs or throttling found")
    s.data["invalid"] = invalid
    return s


def _bench_samples(path: Path) -> dict | None:
    """decode tok/s samples and ITL gaps (ms) of one benchmark file: an experiment variant's runs, the kit's
    single_stream repeats or load_test requests, else the rows ``kit.logs.parse_bench`` reads."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        d = None
    if isinstance(d, dict) and isinstance(d.get("repeats"), list) and d["repeats"] and "requests" not in d:
        reps = [x for x in d["repeats"] if isinstance(x, dict) and x.get("decode_tok_s") is not None]
        return {"tok_s": [float(x["decode_tok_s"]) for x in reps], "itl_ms": [float(x["itl_ms"]) for x in reps
                                                                           if x.get("itl_ms") is not None],
                "what": f"{len(reps)} runs of an experiment variant (each its median decode tok/s)"}
    reqs = None
    try:
        own = kit.logs.read_kit_result(path)  # the one reader of the kit's results (either format)
    except KitError:
        own = None
    if own is not None:  # the batch-1 level where there is one (a single_stream sweep), else every level
        one = [lv for lv in own["levels"] if lv.get("mode") == "concurrency" and lv.get("target") == 1]
        reqs = [q for lv in (one or own["levels"]) for q in lv.get("requests", [])]
    elif isinstance(d, dict) and isinstance(d.get("requests"), list):
        reqs = [q for q in d["requests"] if q.get("concurrency", 1) == 1]
    if reqs is not None:
        ok = [q for q in reqs if q.get("ok")]
        itl = [1e3 * g for q in ok for g in (q.get("itl") or [])]
        tok = [float(q["decode_tok_s"]) for q in ok if q.get("decode_tok_s") is not None
               and math.isfinite(float(q["decode_tok_s"]))]
        return {"tok_s": tok, "itl_ms": itl, "per_request": True, "url": d.get("url"),
                "what": f"{len(ok)} requests of the kit's client (decode tok/s per request: 1 / TPOT)"}
    try:
        t = kit.logs.parse_bench(path)
    except KitError:
        return None
    if "decode_tok_s" not in t or not len(t):
        return None
    row = t.iloc[0]
    itl = {k: row.get(c) for k, c in (("p50", "median_itl_ms"), ("p99", "p99_itl_ms"))}
    return {"tok_s": [float(x) for x in t["decode_tok_s"].dropna()], "itl_ms": [],
            "itl_printed": {k: float(v) for k, v in itl.items() if v is not None and v == v},
            "what": f"{len(t)} result row(s) of {row.get('tool')}"}


def gap(runs, invalid: dict) -> Step:
    """Decode tok/s of each side with its 95 % interval, Welch's test, ITL p50/p99."""
    s = Step("gap", "kit.logs.parse_bench / kit's results -> kit.bench.mean_ci, kit.bench.welch")
    if stop := s.gate(runs, invalid, "(validity): its client figures are not compared", "bench", "benchmark result"):
        return stop
    sides = {}
    for r in runs:
        g = next((x for x in (_bench_samples(p) for p in r.bench) if x and x["tok_s"]), None)
        if g is None:
            return s.skip(f"{r.label}: no decode tok/s in {', '.join(p.name for p in r.bench)}")
        m, lo, hi = kit.bench.mean_ci(g["tok_s"])
        # percentiles of the pooled gaps, else the figures the benchmark printed
        p50, p99 = (float(np.percentile(g["itl_ms"], q)) if g["itl_ms"] else
                    float(g.get("itl_printed", {}).get(k, math.nan)) for q, k in ((50, "p50"), (99, "p99")))
        sides[r.label] = {"tok_s": m, "lo": lo, "hi": hi, "n": len(g["tok_s"]), "samples": g["tok_s"],
                          "itl_p50_ms": p50, "itl_p99_ms": p99, "file": str(r.bench[0]), "what": g["what"],
                          "per_request": g.get("per_request", False), "url": g.get("url")}
        iv = f" [{lo:.2f}, {hi:.2f}]" if lo == lo else " (no interval: too few figures)"
        s.lines.append(f"{r.label}: {m:.2f} tok/s{iv} over {g['what']}; ITL p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                       f"(percentiles without interval) ({r.bench[0]})")
    a, b = (sides[r.label] for r in runs)
    t, p = kit.bench.welch(a["samples"], b["samples"])
    beyond = p == p and p < ALPHA
    rel = b["tok_s"] / a["tok_s"] - 1.0 if a["tok_s"] else math.nan
    s.data = {"sides": {k: {x: v for x, v in d.items() if x != "samples"} for k, d in sides.items()},
              "relative": rel, "p": p, "beyond_noise": beyond if p == p else None,
              "ms_per_token": (1e3 / a["tok_s"], 1e3 / b["tok_s"]), "urls": [a.get("url"), b.get("url")]}
    verdict = ("beyond noise" if beyond else "within noise") + f" (Welch p = {p:.3g})" if p == p else \
        "noise not decided: fewer than two figures per side"
    s.lines.append(f"gap: {runs[1].label} decodes {rel:+.1%} vs {runs[0].label}: {verdict}")
    return s


def _reconciled(r):
    """The first (benchmark, engine log) pair of a run that ``kit.bench.reconcile`` accepts, else the reasons."""
    why = []
    logs = [f for f in r.logs if f.suffix == ".log" or r.audit.inputs.get(str(f), "").startswith("engine log")]
    for b in r.bench:
        for log in logs:
            try:
                rec = kit.bench.reconcile(b, log)
            except KitError as exc:
                why.append(str(exc).splitlines()[0])
                continue
            if rec.refused:
                why.append(f"{b.name} vs {log.name}: refused: {rec.refused}")
                continue
            return rec, (b, log), why
    return None, None, why or ["no benchmark with per-request records and engine log pair"]


def _engine_share(ra, rb, ms_per_token) -> list[str]:
    """Where coarse records allow it: the engine's own time per token on each side (the band around the median:
    idle intervals make the mean meaningless) against the benchmark's gap (inside the engine or outside it),
    said, not ranked (no noise to weigh it against)."""
    means = []
    for rec in (ra, rb):
        t = rec.table.set_index("part") if rec.table is not None and len(rec.table) else None
        part = next((p for p in ("engine_decode", "engine_period") if t is not None and p in t.index), None)
        mid = rec.band_columns[0]   # the column around the median (``Reconciliation.band_columns``)
        means.append((part, float(t.loc[part, mid])) if part and mid in t.columns else (None, math.nan))
    if None in (means[0][0], means[1][0]) or not ms_per_token:
        return []
    d_engine, d_gap = means[1][1] - means[0][1], ms_per_token[1] - ms_per_token[0]
    where = "inside the engine" if abs(d_engine) >= 0.5 * abs(d_gap) else "mostly outside the engine"
    return [f"engine time per token ({means[0][0]}, {means[1][0]}): {means[0][1]:.2f} -> {means[1][1]:.2f} ms "
            f"({d_engine:+.2f}) against the benchmark's {d_gap:+.2f} ms/token: {d_engine / d_gap:.0%} of the gap is "
            f"{where} (no noise to weigh it: not ranked)" if d_gap else ""]


def itl(runs, invalid: dict, ms_per_token=None) -> Step:
    """Each side's ITL split by ``kit.bench.reconcile``; parts whose mean moved beyond noise are candidates."""
    s = Step("itl", "kit.bench.reconcile(client records, engine step records)")
    if stop := s.gate(runs, invalid, "(validity): its client records are not reconciled"):
        return stop
    recs = []
    for r in runs:
        rec, used, why = _reconciled(r)
        if rec is None:
            return s.skip(f"{r.label}: " + "; ".join(why[:2]))
        recs.append((rec, used))
    (ra, ua), (rb, ub) = recs
    files = [str(x) for x in (*ua, *ub)]
    levels = (getattr(ra, "level", "token"), getattr(rb, "level", "token"))
    parts = [p for p in ra.parts if p in rb.parts and p in ra.tokens and p in rb.tokens]
    if levels[0] != levels[1] or min(len(ra.tokens), len(rb.tokens)) < 2 or not parts:
        s.lines += [f"{r.label}: {x!r} ({u[0]}, {u[1]})" for r, x, u in zip(runs, (ra, rb), (ua, ub))]
        s.lines.append(f"reconciled per {levels[0]} / {levels[1]} (kit.bench.reconcile's level): not part by part "
                       "on matched rows of both sides, so no part's change is weighed against noise")
        s.data = {"levels": list(levels), "compared": False, "files": files,
                  "tables": [x.to_dict().get("table") for x in (ra, rb)]}
        s.lines += _engine_share(ra, rb, ms_per_token)
        return s
    ta, tb = (x.tokens.fillna({p: 0.0 for p in parts}) for x in (ra, rb))
    for t in (ta, tb):
        t["residual"] = t["gap"] - t[parts].sum(axis=1)
    ga, gb = float(ta["gap"].mean()), float(tb["gap"].mean())
    d_gap, noise_gap = gb - ga, _two_se(ta["gap"].to_numpy(), tb["gap"].to_numpy())
    s.data = {"levels": list(levels), "itl_ms": (ga, gb), "delta_ms": d_gap, "noise_ms": noise_gap, "parts": {},
              "files": files}
    s.lines.append(f"client ITL (mean over {len(ta)} / {len(tb)} {levels[0]} rows): {ga:.2f} -> {gb:.2f} ms "
                   f"({d_gap:+.2f} ms, noise {noise_gap:.2f})")
    for p in [*parts, "residual"]:
        ma, mb = float(ta[p].mean()), float(tb[p].mean())
        d, n = mb - ma, _two_se(ta[p].to_numpy(), tb[p].to_numpy())
        beyond = abs(d) > max(n, 1e-3 * abs(ga))
        s.data["parts"][p] = {"a_ms": ma, "b_ms": mb, "delta_ms": d, "noise_ms": n, "beyond_noise": bool(beyond)}
        s.lines.append(f"  {p:<9} {ma:8.2f} -> {mb:8.2f} ms ({d:+.2f}, noise {n:.2f})"
                       + ("  beyond noise" if beyond else ""))
        if beyond and p != "residual" and abs(d_gap) > noise_gap and d * d_gap > 0:
            s.candidates.append({"source": "itl", "key": p, "what": f"ITL part '{p}'", "delta": d, "noise": n,
                                 "gap": d_gap, "unit": "ms/token", "gap_name": "client ITL (mean)",
                                 "evidence": [f"{p}: {ma:.2f} ms/token in {runs[0].label} ({ua[1]}), {mb:.2f} in "
                                              f"{runs[1].label} ({ub[1]}), noise {n:.2f}",
                                              f"client ITL {ga:.2f} -> {gb:.2f} ms ({ua[0]}, {ub[0]})"],
                                 "trust": "usable" if not (ra.warnings or rb.warnings) else "degraded", "files": files})
    return s


def _bound(p) -> dict:
    """The trace's GPU-/launch-/host-bound verdict with its launch mode (``Profile.summary().verdict``)."""
    try:
        return dict(p.summary(phase="decode").verdict or {})
    except KitError:
        return {}


def _attention_kernels(p) -> str:
    names = p.kernels.loc[p.kernels["category"].astype(str) == "attention", "name"].astype(str)
    return ", ".join(n[:60] for n in names.value_counts().index[:2]) or "none"


def _unprofiled_ms(r) -> float | None:
    """The decode step measured without the profiler (``measured.json``: CUDA events), or None."""
    if r.measured is None:
        return None
    try:
        m = json.loads(r.measured.read_text(encoding="utf-8"))
        return float((m.get("unprofiled") or {}).get("decode", {}).get("mean_ms"))
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def _measured(runs, gap_us: float, gap_name: str) -> list[str]:
    ms = [_unprofiled_ms(r) for r in runs]
    out = [f"{r.label}: {u:.3f} ms/step measured without the profiler ({r.measured})" for r, u in zip(runs, ms) if u]
    if all(ms) and ms[1] != ms[0] and gap_name.startswith("GPU time"):
        d = 1e3 * (ms[1] - ms[0])
        out.append(f"the step gap without the profiler is {d:+,.0f} us: the GPU-time gap is {gap_us / d:.0%} of it; "
                   "the rest is the CPU side (launches, host work), which the profiler inflates and this step does "
                   "not apportion")
    return out


def structure(runs, settings_pair, invalid: dict) -> Step:
    """``kit.profile.diff_structure`` of the two runs' traces (kernel basis; graph replays placed with their
    reference). Which gap its nodes explain is decided by the traces' own trust (``Profile.health()``)."""
    s = Step("structure", "kit.profile.diff_structure(a, b, settings=, references=) and Profile.health()")
    if stop := s.gate(runs, invalid, "(validity: throttled GPU): its trace is not compared", "traces", "trace"):
        return stop
    try:
        pa, pb = (kit.profile.load(r.traces, reference=r.references or None) for r in runs)
        d = kit.profile.diff_structure(pa, pb, labels=(runs[0].label, runs[1].label), settings=settings_pair)
    except KitError as exc:
        return s.skip(f"diff_structure refused: {str(exc).splitlines()[0]}")
    health = [p.health().metrics.get("step_time", {}) for p in (pa, pb)]
    bound = (_bound(pa), _bound(pb))
    graphs = tuple((b.get("graph_launches") or 0) > 0 for b in bound)   # replays graphs (mode graph or mixed)
    n = d.nodes
    kernels_only = n[~n["family"].isin(["GPU idle", "overlap"])]
    gap_us, gap_name, why, ranked = d.delta_us, "decode step (trace)", "step times usable on both sides", n
    if graphs[0] != graphs[1]:
        why = (f"{runs[0].label if graphs[0] else runs[1].label} replays CUDA graphs, the other launches kernel by "
               "kernel: the step's GPU idle (launch gaps) is ranked with the kernels")
    elif any(h.get("status") not in (None, "usable") for h in health):
        gap_us, gap_name, ranked = float(kernels_only["delta_us"].sum()), "GPU time per step (trace kernels)", \
            kernels_only
        why = ("step time under the profiler is " + "; ".join(
            f"{r.label}: {h.get('status')} ({h.get('reason', '')[:90]})" for r, h in zip(runs, health)
            if h.get("status") != "usable") + ": the nodes explain the GPU-time gap; GPU idle is listed, not ranked")
    s.lines.append(repr(d).splitlines()[0])
    for r in runs:
        folders = sorted({str(f.parent) for f in r.traces})
        if len(folders) > 1:
            s.lines.append(f"note: {r.label}: traces of {len(folders)} folders read as the ranks of one run "
                           f"({', '.join(folders[:3])}): give one scenario's folder if they are different runs")
    s.lines.append(f"gap explained: {gap_name} {gap_us:+,.1f} us ({why})")
    s.lines += _measured(runs, gap_us, gap_name)
    s.lines += [f"note: {w}" for w in d.warnings]
    idle_row = n[n["family"] == "GPU idle"]
    if len(idle_row) and ranked is kernels_only:
        r0 = idle_row.iloc[0]
        s.lines.append(f"GPU idle (CPU side, not ranked): {r0.a_us:,.1f} -> {r0.b_us:,.1f} us/step")
    files = [str(f) for r in runs for f in (*r.traces, *r.references)]
    s.data = {"gap_us": gap_us, "gap": gap_name, "why": why, "graphs": list(graphs),
              "step_us": list(d.step_us), "structure": d.to_dict(), "files": files}
    fam = ranked.assign(var=(ranked["noise_us"] / 2.0) ** 2).groupby("family", sort=False).agg(
        delta_us=("delta_us", "sum"), var=("var", "sum"), a_us=("a_us", "sum"), b_us=("b_us", "sum"),
        kinds=("layer_kind", lambda x: ", ".join(sorted(set(map(str, x))))))
    floor_us = 1e-3 * float(d.step_us[0])
    for family, row in fam.iterrows():
        noise = 2.0 * float(row["var"]) ** 0.5
        if abs(row["delta_us"]) <= max(noise, floor_us) or not gap_us or row["delta_us"] * gap_us <= 0:
            continue
        setting = [x for x in d.settings.itertuples() if family in str(x.explains).split(", ")]
        cand = {"source": "structure", "key": family, "what": f"{family} ({row['kinds']})", "delta": row["delta_us"],
                "noise": noise, "gap": gap_us, "unit": "us/step", "gap_name": gap_name,
                "evidence": [f"{family} ({row['kinds']}): {row['a_us']:,.1f} us/step in {runs[0].label}, "
                             f"{row['b_us']:,.1f} in {runs[1].label} (noise {noise:,.1f}) "
                             f"({', '.join(map(str, runs[0].traces))}; {', '.join(map(str, runs[1].traces))})"],
                "trust": "degraded" if graphs[0] != graphs[1] else "usable", "files": files,
                "settings": [{"setting": x.setting, "a": x.a, "b": x.b, "status": x.status} for x in setting]}
        if family == "GPU idle" and graphs[0] != graphs[1]:
            cand["what"] = "launch-bound: CUDA graphs on one side only (GPU idle between kernels)"
            cand["key"] = "cuda_graph"
            cand["evidence"] += [f"{r.label}: {b.get('verdict')}: {b.get('reason')} (Profile.summary().verdict)"
                                 for r, b in zip(runs, bound)]
        if family == "attention":
            cand["evidence"].append(f"attention kernels: {runs[0].label}: {_attention_kernels(pa)}; "
                                    f"{runs[1].label}: {_attention_kernels(pb)}")
        s.candidates.append(cand)
    return s


def run_settings(r):
    """A run's :class:`kit.logs.Settings`: the audit's first run with an engine log, else the logs read together."""
    st = next((st for st in (getattr(r.audit, "runs", {}) or {}).values() if st.args or st.effective), None)
    return st if st is not None else kit.logs.settings(r.logs) if r.logs else None


def _flags(cmd: str | None) -> dict:
    """``--name`` -> its value (``--name=v`` or ``--name v``; True for a bare flag) in a command line."""
    words = [*shlex.split(cmd or ""), ""]
    return {w.partition("=")[0]: w.partition("=")[2] or (nxt if nxt and not nxt.startswith("--") else True)
            for w, nxt in zip(words, words[1:]) if w.startswith("--")}


def _asked(runs, pair) -> dict:
    """Flags and environment variables asked differently: ``{setting: (a, b)}`` from the runs' commands and
    environments (``variant.json``/``server.json``) and their settings captures' environments."""
    fa, fb = _flags(runs[0].command), _flags(runs[1].command)
    ea, eb = ({**(p.env if p is not None else {}), **r.env} for p, r in zip(pair, runs))
    shell = ("PYTHONPATH", "PATH", "PWD", "OLDPWD", "HOME", "_", "SHLVL")
    out = {k: (fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}
    out.update({k: (ea.get(k), eb.get(k)) for k in sorted(set(ea) | set(eb)) if ea.get(k) != eb.get(k)
                and k not in shell})
    return out


def settings(runs, pair) -> Step:
    """Effective settings that differ (``kit.logs.settings``) and, for what was asked differently, whether it took
    effect (``kit.audit.effect``); an ignored setting explains none of the gap."""
    s = Step("settings", "kit.logs.settings, kit.audit.effect")
    if pair[0] is None and pair[1] is None and not any(r.command or r.env for r in runs):
        return s.skip("no engine log, settings capture or command on either side")
    ea, eb = (dict(p.effective) if p is not None else {} for p in pair)
    differ = []
    for k in sorted(set(ea) | set(eb)):
        if str(ea.get(k)) != str(eb.get(k)) and k not in ("decode_batch_max", "eager_decode_lines"):
            ev = [str(p.get(k)) for p in pair if p is not None and p.get(k) is not None]
            differ.append({"setting": k, "a": ea.get(k), "b": eb.get(k), "evidence": ev})
            s.lines.append(f"{k}: {ea.get(k)!r} in {runs[0].label}, {eb.get(k)!r} in {runs[1].label}"
                           + (f" ({ev[0]})" if ev else ""))
    asked = []
    for name, (va, vb) in _asked(runs, pair).items():
        status, verdict, ev = "unknown", "not reported by either engine log", []
        if pair[0] is not None and pair[1] is not None:
            e = kit.audit.effect(pair[0], pair[1], name, name=runs[1].label)
            status, verdict, ev = e.status, e.verdict, list(e.evidence)
        asked.append({"setting": name, "a": va, "b": vb, "status": status, "verdict": verdict, "evidence": ev})
        s.lines.append(f"asked: {name} {va!r} -> {vb!r}: {verdict}")
        if status == "ignored":
            s.candidates.append({"source": "settings", "key": name, "what": f"{name} (asked, ignored by the engine)",
                                 "delta": 0.0, "noise": math.nan, "gap": math.nan, "unit": "", "gap_name": "",
                                 "evidence": ev or [verdict], "trust": "usable", "ignored": True,
                                 "files": [str(f) for r in runs for f in r.logs],
                                 "settings": [{"setting": name, "a": va, "b": vb, "status": "ignored"}]})
    s.candidates += _unmeasured(runs, pair, differ)
    if not differ and not asked:
        s.lines.append("no effective setting differs and nothing was asked differently")
    s.data = {"differ": differ, "asked": asked}
    return s


# kit.audit slow-path findings -> the normalised setting behind them
SLOW_PATHS = {"overlap-off": "overlap_schedule", "eager-decode": "cuda_graph", "p2p-off": "p2p",
              "custom-all-reduce-off": "custom_all_reduce", "attention-backend": "attention_backend",
              "graph-coverage": "cuda_graph_max_bs", "slow-tokenizer": "tokenizer_mode"}


def _flag_for(st, key: str):
    """The engine argument (``--name``) and value that set normalised ``key`` in a run, else (None, None)."""
    return next((("--" + str(arg).replace("_", "-"), val) for arg, val in (st.args if st is not None else {}).items()
                 if type(st).key_for("--" + str(arg)) == key), (None, None))


def _unmeasured(runs, pair, differ: list[dict]) -> list[dict]:
    """Settings that differ (reported by both runs) or that the audit flags as a slow path on one side: candidate
    causes whose share no step measured (no trace or records to apportion the gap)."""
    out, flagged = [], {}
    for i, r in enumerate(runs):
        for f in r.audit.findings:
            if f.code in SLOW_PATHS and f.severity in ("high", "medium"):
                flagged.setdefault(SLOW_PATHS[f.code], (i, f))
    for d in differ:
        key = d["setting"]
        if (d["a"] is None or d["b"] is None) and key not in flagged:
            continue
        side, finding = flagged.get(key, (1, None))
        flag, val = _flag_for(pair[side], key)
        other, oval = _flag_for(pair[1 - side], key)
        sets = [{"setting": flag, "a": val, "b": not val if isinstance(val, bool) else oval, "status": "took effect"}] \
            if flag and (isinstance(val, bool) or oval is not None) else []
        ev = list(d["evidence"]) + ([f"kit.audit: {finding.code}: {finding.verdict}"] if finding else [])
        shown = ["not reported" if v is None else repr(v) for v in (d["a"], d["b"])]
        out.append({"source": "settings", "key": key, "what": f"{key}: {shown[0]} ({runs[0].label}) vs {shown[1]} "
                    f"({runs[1].label})", "delta": math.nan, "noise": math.nan, "gap": math.nan, "unit": "",
                    "gap_name": "", "evidence": ev, "trust": "settings only", "unmeasured": True, "base_side": side,
                    "flagged": finding is not None, "files": [str(f) for r in runs for f in r.logs], "settings": sets})
    return sorted(out, key=lambda c: not c["flagged"])


def floor(runs, pair, gap_step: Step) -> Step:
    """Each side's decode speed of light (``kit.models.decode_floor``) against its measured ms/token."""
    s = Step("floor", "kit.models.decode_floor(config.json, nvidia-smi --query-gpu, tp from the engine's settings)")
    sides = {}
    for r, st in zip(runs, pair):
        if missing := [x for x, v in (("model config.json", r.config), ("nvidia-smi --query-gpu capture", r.gpus))
                       if v is None]:
            s.lines.append(f"{r.label}: no " + " and no ".join(missing))
            continue
        tp = int((st.effective.get("tp_size") if st is not None else None) or 1)
        ms = (gap_step.data.get("ms_per_token") or (None, None))[runs.index(r)] if gap_step.status == "ran" else None
        try:
            gpus = kit.env.parse_gpu_query(r.gpus.read_text(encoding="utf-8"), source=str(r.gpus))
            f = kit.models.decode_floor(r.config, kit.env.Fingerprint(host=r.label, gpus=gpus), tp=tp, batch=1,
                                        context=2048, measured_step_ms=ms, measured_source=gap_step.data.get(
                                            "sides", {}).get(r.label, {}).get("file"))
        except (KitError, ValueError, KeyError) as exc:
            s.lines.append(f"{r.label}: floor not computed ({str(exc).splitlines()[0]})")
            continue
        sides[r.label] = {"floor_ms": f.floor_ms, "measured_ms": ms, "tp": tp, "gpu": str(f.gpu.name)}
        s.lines.append(f"{r.label}: floor {f.floor_ms:.3f} ms/token (tp {tp}, {f.gpu.name}, context 2048)"
                       + (f"; its benchmark {ms:.3f} ms/token = {f.floor_ms / ms:.0%} of the speed of light"
                          if ms else ""))
    if not sides:
        why = "; ".join(s.lines) or "no model config or GPU capture"
        s.lines = []
        return s.skip(why)
    s.data = sides
    return s
