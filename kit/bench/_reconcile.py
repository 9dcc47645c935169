"""Where an inter-token latency goes: the client's gap between two tokens split along the token's path.

For token ``k`` of a request (``k >= 2``) the client's gap ``c_k - c_(k-1)`` is split by the times the
engine recorded for both tokens (``kit.logs.step_records``): the scheduler handed the token over
(``emit``), the output path wrote it (``sent``), and the decode step that made it ran its forward
(``fwd0``..``fwd1``) after a co-scheduled prefill and the host work the forward waited for. On the
critical path, not by adding durations:

- ``http``: ``(c_k - sent_k) - (c_(k-1) - sent_(k-1))``: the stream between the engine's write and the
  client's read (a proxy, the network, the client's own reading);
- ``output``: ``(sent_k - emit_k) - (sent_(k-1) - emit_(k-1))``: detokenising and the output path;
- the step period ``emit_k - emit_(k-1)``, itself split into ``prefill`` (run in the step's iteration),
  ``host`` (host work the forward waited for: a blocking copy; with an overlapping scheduler only what
  the overlap did not hide), ``sched`` (the rest of the time between the previous token's hand-over and
  this forward: scheduling, Python, launches) and the forward ``fwd1 - fwd0``: ``gpu_busy`` and
  ``gpu_idle`` by the busy share of a trace's decode steps when one is given (the trace's proportions,
  the unprofiled run's absolute times: the profiler inflates CPU time), else ``forward`` unsplit.

The parts are differences of one token's timestamps, so where every record is there they add up to the
gap; a token whose path lacks a record (an engine that coalesced several tokens into one chunk, a
request the engine did not record) puts its whole gap into ``residual``, counted and said.

Clocks: the client's send and receive times are on its wall clock, the engine's records on the
engine's. Their offset is estimated as NTP does: a request arrives after it was sent (``arrival -
start >= offset``) and a token is read after it was written (``c_k - sent_k >= -offset``), so the
offset lies in ``[-min(c - sent), min(arrival - start)]``; the middle is stated with its half-width.
An empty interval (a clock jumped) or two halves of the run whose intervals do not overlap (drift)
refuse the reconciliation with the reason instead of giving a waterfall.
"""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kit import logs, profile
from kit.bench._reconcile_coarse import reconcile_coarse
from kit.bench._reconcile_input import checked, offset_note
from kit.bench._result import read_result
from kit.errors import BenchError
from kit.provenance import provenance_of
from kit.stats import is_nan
from kit.util import frame_records, recorded

# part -> (label, where its time comes from)
PARTS: dict[str, tuple[str, str]] = {
    "http": ("HTTP / stream", "client read times - engine write times (request records)"),
    "output": ("detokenize / output path", "engine request records: hand-over -> write"),
    "prefill": ("co-scheduled prefill", "engine step records"),
    "host": ("host work before the forward", "engine step records (exposed part only)"),
    "sched": ("scheduler / CPU between steps", "engine step records: previous hand-over -> forward start"),
    "forward": ("GPU forward (busy + idle)", "engine step records (no trace given: not split)"),
    "gpu_busy": ("GPU forward: busy", "engine step records x busy share of the trace's decode steps"),
    "gpu_idle": ("GPU forward: idle in the step", "engine step records x idle share of the trace's decode steps"),
}
_LABELS = {**PARTS, "residual": ("residual", "client gap - the parts (tokens without full records)"),
           "gap": ("client ITL", "the kit's client records")}
CLOCK_SLACK_S = 0.0005   # timestamps rounded to 1 us and taken a few us apart: an interval this far empty is noise


@dataclass
class Reconciliation:
    """One reconciliation: ``tokens`` (one row per client gap with its parts, ms), ``table`` (per part:
    ``mean``, ``median_band`` (the mean over tokens whose gap is between p45 and p55) and ``slowest_1pct``
    (over the slowest 1 %), ``shown`` (a clock-read part inside the offset bound: 0), its source),
    ``offset_ms`` (engine clock - client clock) and ``offset_bound_ms``, ``warnings``, and ``refused``
    (the reason no figure is given, or ``""``)."""

    tokens: Any
    table: Any
    parts: list[str]
    offset_ms: float = math.nan
    offset_bound_ms: float = math.nan
    busy_share: float = math.nan
    hidden_host_ms: float = 0.0   # host work per step an overlapping scheduler hid behind the forward
    trace: str = ""
    engine: str = ""
    refused: str = ""
    warnings: list[str] = field(default_factory=list)
    provenance: str = ""   # where the client and engine records came from (the session's provenance)
    level: str = "token"   # token, or request / interval / distribution where the engine records less

    @property
    def residual_share(self) -> dict[str, float]:
        """Mean residual over the mean gap, around the median and in the slowest 1 % of tokens."""
        t = self.table
        if self.refused or t is None or "residual" not in set(t["part"]):
            return {"median_band": math.nan, "slowest_1pct": math.nan}
        row, gap = t.set_index("part").loc["residual"], t.set_index("part").loc["client ITL"]
        return {k: abs(row[c]) / gap[c] if gap[c] else math.nan
                for k, c in zip(("median_band", "slowest_1pct"), self.band_columns)}

    @property
    def band_columns(self) -> tuple[str, str]:
        """The table's columns around the median and at the slow end: ``median_band``/``slowest_1pct`` (means over
        bands of tokens) or, for a reconciliation of distributions, ``p50``/``p99`` (percentiles)."""
        cols = set(self.table.columns) if self.table is not None else set()
        return ("median_band", "slowest_1pct") if "median_band" in cols or not cols else ("p50", "p99")

    def to_dict(self) -> dict:
        return {"refused": self.refused, "level": self.level, "provenance": self.provenance,
                "offset_ms": _num(self.offset_ms), "hidden_host_ms": _num(self.hidden_host_ms),
                "offset_bound_ms": _num(self.offset_bound_ms), "busy_share": _num(self.busy_share),
                "trace": self.trace, "engine": self.engine, "warnings": list(self.warnings), "parts": list(self.parts),
                "table": [] if self.table is None else frame_records(self.table),
                "tokens": len(self.tokens) if self.tokens is not None else 0}

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this reconciliation: each part's share of the gap, the clocks."""
        figs = [("offset_ms", self.offset_ms), ("offset_bound_ms", self.offset_bound_ms),
                ("busy_share", self.busy_share), ("hidden_host_ms", self.hidden_host_ms)]
        if self.table is not None and not self.refused:
            figs += [(f"part_ms.{r['part']}", r[s], s) for r in self.table.to_dict("records")
                     for s in ("mean", "p50", "p99") if s in r]
        return {"inputs": [self.trace] if self.trace else [], "figures": figs,
                "facts": {"engine": self.engine or None, "refused": self.refused or None},
                "provenance": self.provenance or None,
                "tables": {"table": self.table} if self.table is not None else {}, "warnings": list(self.warnings)}

    def plot(self, ax=None):
        """The waterfall: each part's share of the gap around the median and in the slowest 1 %."""
        from kit.plots import itl_waterfall  # deferred: matplotlib only when a figure is drawn

        return itl_waterfall(self, ax=ax)

    def __repr__(self) -> str:
        if self.refused:
            return f"Reconciliation(refused: {self.refused})"
        t = self.table.set_index("part")
        mid = self.band_columns[0]
        body = "; ".join(f"{p} {t.loc[p, mid]:.2f}" for p in [*self.parts, "residual"] if p in t.index)
        rows = "gaps" if self.level in ("token", "distribution") else f"{self.level}s"
        said = "around the median (p45-p55 band)" if mid == "median_band" else "p50"
        return (f"Reconciliation({len(self.tokens)} {rows}, client ITL {said} "
                f"{t.loc['client ITL', mid]:.2f} ms "
                f"= {body} ms" + (f"; clock offset {self.offset_ms:+.2f} +/- {self.offset_bound_ms:.2f} ms"
                                  if not is_nan(self.offset_ms) else f"; per {self.level}")
                + (f"; host work hidden by overlap {self.hidden_host_ms:.2f} ms/step" if self.hidden_host_ms > 0.05
                   else "")
                + ")")

    def _repr_html_(self) -> str:
        if self.refused:
            return f"<p><b>Reconciliation refused:</b> {html.escape(self.refused)}</p>"
        return self.table.to_html(index=False, float_format=lambda x: f"{x:.3f}")


@recorded("reconciliation")
def reconcile(client, engine, *, trace=None) -> Reconciliation:
    """Split each client inter-token gap into HTTP, output path, prefill, host work, scheduler and GPU.

    ``client``: the kit's per-request records (a ``LoadResult``/``BenchResult``, a list of
    ``RequestTiming`` or their dicts, or a saved result's JSON path), with the response id each
    request saw. ``engine``: the engine's records (``kit.logs.step_records`` or a file it reads: a log, an
    OTLP span export, iteration statistics); records coarser than a token (``level`` request, iteration,
    interval) give the reconciliation at that level (``kit.bench._reconcile_coarse``), and it says so.
    ``trace``: a ``kit.profile`` Profile (or trace path) of this run or of a run at the same load,
    whose decode steps' busy share splits the forward."""
    recs = engine if hasattr(engine, "steps") and hasattr(engine, "requests") else logs.step_records(engine)
    reqs = _client_requests(client)
    warnings, provenance = list(recs.warnings), _provenance(client, engine)
    if getattr(recs, "level", "step") != "step":
        base = Reconciliation(None, None, [], engine=recs.name, warnings=warnings, provenance=provenance)
        return reconcile_coarse(reqs, recs, base, _table)
    recs, faults, unusable = checked(recs)   # the input step: unusable step records dropped and counted
    warnings += faults
    busy, trace_name = _busy_share(trace, warnings)
    matched, unmatched = _match(reqs, recs.requests)
    if unmatched:
        warnings.append(f"{unmatched} of {len(reqs)} client requests have no engine request record (their gaps "
                        "count as residual)")
    offset, bound, why = _clock_offset(matched)
    gpu = ["forward"] if is_nan(busy) else ["gpu_busy", "gpu_idle"]
    parts = [*gpu, "sched", "host", "prefill", "output", "http"]   # along the token's path
    base = Reconciliation(None, None, parts, offset_ms=offset * 1e3, offset_bound_ms=bound * 1e3, busy_share=busy,
                          trace=trace_name, engine=recs.name, refused=why, warnings=warnings, provenance=provenance)
    if unusable or why:
        base.refused = unusable or why
        return base
    rows = _token_rows(reqs, matched, _steps_by_rid(recs.steps), busy, warnings)
    if not rows:
        base.refused = "no client gap to reconcile (every request produced fewer than two token chunks)"
        return base
    base.tokens = pd.DataFrame(rows)
    note = offset_note(base.offset_ms, base.offset_bound_ms, float(base.tokens["gap"].median()))
    if note:
        warnings.append(note)
    if len(recs.steps) and {"host", "host_exposed"} <= set(recs.steps):
        base.hidden_host_ms = float(1e3 * (recs.steps["host"] - recs.steps["host_exposed"]).clip(lower=0).mean())
    base.table = _table(base.tokens, parts, trace_name, bound * 1e3)
    return base


def _client_requests(client) -> list[dict]:
    if isinstance(client, (str, Path)):
        res = read_result(client)  # the one reader of the kit's results; else request records as they are
        if res is None:
            try:
                res = json.loads(Path(client).read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                raise BenchError(f"{client}: unreadable client records ({exc})") from None
            res = (res.get("requests") or []) if isinstance(res, dict) else res  # another tool's: no requests
            if not isinstance(res, list):
                raise BenchError(f"{client}: neither a kit bench result nor request records (a list, or "
                                 "an object with a 'requests' list)")
        client = res.requests if hasattr(res, "requests") else res
    elif hasattr(client, "requests"):
        client = client.requests
    out = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in client]
    return [r for r in out if r.get("ok")]


def _match(reqs: list[dict], engine_reqs) -> tuple[list[tuple[dict, dict]], int]:
    """(client request, engine record) pairs by the response id; the count of client requests without one."""
    by_id = {str(r["id"]): r for r in engine_reqs.to_dict("records")} if len(engine_reqs) else {}
    pairs = [(r, by_id[r["response_id"]]) for r in reqs if r.get("response_id") in by_id]
    return pairs, len(reqs) - len(pairs)


def _client_times(r: dict) -> list[float]:
    """Client-clock arrival of each token chunk: send + TTFT, then each inter-token gap."""
    t = r["start"] + r["ttft"]
    out = [t]
    for g in r.get("itl") or []:
        t += g
        out.append(t)
    return out


def _offset_interval(pairs: list[tuple[dict, dict]]) -> tuple[float, float]:
    """(lowest, highest) engine-minus-client offset these requests allow."""
    up = min((e["arrival"] - c["start"] for c, e in pairs if e.get("arrival") is not None), default=math.inf)
    down = min((ct - s for c, e in pairs for ct, s in zip(_client_times(c), e["sent"])), default=math.inf)
    return -down, up


def _clock_offset(pairs: list[tuple[dict, dict]]) -> tuple[float, float, str]:
    """(offset, half-width, refusal reason or '') from the NTP-style interval, checked for drift."""
    if not pairs:
        return math.nan, math.nan, ("no client request matches an engine request record by response id (client "
                                    "records without response_id, or an engine log of another run)")
    lo, hi = _offset_interval(pairs)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan, math.nan, "the engine records lack arrival or write times: the clocks cannot be aligned"
    if lo > hi + CLOCK_SLACK_S:
        return math.nan, math.nan, (f"clocks cannot be aligned: a token was read {1e3 * (lo - hi):.2f} ms before it "
                                    "was written by the offset a request's arrival allows (a clock jumped, or the "
                                    "records are of different runs)")
    half = sorted(pairs, key=lambda p: p[0]["start"])
    if len(half) >= 4:
        (lo1, hi1), (lo2, hi2) = _offset_interval(half[: len(half) // 2]), _offset_interval(half[len(half) // 2:])
        if max(lo1, lo2) > min(hi1, hi2) + CLOCK_SLACK_S:
            return math.nan, math.nan, (f"clocks drift: the offset allowed by the first half of the run "
                                        f"[{1e3 * lo1:.2f}, {1e3 * hi1:.2f}] ms and by the second half "
                                        f"[{1e3 * lo2:.2f}, {1e3 * hi2:.2f}] ms do not overlap")
    return (lo + hi) / 2, max(hi - lo, 0.0) / 2, ""


def _steps_by_rid(steps) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for s in steps.to_dict("records") if len(steps) else []:
        for rid in s["rids"]:
            out.setdefault(rid, []).append(s)
    return out


def _token_rows(reqs, pairs, steps_of, busy: float, warnings: list[str]) -> list[dict]:
    by_resp = {c["response_id"]: e for c, e in pairs}
    rows, coalesced = [], 0
    for r in reqs:
        ct = _client_times(r)
        e = by_resp.get(r.get("response_id"))
        ok = e is not None and len(e["sent"]) == len(ct) and len(e["emit"]) == len(ct)
        coalesced += e is not None and not ok
        steps = steps_of.get(e["rid"], []) if e is not None else []
        for k in range(1, len(ct)):
            row = {"request": r.get("response_id") or "", "token": k + 1, "gap": 1e3 * (ct[k] - ct[k - 1])}
            if ok and k - 1 < len(steps):
                row.update(_parts(ct, e, steps[k - 1], k, busy))
            rows.append(row)
    if coalesced:
        warnings.append(f"{coalesced} requests received a different number of chunks than the engine wrote tokens "
                        "(several tokens per chunk): their gaps count as residual")
    return rows


def _parts(ct: list[float], e: dict, step: dict, k: int, busy: float) -> dict:
    sent, emit = e["sent"], e["emit"]
    fwd = step["fwd1"] - step["fwd0"]
    host = float(step.get("host_exposed") or 0.0)
    pf0, pf1 = step.get("pf0"), step.get("pf1")
    prefill = max(0.0, min(pf1, step["fwd0"]) - max(pf0, emit[k - 1])) if pf0 is not None and pf1 is not None else 0.0
    p = {"http": (ct[k] - sent[k]) - (ct[k - 1] - sent[k - 1]),
         "output": (sent[k] - emit[k]) - (sent[k - 1] - emit[k - 1]),
         "prefill": prefill, "host": host,
         "sched": step["fwd0"] - emit[k - 1] - prefill - host}
    # the step's forward ends when the token is handed over; a later hand-over is also the step's time
    tail = emit[k] - step["fwd1"]
    if is_nan(busy):
        p["forward"] = fwd
    else:
        p.update(gpu_busy=fwd * busy, gpu_idle=fwd * (1 - busy))
    p["sched"] += tail
    return {name: 1e3 * v for name, v in p.items()}


BANDS = ("mean", "median_band", "slowest_1pct")   # all tokens; gaps between p45 and p55; gaps at or over p99


def _table(tokens, parts: list[str], trace_name: str, bound_ms: float = math.nan, labels: dict = _LABELS):
    """Per part: its mean over all tokens, over the tokens whose gap is around the median (p45-p55) and over the
    slowest 1 % (means over bands of tokens, named so: a part's band means are not its percentiles). A part
    below zero that lies inside the clock offset's bound is 0, said in ``shown`` ("0 (within +-x ms ...)").
    ``http`` is a difference of two client-minus-engine readings, so the offset cancels in it: a slow hop's
    15 ms is shown although the bound (widened by that same hop) may be wider."""
    t = tokens.copy()
    for p in parts:
        if p not in t:
            t[p] = np.nan
    covered = t[parts].notna().all(axis=1)
    t["residual"] = t["gap"] - t[parts].fillna(0.0).sum(axis=1).where(covered, 0.0)
    lo, hi, top = t["gap"].quantile([0.45, 0.55, 0.99])
    mid = t[(t["gap"] >= lo) & (t["gap"] <= hi)]
    if not len(mid) and len(t):   # a few rows (requests): none between p45 and p55; the row nearest the median
        mid = t.iloc[[int((t["gap"] - t["gap"].median()).abs().to_numpy().argmin())]]
    bands = dict(zip(BANDS, (t, mid, t[t["gap"] >= top])))
    rows = []
    for name in [*parts, "residual", "gap"]:
        label, source = labels[name]
        if name in ("gpu_busy", "gpu_idle") and trace_name:
            source += f" ({trace_name})"
        if name == "forward" and trace_name:     # a trace was given: the real reason it did not split the forward
            source = f"engine step records ({trace_name} has no step with GPU busy time: not split)"
        row = {"part": "client ITL" if name == "gap" else name, "label": label}
        for b, frame in bands.items():
            row[b] = float(frame[name].fillna(0.0).mean()) if len(frame) else math.nan
        row["shown"] = ""
        if name not in ("residual", "gap") and not is_nan(bound_ms):
            # a part below zero (no part takes negative time) inside the bound
            inside = [b for b in bands if not is_nan(row[b]) and -bound_ms <= row[b] < 0]
            for b in inside:
                row[b] = 0.0
            if inside:
                row["shown"] = f"0 (within +-{bound_ms:.3f} ms, the clock bound) in {', '.join(inside)}"
        row["source"] = source
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["unit"] = "ms"
    out.attrs["tokens"] = len(t)
    return out


def _busy_share(trace, warnings: list[str]) -> tuple[float, str]:
    """The busy share of the GPU over a trace's decode steps (all steps when none is marked decode)."""
    if trace is None:
        return math.nan, ""
    p = profile.Profile.of(trace)
    name = p.files[0] if getattr(p, "files", None) else str(trace)
    for phase in ("decode", "all"):
        s = p.summary(phase)
        busy, wall = s.per_rank["busy_us"].sum(min_count=1), s.per_rank["wall_us"].sum(min_count=1)
        if not is_nan(busy) and wall and not is_nan(wall):
            if phase == "all":
                warnings.append(f"{name}: no decode steps marked; the busy share is over all steps")
            return float(busy / wall), name
    warnings.append(f"{name}: no step with GPU busy time (a replay without per-kernel timing?): forward not split")
    return math.nan, name


def _provenance(client, engine) -> str:
    """'client: ...; engine: ...' from the session manifests of the files given (paths only)."""
    said: dict[str, list[str]] = {}
    for role, src in (("client", client), ("engine", engine)):
        if isinstance(src, (str, Path)):
            said.setdefault(provenance_of(str(src)).label, []).append(role)
    return "; ".join(f"{' and '.join(roles)} records: {label}" for label, roles in said.items())


def _num(x: float):
    return None if is_nan(x) else round(float(x), 6)

