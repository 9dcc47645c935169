"""Many ranks of one job: each rank reduced to a small digest as it arrives, then the cross-rank view.

A job of N rank traces is never held whole. Traces on hosts are parsed where they lie by the kit's reader
(``_remote.py``): one command per host, all hosts in parallel, the host parsing its ranks on its own cores;
its output is read as a stream, and each rank's raw tables, as soon as they are complete, are assembled
into a one-rank Profile, digested and dropped. Local traces are loaded one at a time the same way. What
the collector keeps per rank is the digest: per-step wall and compute times, compute time per kernel
family, per layer and per (layer, family), communication time per step: a few kilobytes, so its memory
does not grow with N beyond that.

The view (:class:`RankView`):

- ``per_rank``: steps, mean / median step time, compute (kernel time without collectives) and
  communication time per step, for every rank;
- the **straggler**: the rank whose compute time per step exceeds the median of the other ranks the most;
  decided only when that excess is beyond the noise (two standard errors from the ranks' own per-step
  spread), beyond three median absolute deviations of the other ranks and at least 1% of the median:
  otherwise ``straggler`` says none stands out. Compute time, not step time, because in a job whose ranks
  meet in collectives every rank's step is as long as the slowest: the others wait inside the
  collectives, which is the **collective wait skew** (per-rank communication time per step, max - min);
- ``where``: the kernel families, layers and (layer, family) pairs where the straggler spends more time
  than the median rank, largest excess first; layers need module frames (``with_stack=True`` traces),
  and their absence is said.
"""
from __future__ import annotations

import html
import math
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from kit import stats
from kit.errors import RemoteError, TraceError
from kit.profile._assemble import assemble
from kit.profile._profile import Profile, load
from kit.profile.attribution._categories import COMM, build_rules
from kit.profile.attribution._names import kernel_family
from kit.profile.reading import _remote
from kit.stats import is_nan
from kit.util import call_settings, frame_figures, recorded
from kit.util import progress as progress_bar

_TOP = 400        # kernel families / (layer, family) pairs kept per rank
_WHERE = ["what", "name", "straggler_us", "median_us", "excess_us"]


@dataclass
class RankDigest:
    """What the collector keeps of one rank (see the module docstring)."""

    rank: int
    source: str
    step_us: np.ndarray
    compute_us: np.ndarray
    comm_us: np.ndarray
    families: pd.Series
    layers: pd.Series | None
    layer_families: pd.Series | None
    warnings: list[str] = field(default_factory=list)
    host: str = "local"


def digest(p, phase: str, source: str) -> RankDigest:
    """A one-rank Profile -> its digest for ``phase`` (decode / prefill / all)."""
    steps = p.steps if phase == "all" else p.steps[p.steps["phase"] == phase]
    k = p.kernels if phase == "all" else p.kernels[p.kernels["phase"] == phase]
    k = k[k["step"].isin(steps["step"])] if len(steps) else k.iloc[:0]
    n = max(1, len(steps))
    comm = k["category"].isin(COMM).to_numpy()
    order = steps["step"].to_numpy()
    per_step = k.groupby(["step", comm])["dur_us"].sum().unstack(fill_value=0.0).reindex(order, fill_value=0.0)
    compute = per_step.get(False, pd.Series(0.0, index=order)).to_numpy(dtype=float)
    commu = per_step.get(True, pd.Series(0.0, index=order)).to_numpy(dtype=float)
    kc = k[~comm]
    fam = kc["name"].map(kernel_family).astype(object)   # a categorical column: one call per distinct name
    families = (kc["dur_us"].groupby(fam).sum() / n).nlargest(_TOP)
    layers = lf = None
    if "layer" in kc and (kc["layer"] >= 0).any():
        inl = kc[kc["layer"] >= 0]
        layers = inl.groupby("layer")["dur_us"].sum() / n
        lf = (inl["dur_us"].groupby([inl["layer"], fam[kc["layer"] >= 0]]).sum() / n).nlargest(_TOP)
    rank = p.ranks[0] if p.ranks else -1
    return RankDigest(int(rank), source, steps["wall_us"].to_numpy(dtype=float), compute, commu, families,
                      layers, lf, list(p.warnings))


def _host_digests(host, paths: list[str], phase: str, rules, python: str, timeout: float, progress) -> list:
    cmd, _pushed = _remote.reader_command(host, paths, python)
    out: list[RankDigest] = []

    def emit(head, payload):
        label = f"{host.name}:{head['path']}"
        fr = _remote.checked(host, head, payload)
        d = digest(Profile.from_assembled([label], assemble([Path(head["path"])], [fr], rules, False), rules),
                   phase, label)
        d.host = host.name
        out.append(d)
        progress(1)

    res = host.run(cmd, timeout=timeout, on_stdout=_remote.Frames(emit, host.name).feed)
    if not res.ok:
        raise _remote.failed(host, res, python)
    if len(out) != len(paths):
        raise RemoteError(f"{host.name}: the remote reader returned {len(out)} of {len(paths)} ranks", host=host.name)
    return out


@recorded("ranks")
def ranks(paths, *, phase: str = "decode", host=None, rules=None, python: str = "python3",
          timeout: float = 3600.0, progress: bool | None = None) -> "RankView":
    """The cross-rank view of one job's rank traces (see the module docstring).

    ``paths``: local files, ``"HOST:/path/rank*.json.gz"`` specs, paths with ``host=``, or
    ``{Host: [paths or globs]}`` for several hosts; hosts are read in parallel, one command each.
    ``progress``: a progress bar over the ranks (default: in a terminal or notebook, after 2 s; ``KIT_PROGRESS=off``
    silences it)."""
    rule_list = build_rules(rules)
    listed, local = _remote.by_host(paths, host)
    remote: dict[str, tuple] = {}
    for h, p in listed:
        remote.setdefault(h.name, (h, []))[1].append(p)
    total = len(local) + sum(len(ps) for _, ps in remote.values())
    if not total:
        raise TraceError("ranks: no trace files given")
    digests: list[RankDigest] = []
    pool = ThreadPoolExecutor(max(1, len(remote)), thread_name_prefix="kit-ranks")
    with progress_bar("ranks", total, unit="rank", show=progress) as bar, pool:
        # the bar counts under its own lock: the hosts' threads tick it directly
        futs = [pool.submit(_host_digests, h, ps, phase, rule_list, python, timeout, bar.update)
                for h, ps in remote.values()]
        for f in local:
            digests.append(digest(load([f], rules=rules), phase, f))
            bar.update(1)
        for fut in futs:
            digests.extend(fut.result())
    return view(digests, phase)


def _mad(xs) -> float:
    m = statistics.median(xs)
    return statistics.median(abs(x - m) for x in xs)


def _excess(s: pd.Series, others: list[pd.Series], what: str, fmt) -> pd.DataFrame:
    if not others:
        return pd.DataFrame(columns=_WHERE)
    table = pd.concat(others, axis=1).fillna(0.0)
    med = table.median(axis=1).reindex(s.index.union(table.index), fill_value=0.0)
    mine = s.reindex(med.index, fill_value=0.0)
    ex = (mine - med).sort_values(ascending=False)
    return pd.DataFrame({"what": what, "name": [fmt(i) for i in ex.index], "straggler_us": mine[ex.index].to_numpy(),
                         "median_us": med[ex.index].to_numpy(), "excess_us": ex.to_numpy()})


def view(digests: list[RankDigest], phase: str) -> "RankView":
    """The cross-rank view from the ranks' digests."""
    digests = sorted(digests, key=lambda d: (d.rank, d.source))
    warnings = []
    if len({d.rank for d in digests}) != len(digests):
        warnings.append("several traces claim the same rank: ranks renumbered in file order")
        for i, d in enumerate(digests):
            d.rank = i
    rows = []
    for d in digests:
        n = len(d.step_us)
        rows.append({"rank": d.rank, "host": d.host, "source": d.source, "steps": n,
                     "step_us": float(np.mean(d.step_us)) if n else math.nan,
                     "step_p50_us": float(np.median(d.step_us)) if n else math.nan,
                     "compute_us": float(np.mean(d.compute_us)) if n else math.nan,
                     "compute_se_us": float(np.std(d.compute_us, ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
                     "comm_us": float(np.mean(d.comm_us)) if n else math.nan})
    per_rank = pd.DataFrame(rows)
    empty = [d.source for d in digests if not len(d.step_us)]
    if empty:
        warnings.append(f"{len(empty)} rank(s) without {phase} steps (left out of the straggler search): "
                        f"{', '.join(empty[:4])}")
    return RankView(phase, per_rank, *_straggler(digests, per_rank), _skew(per_rank, warnings), warnings)


def _straggler(digests, per_rank) -> tuple[dict, pd.DataFrame]:
    ok = per_rank[per_rank["steps"] > 0]
    none = pd.DataFrame(columns=_WHERE)
    if len(ok) < 3:
        return {"rank": None, "decided": False, "reason": f"{len(ok)} rank(s) with steps: at least 3 are needed"}, none
    i = ok["compute_us"].idxmax()
    r = ok.loc[i]
    others = ok.drop(index=i)
    med = float(others["compute_us"].median())
    se_med = float(others["compute_se_us"].median()) if others["compute_se_us"].notna().any() else 0.0
    se = float(r["compute_se_us"])
    noise = stats.noise(0.0 if is_nan(se) else se ** 2, se_med ** 2)   # one step: its spread unknown, 0
    spread = 3 * _mad(list(others["compute_us"]))
    excess = float(r["compute_us"] - med)
    bar = max(noise, spread, 0.01 * med)
    decided = excess > bar
    s = {"rank": int(r["rank"]) if decided else None, "candidate": int(r["rank"]), "decided": bool(decided),
         "compute_us": float(r["compute_us"]), "median_us": med, "excess_us": excess, "noise_us": noise,
         "spread_us": spread, "step_us": float(r["step_us"]),
         "reason": (f"rank {int(r['rank'])} computes {excess:+,.1f} us per step more than the median rank "
                    f"(bar {bar:,.1f} us: noise, 3 MAD of the others, 1% of the median)") if decided else
                   f"no rank stands out: the largest excess ({excess:+,.1f} us, rank {int(r['rank'])}) is within "
                   f"{bar:,.1f} us (noise {noise:,.1f}, 3 MAD {spread:,.1f}, 1% of the median)"}
    if not decided:
        return s, none
    d = next(x for x in digests if x.rank == int(r["rank"]))
    rest = [x for x in digests if x is not d and len(x.step_us)]
    parts = [_excess(getattr(d, a), [getattr(x, a) for x in rest if getattr(x, a) is not None], what, fmt)
             for a, what, fmt in (("families", "family", str), ("layers", "layer", lambda i: f"layer {i}"),
                                  ("layer_families", "layer+family", lambda i: f"layer {i[0]}: {i[1]}"))
             if getattr(d, a) is not None]
    where = pd.concat([p[p["excess_us"] > 0.05 * excess] for p in parts], ignore_index=True)
    where = where.sort_values("excess_us", ascending=False, kind="stable").reset_index(drop=True)
    for what, key in (("family", "kernel"), ("layer", "layer"), ("layer+family", "at")):
        top = where[where["what"] == what]
        s[key] = str(top["name"].iloc[0]) if len(top) else None
    if d.layers is None:
        s["layers"] = "no module frames in the straggler's trace: per-layer time needs with_stack=True traces"
    return s, where


def _skew(per_rank: pd.DataFrame, warnings: list[str]) -> dict:
    comm = per_rank["comm_us"].dropna()
    if not len(comm) or not (comm > 0).any():
        warnings.append("no collective kernels in these traces: collective wait skew not measurable (single-GPU "
                        "traces, or collectives captured in CUDA graphs without kernel records)")
        return {"measurable": False}
    hi, lo = per_rank.loc[comm.idxmax()], per_rank.loc[comm.idxmin()]
    return {"measurable": True, "skew_us": float(hi["comm_us"] - lo["comm_us"]), "max_rank": int(hi["rank"]),
            "min_rank": int(lo["rank"]), "max_us": float(hi["comm_us"]), "min_us": float(lo["comm_us"]),
            "note": "the rank that waits least in collectives is the one the others wait for"}


@dataclass(eq=False)
class RankView:
    """The cross-rank view of one job (module docstring); ``straggler`` is a dict: rank or None, decided,
    excess and its bar, reason."""

    phase: str
    per_rank: pd.DataFrame
    straggler: dict
    where: pd.DataFrame
    collective_skew: dict
    warnings: list[str] = field(default_factory=list)

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this view: per-rank figures and the straggler."""
        figs = frame_figures(self.per_rank[["rank", "step_us", "compute_us", "comm_us"]], key="rank")
        s = self.straggler
        figs += [(k, s.get(k)) for k in ("excess_us", "noise_us") if s.get(k) is not None]
        return {"inputs": list(self.per_rank["source"]), "settings": {"phase": self.phase, **call_settings(args)},
                "figures": figs,
                "facts": {"straggler": None if s.get("rank") is None else str(s["rank"]),
                          "where": s.get("at") or s.get("kernel"), "straggler_reason": s.get("reason")},
                "tables": {"per_rank": self.per_rank, "where": self.where}, "warnings": list(self.warnings)}

    def __repr__(self) -> str:
        pr = self.per_rank
        s = self.straggler
        steps = pr["step_us"].dropna()
        # no step of this phase in any rank: no step time to print (it read "step nan us")
        head = (f"no {self.phase} step in any rank; give --phase all or a trace with step markers" if not len(steps)
                else f"step {steps.median():,.1f} us median, {steps.min():,.1f}-{steps.max():,.1f}; compute "
                f"{pr['compute_us'].dropna().median():,.1f} us median per step")
        lines = [f"RankView({len(pr)} ranks, phase {self.phase}: {head})", f"straggler: {s['reason']}"]
        if s.get("decided"):
            layer = s.get("layer") or "unknown: " + s.get("layers", "")
            lines.append(f"  where: {s.get('at') or s.get('kernel')} ({layer})")
        for w in self.where.head(6).itertuples():
            lines.append(f"  {w.what:<13} {str(w.name)[:70]:<72} {w.excess_us:+9,.1f} us per step")
        cs = self.collective_skew
        if cs.get("measurable"):
            lines.append(f"collective wait skew: {cs['skew_us']:,.1f} us per step (rank {cs['max_rank']} waits "
                         f"{cs['max_us']:,.1f}, rank {cs['min_rank']} {cs['min_us']:,.1f})")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(repr(self))}</pre>"
