"""Where the gap goes: two runs compared step by step, kernel family by kernel family.

For each run (and rank) the decode steps of ``phase`` are taken from the profile's steps table.
A step's **time** is its GPU span (first kernel start to last kernel end) plus the launch gap
before it (GPU idle between the previous step's last kernel and this step's first one; the first
selected step's gap, which follows another phase, is left out). Per step, exactly::

    step time = sum over categories of kernel time - multi-stream overlap + GPU idle inside the step
                + launch gap before the step

so the per-step means of these parts add up to the mean step time, and their differences add up
to the difference of the two runs' step times. When step times measured outside the profiler are
given (``step_ms``, e.g. CUDA events), the difference to explain is theirs and what the trace does
not account for is the ``unattributed`` row; without them it is the traces' own difference and
``unattributed`` is 0. Each part's noise is two standard errors of the difference of its per-step
means (from the step-to-step spread of both runs); a part smaller than that (or than 0.1% of A's
step time) is "within noise".

Kernels are matched across runs by **family**: the kernel name without ``void``, template
arguments and argument list, so the same kernel with other template parameters matches and kernels
of another backend do not; families found in one run only are listed as such. Where both profiles
link kernels to CPU ops (eager traces: the ``op_top`` and ``module`` columns the reader keeps for
every kernel) the difference is also split by top-level aten op and by ``nn.Module`` class. For
the GPU-idle and launch-gap parts the CPU side of both runs says why (``_cpu_compare.py``: kernel launches
per step, graph or eager, CPU time, syncs, verdict). Only the Profiles are read, never the trace
files: profiles from the cache or parsed on a host compare by op too. Multi-rank runs are compared rank by rank; the headline is the
slowest rank of each run (largest mean step time).
"""
from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kit import stats
from kit.errors import TraceError
from kit.profile._profile import Profile
from kit.profile.analyses import _cpu_compare
from kit.profile.attribution._names import kernel_family
from kit.profile.steps import _arrays
from kit.stats import is_nan
from kit.util import call_settings, recorded, signed

__all__ = ["Comparison", "compare", "kernel_family"]

_NO_OP = "(no CPU op)"


@dataclass
class _Table:
    """Kernel time per label (category or family) and step: ``names`` sorted (a pivot table's columns), ``us``
    one row per name and one column per step, so that a name's per-step series is one contiguous row."""

    names: list[str]
    us: np.ndarray

    def rows(self, names: list[str]) -> np.ndarray:
        """The rows of ``names``, zeros for a name this run does not have."""
        at = {n: i for i, n in enumerate(self.names)}
        ix = np.array([at.get(n, -1) for n in names], dtype=np.int64)
        out = self.us[np.clip(ix, 0, None)] if len(self.names) else np.zeros((len(names), self.us.shape[1]))
        out[ix < 0] = 0.0
        return out


@dataclass
class _Run:
    """One rank of one run, over the selected steps: what the parts, families and splits are read from."""

    rank: int
    step: np.ndarray              # the selected steps' ids, by start
    wall: np.ndarray              # each step's GPU span (us)
    gap: np.ndarray               # the launch gap before each step (NaN after a step of another phase)
    cat: _Table                   # category x step kernel time
    fam: _Table                   # family x step kernel time
    fam_calls: dict               # family -> calls per step
    fam_cat: dict                 # family -> category
    idle: np.ndarray              # per step: GPU idle inside
    overlap: np.ndarray           # per step: kernel time beyond the GPU's busy time (multi-stream overlap, >= 0)
    by_op: dict | None = None     # top-level op -> kernel time per step
    by_module: dict | None = None  # module class -> kernel time per step
    layers: dict | None = None    # (module class, layer) -> kernel time per step

    def times(self) -> np.ndarray:
        """Each step's time: its GPU span plus the launch gap before it (the mean gap where unknown)."""
        return self.wall + np.where(np.isnan(self.gap), _mean(self.gap), self.gap)

    @property
    def step_us(self) -> float:
        return float(_arrays.nanmean(self.wall) + _mean(self.gap))

    @property
    def spread_us(self) -> float:
        t = self.times()
        return float(np.nanstd(t, ddof=1)) if np.count_nonzero(~np.isnan(t)) > 1 else float("nan")


def _mean(x: np.ndarray) -> float:
    """Mean of the known values, 0 where there is none."""
    x = x[~np.isnan(x)]
    return float(x.sum() / len(x)) if len(x) else 0.0


def _stats(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``m`` (one row per part, one column per step): the mean and the squared standard error of
    the mean (variance with ddof 1 over the number of steps; 0 for one step). Summed as pandas' ``Series.mean``
    and ``Series.var`` sum (pairwise along the row, variance in two passes): the same figures to the bit."""
    n = m.shape[1]
    mean = m.sum(axis=1) / n if n else np.zeros(len(m))
    if n < 2:
        return mean, np.zeros(len(m))
    return mean, ((mean[:, None] - m) ** 2).sum(axis=1) / (n - 1) / n


def _group_sums(key: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct integer keys, sorted; the sum of ``values`` per key). pandas' groupby sum (compensated,
    in row order) rather than ``np.bincount``: the figures stay those of the pivot tables it replaced."""
    if not len(key):
        return np.empty(0, np.int64), np.empty(0)
    s = pd.Series(values).groupby(key).sum()
    return s.index.to_numpy(np.int64), s.to_numpy(float)


def _steps(prof, rank: int, phase: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank ``rank``'s steps of ``phase`` with a start, by start: (ids, GPU span, launch gap before each;
    NaN where the step before it is not selected, i.e. it follows another phase)."""
    st = prof.steps
    st = st[(st["rank"] == rank)].sort_values("start_us")
    keep = np.ones(len(st), bool)
    if phase != "all":
        keep = (st["phase"] == phase).to_numpy(bool)
        if not keep.any():
            have = ", ".join(sorted(set(st["phase"].astype(str)))) or "none"
            raise TraceError(f"{', '.join(os.path.basename(f) for f in prof.files)}: rank {rank} has no {phase} step "
                             f"(phases: {have})")
    keep = keep & st["start_us"].notna().to_numpy(bool)
    after_kept = np.concatenate([[False], keep[:-1]])
    gap = np.where(after_kept, st["gap_before_us"].to_numpy(float), np.nan)
    return st["step"].to_numpy()[keep], st["wall_us"].to_numpy(float)[keep], gap[keep]


def _relabel(codes: np.ndarray, names: list[str], label=None) -> tuple[np.ndarray, list[str]]:
    """``codes`` (indices into ``names``, -1: missing) renumbered over the labels of the names they use
    (``label(name)``, once per name used; the name itself by default), sorted as the columns of a pivot
    table: (the new code of each row, -1 kept; the sorted labels)."""
    seen = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(names))).tolist()
    lab = {i: label(names[i]) if label else names[i] for i in seen}
    labels = sorted(set(lab.values()))
    at = {f: j for j, f in enumerate(labels)}
    lut = np.full(len(names) + 1, -1, dtype=np.int64)     # the last slot maps -1 to itself
    lut[seen] = [at[lab[i]] for i in seen]
    return lut[codes], labels


def _table(row: np.ndarray, dur: np.ndarray, codes: np.ndarray, names: list[str], n_steps: int) -> _Table:
    """Kernel time per label and step (kernels without a label left out, as a pivot table leaves them)."""
    ok = codes >= 0
    keys, sums = _group_sums(codes[ok] * n_steps + row[ok], dur[ok])
    us = np.zeros(len(names) * n_steps)
    us[keys] = sums
    return _Table(names, us.reshape(len(names), n_steps))


def _busy(row: np.ndarray, start: np.ndarray, dur: np.ndarray, n_steps: int) -> np.ndarray:
    """Per step: the GPU's busy time, the union of its kernels' intervals (0 without kernels)."""
    busy = np.zeros(n_steps)
    for r, ix in _arrays.groups(row).items():
        busy[r] = _arrays.length(_arrays.union(start[ix], start[ix] + dur[ix]))
    return busy


def _main_category(fam: np.ndarray, fams: list[str], cat: np.ndarray, cats: list[str]) -> dict:
    """family -> the category most of its kernels have (the first by name on a tie)."""
    ok = (fam >= 0) & (cat >= 0)
    n = np.bincount(fam[ok] * len(cats) + cat[ok], minlength=len(fams) * len(cats)).reshape(len(fams), len(cats))
    return {f: cats[int(n[i].argmax())] for i, f in enumerate(fams) if n[i].any()}


def _labelled(col: pd.Series, pos: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    """Each selected kernel's CPU op or module as a code into sorted labels (``(no CPU op)`` where it has
    none); None when fewer than half the kernels have one (a trace that does not link them)."""
    codes, uniq = _arrays.coded(col)
    codes = codes[pos]
    if not len(codes) or (codes >= 0).mean() < 0.5:
        return None
    if _NO_OP not in uniq:
        uniq = [*uniq, _NO_OP]
    return _relabel(np.where(codes >= 0, codes, uniq.index(_NO_OP)), uniq)


def _per_label(codes: np.ndarray, names: list[str], dur: np.ndarray, n: int) -> dict:
    """label -> kernel time per step (``n`` steps), for the labels the kernels have."""
    keys, sums = _group_sums(codes, dur)
    return {names[i]: x for i, x in zip(keys.tolist(), (sums / n).tolist())}


def _layers(codes: np.ndarray, names: list[str], layer: np.ndarray, dur: np.ndarray, n: int) -> dict:
    """(module, layer) -> kernel time per step (``n`` steps)."""
    lc, lu = pd.factorize(layer, sort=True)
    ok = lc >= 0
    keys, sums = _group_sums(codes[ok] * len(lu) + lc[ok], dur[ok])
    return {(names[i // len(lu)], lu[i % len(lu)]): x for i, x in zip(keys.tolist(), (sums / n).tolist())}


def _split_by_op(run: _Run, k: pd.DataFrame, pos: np.ndarray, dur: np.ndarray, n: int) -> None:
    """``by_op`` and ``by_module`` of ``run`` (and by module and layer), where the kernels link to CPU ops."""
    for key, col in (("by_op", "op_top"), ("by_module", "module")):
        lab = _labelled(k[col], pos)
        if lab is None:
            continue
        setattr(run, key, _per_label(*lab, dur, n))
        if key == "by_module":
            run.layers = _layers(*lab, k["layer"].to_numpy()[pos], dur, n)


def _rank_run(prof, rank: int, phase: str, ops: bool) -> _Run:
    """One rank's steps of ``phase``: kernel time per category, family, op and module, busy and idle per step.
    The kernel table is read as arrays and integer codes (categoricals): no text column is converted."""
    step, wall, gap = _steps(prof, rank, phase)
    k = prof.kernels
    ks = k["step"].to_numpy()
    pos = np.flatnonzero((k["rank"].to_numpy() == rank) & np.isin(ks, step))
    o = _arrays.stable_order(step)
    row = o[np.searchsorted(step[o], ks[pos])]            # each kernel's step, as an index into ``step``
    dur = k["dur_us"].to_numpy(float)[pos]
    n = len(step)
    codes, names = _arrays.coded(k["category"])
    cat_c, cats = _relabel(codes[pos], names)
    names_c, uniq = _arrays.coded(k["name"])
    fam_c, fams = _relabel(names_c[pos], uniq, kernel_family)
    cat, fam = _table(row, dur, cat_c, cats, n), _table(row, dur, fam_c, fams, n)
    busy = _busy(row, k["start_us"].to_numpy(float)[pos], dur, n)
    ksum = np.ascontiguousarray(cat.us.T).sum(axis=1)      # as a pivot table's sum(axis=1): steps x categories
    ok = fam_c >= 0
    calls = np.bincount(fam_c[ok], weights=k["count"].to_numpy(float)[pos][ok], minlength=len(fams)) / max(n, 1)
    run = _Run(rank, step, wall, gap, cat, fam, dict(zip(fams, calls.tolist())),
               _main_category(fam_c, fams, cat_c, cats), *(np.where(x < 0.0, 0.0, x) for x in (wall - busy, ksum - busy)))
    if ops:
        _split_by_op(run, k, pos, dur, max(n, 1))
    return run


def diff_rows(names: list[str], a: np.ndarray, b: np.ndarray) -> list[dict]:
    """One row per name (rows of ``a`` and ``b``: per-step series): the per-step means of A and B, their
    difference and its noise (two standard errors of the difference)."""
    (ma, va), (mb, vb) = _stats(a), _stats(b)
    noise = stats.noise(va, vb)
    return [{"part": n, "a_us": x, "b_us": y, "delta_us": y - x, "noise_us": z}
            for n, x, y, z in zip(names, ma.tolist(), mb.tolist(), noise.tolist())]


def _row(name: str, sa: np.ndarray, sb: np.ndarray) -> dict:
    """:func:`diff_rows` of one per-step series each (unknown values left out)."""
    return diff_rows([name], sa[~np.isnan(sa)][None, :], sb[~np.isnan(sb)][None, :])[0]


def _ab(keys: list, ga: dict, gb: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per-step time of each key in A and in B (0 where a run has none)."""
    return tuple(np.array([g.get(x, 0.0) for x in keys], dtype=float) for g in (ga, gb))


def _split_table(ga: dict | None, gb: dict | None, key: str) -> pd.DataFrame | None:
    """by_op / by_module: per-step time of each label in A and B, largest difference first (None unless
    both runs have it)."""
    if ga is None or gb is None:
        return None
    names = sorted(set(ga) | set(gb))
    a, b = _ab(names, ga, gb)
    o = np.argsort(-np.abs(b - a), kind="stable")
    return pd.DataFrame({key: [names[i] for i in o], "a_us": a[o], "b_us": b[o], "delta_us": (b - a)[o]})


@dataclass(eq=False)
class Comparison:
    """Run A against run B: per-step times, the difference split into parts that add up to it.

    ``parts``: part, kind (category / overlap / gpu-idle / launch-gap / unattributed), a_us, b_us
    (per step), delta_us (B - A), noise_us, beyond_noise, share (of the difference), cause (the CPU
    side of both runs, on the gpu-idle and launch-gap rows).
    ``families``: family, category, presence (both / only A / only B), a_us, b_us, delta_us, calls
    per step in each, noise_us, beyond_noise. ``only_in_one``: the families of one run only.
    ``by_op`` / ``by_module``: per-step time by top-level aten op / nn.Module (None unless both
    traces link kernels to CPU ops; modules by class) and ``by_module_instances`` (per class and layer).
    ``cpu``: one row per run (``_cpu_compare.run_table``: launches per step, graph or eager, CPU time, syncs,
    GPU idle by cause, verdict); ``cause``: what differs there, in one sentence. ``per_rank``: one row
    per rank. ``warnings``: what the numbers cannot show (a trace-only difference made of GPU idle that
    the profiler inflates, steps far slower than the median).
    """

    labels: tuple[str, str]
    phase: str
    files: tuple[list[str], list[str]]
    ranks: tuple[int, int]                  # the ranks compared in the headline (slowest of each run)
    steps: tuple[int, int]
    step_us: tuple[float, float]            # traces' mean step time
    spread_us: tuple[float, float]          # step-to-step standard deviation
    measured_ms: tuple[float, float] | None
    measured_source: str | None
    delta_us: float                         # the difference explained (measured if given, else traces')
    parts: pd.DataFrame
    families: pd.DataFrame
    per_rank: pd.DataFrame
    by_op: pd.DataFrame | None = None
    by_module: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)
    cpu: pd.DataFrame | None = None                  # one row per run: the CPU side and its verdict (_cpu.py)
    by_module_instances: pd.DataFrame | None = None  # by_module's drill-down: per class and layer index

    @property
    def cause(self) -> str:
        """What differs on the CPU side (launches, graph or eager, syncs), in one sentence."""
        return _cpu_compare.cause(self.cpu) if self.cpu is not None else ""

    @property
    def only_in_one(self) -> pd.DataFrame:
        return self.families[self.families["presence"] != "both"].reset_index(drop=True)

    @property
    def noise_us(self) -> float:
        """Two standard errors of the step-time difference."""
        row = self.parts[self.parts["kind"] == "total"]
        return float(row["noise_us"].iloc[0]) if len(row) else float("nan")

    def share(self, part: str) -> float:
        """Share of the difference in one part (e.g. a category): delta_us / the difference."""
        row = self.parts[self.parts["part"] == part]
        return float(row["delta_us"].iloc[0]) / self.delta_us if len(row) and self.delta_us else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "phase": self.phase, "files": [list(map(os.path.basename, f)) for f in self.files],
                "ranks": list(self.ranks), "steps": list(self.steps), "step_us": [round(x, 6) for x in self.step_us],
                "spread_us": [round(x, 6) for x in self.spread_us],
                "measured_ms": list(self.measured_ms) if self.measured_ms else None,
                "measured_source": self.measured_source, "delta_us": round(self.delta_us, 6),
                **{t: _arrays.records(getattr(self, t), 6) for t in ("parts", "families", "per_rank", "by_op", "by_module",
                                                                       "by_module_instances", "cpu")},
                "cause": self.cause,
                "warnings": list(self.warnings)}

    def _head(self) -> list[str]:
        a, b = self.labels
        out = [f"Comparison({a} -> {b}, phase {self.phase}, ranks {self.ranks[0]}/{self.ranks[1]}, steps "
               f"{self.steps[0]}/{self.steps[1]})",
               f"step time (trace): {a} {self.step_us[0]:,.1f} us (spread {self.spread_us[0]:,.1f}), {b} "
               f"{self.step_us[1]:,.1f} us (spread {self.spread_us[1]:,.1f})"]
        if self.measured_ms:
            out.append(f"step time ({self.measured_source or 'given by the caller, source not stated'}): {a} {self.measured_ms[0] * 1e3:,.1f} us, "
                       f"{b} {self.measured_ms[1] * 1e3:,.1f} us")
        out.append(f"difference to explain: {signed(self.delta_us)} us per step (noise +-{self.noise_us:,.1f} us)")
        return out

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this comparison: the difference, its noise, its parts."""
        a, b = self.labels
        figs = [("delta_us", self.delta_us), ("noise_us", self.noise_us), ("step_us", self.step_us[0], a),
                ("step_us", self.step_us[1], b), ("spread_us", self.spread_us[0], a),
                ("spread_us", self.spread_us[1], b)]
        figs += [(f"delta_us.{r.part}", r.delta_us) for r in self.parts.itertuples()]
        within = abs(self.delta_us) < self.noise_us if not is_nan(self.noise_us) else None
        return {"inputs": [("a", f) for f in self.files[0]] + [("b", f) for f in self.files[1]],
                "settings": {"phase": self.phase, "labels": list(self.labels), **call_settings(args)},
                "figures": figs,
                "facts": {"labels": " -> ".join(self.labels), "phase": self.phase, "cause": self.cause or None,
                          "verdict": None if within is None else ("within noise" if within else "beyond noise")},
                "tables": {"parts": self.parts, "families": self.families, "per_rank": self.per_rank},
                "warnings": list(self.warnings), "label": " -> ".join(self.labels)}

    def __repr__(self) -> str:
        lines = self._head()
        lines.append(f"{'part':<24}{'A us':>10}{'B us':>10}{'delta':>10}{'noise':>8}{'share':>8}  verdict")
        for r in self.parts.itertuples():
            if r.kind == "total":
                continue
            lines.append(f"{r.part:<24}{r.a_us:>10.1f}{r.b_us:>10.1f}{signed(r.delta_us):>10}{r.noise_us:>8.1f}"
                         f"{100 * r.share:>7.1f}%  {'beyond noise' if r.beyond_noise else 'within noise'}")
        lines += _cpu_compare.cause_lines(self.cpu)
        if self.by_module is not None and len(self.by_module):
            lines.append("by nn.Module class (kernel time per step; by_module_instances: per layer):")
            lines += [f"  {str(r.module)[:40]:<40}{r.a_us:>10.1f}{r.b_us:>10.1f}{signed(r.delta_us):>10}"
                      for r in self.by_module.head(5).itertuples()]
        one = self.only_in_one
        if len(one):
            lines.append("kernel families in one run only:")
            for r in one.itertuples():
                us = r.a_us if r.presence == "only A" else r.b_us
                lines.append(f"  {r.presence:<7} {r.category:<16}{us:>10.1f} us/step  {r.family[:80]}")
        if len(self.per_rank) > 1:
            for r in self.per_rank.itertuples():
                lines.append(f"rank {r.rank}: {r.a_us:,.1f} -> {r.b_us:,.1f} us ({signed(r.delta_us)})")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        def tr(cells, tag="td"):
            return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in cells) + "</tr>"
        rows = "".join(tr([r.part, f"{r.a_us:,.1f}", f"{r.b_us:,.1f}", signed(r.delta_us), f"{r.noise_us:,.1f}",
                           f"{100 * r.share:.1f}%", "beyond noise" if r.beyond_noise else "within noise"])
                       for r in self.parts.itertuples() if r.kind != "total")
        one = self.only_in_one
        only = "".join(tr([r.presence, r.category, f"{(r.a_us if r.presence == 'only A' else r.b_us):,.1f}", r.family])
                       for r in one.itertuples())
        head = "<br>".join(html.escape(x) for x in self._head())
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        return (f"<div><b>{head}</b><table><thead>"
                + tr(["part", "A us/step", "B us/step", "delta", "noise", "share", "verdict"], "th")
                + f"</thead><tbody>{rows}</tbody></table>"
                + (f"<p>Kernel families in one run only:</p><table>{tr(['run', 'category', 'us/step', 'family'], 'th')}"
                   f"{only}</table>" if len(one) else "")
                + "".join(f"<p>{html.escape(x)}</p>" for x in _cpu_compare.cause_lines(self.cpu))
                + (f"<p>Warnings:</p><ul>{warn}</ul>" if warn else "") + "</div>")


def _module_layers(ra: _Run, rb: _Run, classes: pd.DataFrame | None) -> pd.DataFrame | None:
    """``by_module``'s drill-down: per module class and layer index (-1: outside the decoder layers),
    per-step kernel time in each run, in the order of the class rows."""
    if classes is None or ra.layers is None or rb.layers is None:
        return None
    order = {m: i for i, m in enumerate(classes["module"])}
    keys = sorted(set(ra.layers) | set(rb.layers), key=lambda x: (order.get(x[0], len(order)), x[1], x[0]))
    a, b = _ab(keys, ra.layers, rb.layers)
    return pd.DataFrame({"module": [x[0] for x in keys], "layer": np.array([x[1] for x in keys]),
                         "a_us": a, "b_us": b, "delta_us": b - a})


def _parts(ra: _Run, rb: _Run, step_ms: tuple[float, float] | None) -> tuple[pd.DataFrame, dict, dict, float]:
    """(the parts table, its total row, its unattributed row, the difference to explain): categories, overlap,
    GPU idle, launch gap, unattributed, then the total."""
    cats = list(dict.fromkeys(ra.cat.names + rb.cat.names))
    rows = [{**r, "kind": "category"} for r in diff_rows(cats, ra.cat.rows(cats), rb.cat.rows(cats))]
    rows.append({**_row("multi-stream overlap", -ra.overlap, -rb.overlap), "kind": "overlap"})
    rows.append({**_row("GPU idle in step", ra.idle, rb.idle), "kind": "gpu-idle"})
    rows.append({**_row("launch gap", ra.gap, rb.gap), "kind": "launch-gap"})
    total = {**_row("step time", ra.times(), rb.times()), "kind": "total"}
    total.update(a_us=ra.step_us, b_us=rb.step_us, delta_us=rb.step_us - ra.step_us)
    trace_delta = total["delta_us"]
    if step_ms is not None:
        ma, mb = float(step_ms[0]), float(step_ms[1])
        delta = (mb - ma) * 1e3
        un = {"part": "unattributed", "a_us": ma * 1e3 - ra.step_us, "b_us": mb * 1e3 - rb.step_us,
              "delta_us": delta - trace_delta, "noise_us": total["noise_us"], "kind": "unattributed"}
    else:
        delta = trace_delta
        un = {"part": "unattributed", "a_us": 0.0, "b_us": 0.0, "delta_us": 0.0, "noise_us": 0.0,
              "kind": "unattributed"}
    rows.append(un)
    parts = pd.DataFrame(rows)
    parts = parts[(parts["kind"] != "category") | (parts["a_us"] != 0) | (parts["b_us"] != 0)]
    parts = pd.concat([parts, pd.DataFrame([total])], ignore_index=True)
    # beyond noise: larger than two standard errors and than 0.1% of A's step (timer resolution, rounding)
    floor_us = 1e-3 * ra.step_us
    parts["beyond_noise"] = parts["delta_us"].abs() > np.maximum(parts["noise_us"], floor_us)
    parts["share"] = parts["delta_us"] / delta if delta else np.nan
    parts = parts[["part", "kind", "a_us", "b_us", "delta_us", "noise_us", "beyond_noise", "share"]]
    return parts, total, un, delta


def _families_table(ra: _Run, rb: _Run, floor_us: float) -> pd.DataFrame:
    """The ``families`` table: per kernel family, its time per step in each run, largest difference first."""
    fams = sorted(set(ra.fam.names) | set(rb.fam.names))
    in_a, in_b = set(ra.fam.names), set(rb.fam.names)
    frows = []
    for r in diff_rows(fams, ra.fam.rows(fams), rb.fam.rows(fams)):
        f = r.pop("part")
        frows.append({"family": f, "category": ra.fam_cat.get(f) or rb.fam_cat.get(f),
                      "presence": "both" if f in in_a and f in in_b else "only A" if f in in_a else "only B", **r,
                      "a_calls": float(ra.fam_calls.get(f, 0.0)), "b_calls": float(rb.fam_calls.get(f, 0.0))})
    families = pd.DataFrame(frows, columns=["family", "category", "presence", "a_us", "b_us", "delta_us", "noise_us",
                                            "a_calls", "b_calls"])
    families["beyond_noise"] = families["delta_us"].abs() > np.maximum(families["noise_us"], floor_us)
    families = families.reindex(families["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    return families.reset_index(drop=True)


@recorded("comparison")
def compare(a, b, *, phase: str = "decode", labels: tuple[str, str] | None = None,
            step_ms: tuple[float, float] | None = None, measured_source: str | None = None,
            ops: bool = True) -> Comparison:
    """Compare run ``a`` with run ``b`` (Profiles, or trace paths to load): see the module docstring.
    ``step_ms``: per-step times of A and B measured outside the profiler (ms), the difference to explain;
    ``ops``: also split by aten op and nn.Module where both profiles link kernels to CPU ops."""
    pa, pb = Profile.of(a), Profile.of(b)
    la, lb = labels or ("A", "B")
    warnings = [f"{la}: {w}" for w in pa.warnings] + [f"{lb}: {w}" for w in pb.warnings]
    if not pa.ranks or not pb.ranks:
        raise TraceError("compare: a run without ranks/kernels")
    for p in (pa, pb):
        if not len(p.kernels):
            raise TraceError(f"compare: {', '.join(os.path.basename(f) for f in p.files)}: no GPU kernel in the "
                             f"trace (recorded without CUDA activity?): nothing to compare")
    runs_a = {r: _rank_run(pa, r, phase, ops) for r in pa.ranks}
    runs_b = {r: _rank_run(pb, r, phase, ops) for r in pb.ranks}
    if sorted(runs_a) != sorted(runs_b):
        warnings.append(f"ranks differ ({sorted(runs_a)} vs {sorted(runs_b)}): rank by rank only where both have it")
    per_rank = pd.DataFrame([{"rank": r, "a_us": runs_a[r].step_us, "b_us": runs_b[r].step_us,
                              "delta_us": runs_b[r].step_us - runs_a[r].step_us}
                             for r in sorted(set(runs_a) & set(runs_b))], columns=["rank", "a_us", "b_us", "delta_us"])
    ra = max(runs_a.values(), key=lambda x: x.step_us)
    rb = max(runs_b.values(), key=lambda x: x.step_us)
    parts, total, un, delta = _parts(ra, rb, step_ms)
    trace_delta = total["delta_us"]
    measured = (float(step_ms[0]), float(step_ms[1])) if step_ms is not None else None
    families = _families_table(ra, rb, 1e-3 * ra.step_us)
    by_op, by_module = _split_table(ra.by_op, rb.by_op, "op"), _split_table(ra.by_module, rb.by_module, "module")
    by_module_instances = _module_layers(ra, rb, by_module)
    if ops and by_op is None:
        warnings.append("no by-op split: at least one trace does not link its kernels to CPU ops (CUDA-graph replay, "
                        "or recorded without CPU activity)")
    cpu, cpu_warnings = _cpu_compare.compare_side((pa, pb), (ra.rank, rb.rank), phase, (la, lb), parts,
                                                  step_ms is not None)
    warnings += cpu_warnings
    if abs(delta) < total["noise_us"]:
        warnings.append(f"the step-time difference ({delta:+,.1f} us) is within the step-to-step noise "
                        f"(+-{total['noise_us']:,.1f} us): no part of it is a finding")
    if step_ms is not None and delta and abs(un["delta_us"]) > 0.05 * abs(delta):
        warnings.append(f"the traces account for {trace_delta:+,.1f} of the measured {delta:+,.1f} us: "
                        f"{un['delta_us']:+,.1f} us unattributed (profiler overhead, or time outside the GPU steps)")
    return Comparison((la, lb), phase, (list(pa.files), list(pb.files)), (ra.rank, rb.rank),
                      (len(ra.step), len(rb.step)), (ra.step_us, rb.step_us), (ra.spread_us, rb.spread_us),
                      measured, measured_source, delta, parts, families, per_rank,
                      by_op, by_module, warnings, cpu, by_module_instances)
