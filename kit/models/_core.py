"""Two analytical models an investigation checks measurements against.

**AllReduce cost** (tensor-parallel decode). A link is ``alpha`` (latency per algorithm step, µs)
and ``beta`` (bandwidth per direction, GB/s). For an all-reduce of ``S`` bytes over ``n`` GPUs:

    ring      T = 2(n-1)·alpha + 2(n-1)/n · S/beta      (NCCL ring: reduce-scatter + all-gather)
    twoshot   T = 2·alpha      + 2(n-1)/n · S/beta      (custom two-shot kernels)
    oneshot   T = alpha        + (n-1) · S/beta         (each GPU reads every peer's buffer once)

A decode step does ``allreduces_per_layer × layers`` of them (2 per layer for dense TP: after
attention and after the MLP) on ``tokens_per_step × hidden_size × dtype_bytes`` bytes.
:func:`allreduce_cost` predicts per-call, per-step and per-token time, says whether the call is
latency- or bandwidth-bound (which term is larger) and, given a measured step time, the share of it.
Presets in :data:`LINKS` cite their sources; :func:`fit` derives alpha/beta from a measured latency
sweep (e.g. ``all_reduce_perf`` sizes and times), which is what real NCCL numbers need: at decode
sizes NCCL is far from link bandwidth (see ``tests/test_models.py`` for the published measurements
this reproduces).

**Speculative decoding.** With draft length ``k`` and per-position acceptance ``p_i`` (probability
that draft token ``i`` is accepted, as vLLM prints it), a verify step emits
``E = 1 + sum(p_i)`` tokens; with i.i.d. acceptance ``a``: ``E = (1 - a^(k+1)) / (1 - a)``.
If one drafter step costs ``c`` target steps and a verify of k+1 tokens costs one target step
(decode is memory-bound), the speed-up is ``E / (1 + k·c)``; :func:`break_even` is the ``a`` where
it equals 1. ``c`` is always stated in the result, with whether it was measured or assumed.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from kit.errors import ModelError, UsageError
from kit.util import html_fields

__all__ = ["LinkModel", "LINKS", "link", "fit", "allreduce_time_us", "allreduce_cost", "AllReduceCost",
           "expected_tokens", "speedup", "break_even", "spec_estimate", "spec_from_summary", "SpecEstimate",
           "speedup_curves", "acceptance_for_length", "drafter_cost"]

# algorithm -> (number of alpha steps, bytes factor on S/beta) on n GPUs
_TERMS = {"ring": lambda n: (2.0 * (n - 1), 2.0 * (n - 1) / n), "twoshot": lambda n: (2.0, 2.0 * (n - 1) / n),
          "oneshot": lambda n: (1.0, float(n - 1))}
ALGORITHMS = tuple(_TERMS)


# --------------------------------------------------------------------------- links

@dataclass(frozen=True)
class LinkModel:
    """A link between GPUs: ``alpha_us`` latency per algorithm step, ``beta_gbps`` GB/s per direction.
    ``source`` says where the numbers come from; ``fitted`` marks values from :func:`fit`."""

    name: str
    alpha_us: float
    beta_gbps: float
    source: str = ""
    fitted: bool = False
    fit_points: int = 0
    fit_max_error: float | None = None  # largest relative error over the fitted points

    def __repr__(self) -> str:
        how = f"fitted on {self.fit_points} points" if self.fitted else "preset"
        return (f"LinkModel({self.name}: alpha {self.alpha_us:.3g} us/step, beta {self.beta_gbps:.3g} GB/s, "
                f"{how})")


LINKS: dict[str, LinkModel] = {
    "pcie4": LinkModel(
        "pcie4", 3.1, 31.5,
        "beta: PCIe 4.0 x16 = 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s per direction (PCI-SIG); "
        "alpha: per ring step of NCCL fitted on 4xV100 behind a PLX switch, no NVLink "
        "(github.com/haohervchb/sglang-V100/pull/2: 19.4 us at 4 KB, 83.5 us at 384 KB; a PCIe 3 host)"),
    "pcie5": LinkModel(
        "pcie5", 2.2, 63.0,
        "beta: PCIe 5.0 x16 = 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s per direction (PCI-SIG); "
        "alpha: NCCL 13.2 us for a 1 KB all-reduce on 4xRTX PRO 6000 over PCIe / 6 ring steps "
        "(local-inference-lab/rtx6kpro optimization/pcie-oneshot-allreduce.md)"),
    "nvlink_h100": LinkModel(
        "nvlink_h100", 3.0, 450.0,
        "beta: NVLink 4 on H100 SXM, 900 GB/s total = 450 GB/s per direction (NVIDIA H100 datasheet); "
        "alpha: ~6 us small-message all-reduce on 2xH100 NVLink / 2 steps (github.com/NVIDIA/nccl/issues/1259)"),
    "nvlink_h200": LinkModel(
        "nvlink_h200", 3.0, 450.0,
        "beta: NVLink 4 on H200 SXM, 900 GB/s total = 450 GB/s per direction (NVIDIA H200 datasheet); "
        "alpha: as nvlink_h100 (same NVLink/NVSwitch generation; github.com/NVIDIA/nccl/issues/1259)"),
}


def link(name_or_model: str | LinkModel) -> LinkModel:
    """A preset by name (``'pcie4'``, ``'pcie5'``, ``'nvlink_h100'``, ``'nvlink_h200'``) or a LinkModel."""
    if isinstance(name_or_model, LinkModel):
        return name_or_model
    try:
        return LINKS[name_or_model]
    except KeyError:
        raise ModelError(f"unknown link preset {name_or_model!r}; presets: {', '.join(LINKS)}") from None


def _terms(n: int, algorithm: str) -> tuple[float, float]:
    if n < 2:
        raise ModelError(f"all-reduce needs at least 2 GPUs, got tp={n}")
    if algorithm not in _TERMS:
        raise ModelError(f"unknown all-reduce algorithm {algorithm!r}; one of {', '.join(ALGORITHMS)}")
    return _TERMS[algorithm](n)


def allreduce_time_us(message_bytes: float, n: int, lnk: str | LinkModel, algorithm: str = "ring") -> float:
    """Predicted time of one all-reduce of ``message_bytes`` over ``n`` GPUs, in µs."""
    lm = link(lnk)
    steps, factor = _terms(n, algorithm)
    return steps * lm.alpha_us + factor * message_bytes / (lm.beta_gbps * 1e3)


def fit(sizes_bytes: Sequence[float] | pd.DataFrame, times_us: Sequence[float] | None = None, *, n: int,
        algorithm: str = "ring", name: str = "fitted", source: str = "") -> LinkModel:
    """Fit alpha/beta to a measured all-reduce latency sweep (least squares on T = steps·alpha +
    factor·S/beta; two points give an exact fit). ``sizes_bytes`` may be a DataFrame with columns
    ``size_bytes``/``size`` and ``time_us``/``time``. ModelError when the sweep cannot give positive
    alpha and beta (fewer than 2 distinct sizes, or time falling with size)."""
    if isinstance(sizes_bytes, pd.DataFrame):
        df = sizes_bytes
        scol = next((c for c in ("size_bytes", "size") if c in df.columns), None)
        tcol = next((c for c in ("time_us", "time") if c in df.columns), None)
        if scol is None or tcol is None:
            raise ModelError(f"fit: DataFrame needs size_bytes and time_us columns, has {list(df.columns)}")
        s, t = df[scol].to_numpy(float), df[tcol].to_numpy(float)
    else:
        if times_us is None:
            raise ModelError("fit: times_us missing")
        s, t = np.asarray(sizes_bytes, float), np.asarray(times_us, float)
    if s.shape != t.shape or len(np.unique(s)) < 2:
        raise ModelError(f"fit: need at least 2 distinct message sizes with one time each, got {len(s)}")
    steps, factor = _terms(n, algorithm)
    slope, intercept = np.polyfit(s, t, 1)
    if slope <= 0 or intercept <= 0:
        raise ModelError(f"fit: sweep gives non-positive latency ({intercept:.3g} us) or bandwidth "
                         f"(slope {slope:.3g} us/B); check sizes are bytes and times are µs")
    alpha = intercept / steps
    beta = factor / slope / 1e3
    pred = intercept + slope * s
    err = float(np.max(np.abs(pred - t) / t))
    return LinkModel(name, float(alpha), float(beta),
                     source or f"fitted to {len(s)} measured {algorithm} all-reduce latencies on {n} GPUs",
                     True, int(len(s)), err)


@dataclass(frozen=True)
class AllReduceCost:
    """Predicted all-reduce cost of one decode step. Times in µs; ``share`` is of the measured step."""

    tp: int
    algorithm: str
    link: LinkModel
    message_bytes: int
    calls_per_step: int
    tokens_per_step: int
    per_call_us: float
    latency_term_us: float
    bandwidth_term_us: float
    per_step_us: float
    per_token_us: float
    bound: str
    crossover_bytes: float
    by_algorithm_us: dict[str, float] = field(default_factory=dict)
    step_time_ms: float | None = None
    share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("tp", "algorithm", "message_bytes", "calls_per_step", "tokens_per_step",
                                           "per_call_us", "latency_term_us", "bandwidth_term_us", "per_step_us",
                                           "per_token_us", "bound", "crossover_bytes", "step_time_ms", "share")}
        d["link"] = {"name": self.link.name, "alpha_us": self.link.alpha_us, "beta_gbps": self.link.beta_gbps,
                     "source": self.link.source, "fitted": self.link.fitted}
        d["by_algorithm_us"] = dict(self.by_algorithm_us)
        return d

    def __repr__(self) -> str:
        lat = self.latency_term_us / self.per_call_us if self.per_call_us else 0.0
        s = (f"AllReduceCost(TP{self.tp} {self.algorithm} over {self.link.name}: {_kib(self.message_bytes)} x "
             f"{self.calls_per_step} calls/step -> {self.per_call_us:.1f} us/call, "
             f"{self.per_step_us / 1e3:.3f} ms/step, {self.per_token_us / 1e3:.3f} ms/token; {self.bound} "
             f"(latency {lat:.0%} of a call, crossover {_kib(self.crossover_bytes)})")
        if self.share is not None:
            s += f"; {self.share:.0%} of the given {self.step_time_ms:.2f} ms step"
        return s + ")"

    def _repr_html_(self) -> str:
        rows = [("tensor-parallel size", self.tp), ("algorithm", self.algorithm), ("link", self.link.name),
                ("message", f"{self.message_bytes} B, {self.calls_per_step} calls per step"),
                ("per call", f"{self.per_call_us:.2f} us (latency {self.latency_term_us:.2f} + bandwidth "
                             f"{self.bandwidth_term_us:.2f})"),
                ("per token", f"{self.per_token_us / 1e3:.3f} ms ({self.bound})")]
        rows += [(f"{a} per token", f"{t * self.calls_per_step / 1e3:.3f} ms") for a, t in self.by_algorithm_us.items()]
        if self.share is not None and self.step_time_ms:
            rows.append(("share of the given step", f"{self.share:.1%} of {self.step_time_ms:.2f} ms"))
        return html_fields("AllReduceCost (model prediction)", rows)


def _kib(b: float) -> str:
    return f"{b / 1024:.1f} KiB" if b < 1024 * 1024 else f"{b / 1048576:.2f} MiB"


def allreduce_cost(*, tp: int, hidden_size: int, layers: int, dtype_bytes: int = 2, tokens_per_step: int = 1,
                   allreduces_per_layer: int = 2, link: str | LinkModel = "pcie5", algorithm: str = "ring",
                   step_time_ms: float | None = None) -> AllReduceCost:
    """Predict the all-reduce time of one decode step of a tensor-parallel model.

    ``tokens_per_step``: tokens through the model per forward (batch size × tokens verified per
    sequence). ``allreduces_per_layer``: 2 for dense TP (attention output + MLP output); MoE or
    hybrid layers may differ. ``step_time_ms``: measured decode step time, to get the share.
    """
    if min(hidden_size, layers, dtype_bytes, tokens_per_step, allreduces_per_layer) <= 0:
        raise ModelError("allreduce_cost: hidden_size, layers, dtype_bytes, tokens_per_step and "
                         "allreduces_per_layer must be positive")
    lm = globals()["link"](link)
    size = int(tokens_per_step * hidden_size * dtype_bytes)
    steps, factor = _terms(tp, algorithm)
    lat = steps * lm.alpha_us
    bw = factor * size / (lm.beta_gbps * 1e3)
    per_call = lat + bw
    calls = int(allreduces_per_layer * layers)
    per_step = per_call * calls
    crossover = lat * lm.beta_gbps * 1e3 / factor
    by_alg = {a: allreduce_time_us(size, tp, lm, a) for a in ALGORITHMS}
    share = None
    if step_time_ms is not None:
        if step_time_ms <= 0:
            raise ModelError(f"allreduce_cost: step_time_ms must be positive, got {step_time_ms}")
        share = per_step / (step_time_ms * 1e3)
    return AllReduceCost(tp, algorithm, lm, size, calls, int(tokens_per_step), per_call, lat, bw, per_step,
                         per_step / tokens_per_step, "latency-bound" if lat >= bw else "bandwidth-bound",
                         crossover, by_alg, step_time_ms, share)


# --------------------------------------------------------------------------- speculative decoding

def expected_tokens(a: float | None = None, k: int | None = None, *,
                    per_position: Sequence[float] | None = None) -> float:
    """Tokens emitted per verify step (incl. the bonus token): ``1 + sum(per_position)``, or for
    i.i.d. acceptance ``a`` with ``k`` drafts ``(1 - a^(k+1)) / (1 - a)``."""
    if per_position is not None:
        pp = [float(x) for x in per_position]
        if any(not 0.0 <= x <= 1.0 for x in pp):
            raise ModelError(f"per-position acceptance must be fractions in [0, 1], got {pp}")
        return 1.0 + sum(pp)
    if a is None or k is None:
        raise ModelError("expected_tokens: give a and k, or per_position")
    if not 0.0 <= a <= 1.0:
        raise ModelError(f"acceptance must be a fraction in [0, 1], got {a}")
    if k < 0:
        raise ModelError(f"k must be >= 0, got {k}")
    if a == 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def speedup(a: float | None = None, k: int | None = None, c: float = 0.0, *,
            per_position: Sequence[float] | None = None, mean_acceptance_length: float | None = None) -> float:
    """Expected speed-up over plain decoding: ``E[tokens] / (1 + k·c)``."""
    if k is None:
        k = len(per_position) if per_position is not None else None
    if k is None:
        raise ModelError("speedup: k is needed")
    if c < 0:
        raise ModelError(f"drafter cost c must be >= 0, got {c}")
    e = float(mean_acceptance_length) if mean_acceptance_length is not None else \
        expected_tokens(a, k, per_position=per_position)
    return e / (1.0 + k * c)


def break_even(k: int, c: float) -> float | None:
    """i.i.d. acceptance at which speculation neither gains nor loses (speed-up 1); None when no
    acceptance can pay for the drafter (``c >= 1``), 0.0 when it is free (``c == 0``)."""
    if k < 1:
        raise ModelError(f"break_even: k must be >= 1, got {k}")
    if c < 0:
        raise ModelError(f"drafter cost c must be >= 0, got {c}")
    if c == 0:
        return 0.0
    target = 1.0 + k * c  # tokens per verify step needed to pay for k drafts
    if k + 1 <= target:
        return None
    return acceptance_for_length(target, k)


def acceptance_for_length(mean_acceptance_length: float, k: int) -> float:
    """The i.i.d. acceptance ``a`` whose expected tokens per verify equal a measured length."""
    if not 1.0 <= mean_acceptance_length <= k + 1 + 1e-9:
        raise ModelError(f"mean acceptance length {mean_acceptance_length} outside [1, k+1={k + 1}]")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < mean_acceptance_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def drafter_cost(mean_acceptance_length: float, k: int, measured_speedup: float) -> float:
    """The drafter cost ``c`` (relative to one target step) implied by a measured speed-up.

    Inverts ``speed-up = L / (1 + k*c)`` for a run whose mean acceptance length ``L`` (incl. the
    bonus token) and tok/s with and without the drafter were both measured; clipped at 0.
    """
    if k < 1 or measured_speedup <= 0:
        raise ModelError(f"drafter_cost needs k >= 1 and a positive speed-up (got k={k}, {measured_speedup})")
    return max(0.0, (mean_acceptance_length / measured_speedup - 1.0) / k)


@dataclass(frozen=True)
class SpecEstimate:
    """Expected effect of speculative decoding at draft length ``k`` and drafter cost ``c``."""

    k: int
    c: float
    c_measured: bool
    acceptance: float | None       # the acceptance figure the estimate is stated for (fraction)
    expected_tokens: float         # tokens per verify step incl. bonus
    speedup: float
    break_even: float | None       # i.i.d. acceptance giving speed-up 1 at this k, c
    basis: str                     # 'i.i.d. acceptance', 'per-position acceptance', 'measured length'

    @property
    def verdict(self) -> str:
        return "speed-up" if self.speedup > 1.0 else "no gain" if self.speedup == 1.0 else "slow-down"

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "c": self.c, "c_measured": self.c_measured, "acceptance": self.acceptance,
                "expected_tokens": self.expected_tokens, "speedup": self.speedup,
                "break_even": self.break_even, "basis": self.basis, "verdict": self.verdict}

    def __repr__(self) -> str:
        acc = f"{self.acceptance:.0%}" if self.acceptance is not None else "?"
        be = f"{self.break_even:.1%}" if self.break_even is not None else "none (c >= 1)"
        c_from = "inferred from tok/s" if self.c_measured else "assumed"
        return (f"SpecEstimate({acc} at k={self.k}, c={self.c:g} ({c_from}) "
                f"-> {self.expected_tokens:.2f} tokens/verify, expected x{self.speedup:.2f} ({self.verdict}); "
                f"break-even acceptance {be}; basis: {self.basis})")

    def _repr_html_(self) -> str:
        be = f"{self.break_even:.1%}" if self.break_even is not None else "none (c >= 1)"
        return html_fields("SpecEstimate", [
            ("draft tokens per step (k)", self.k),
            ("drafter cost c", f"{self.c:g} ({'inferred from tok/s' if self.c_measured else 'assumed'})"),
            ("acceptance", f"{self.acceptance:.1%}" if self.acceptance is not None else "?"),
            ("expected tokens per verify", f"{self.expected_tokens:.3f}"),
            ("expected speed-up", f"x{self.speedup:.3f} ({self.verdict})"),
            ("break-even i.i.d. acceptance", be),
            ("break-even acceptance length", f"{1 + self.k * self.c:.3f}"),
            ("basis", self.basis)])


def spec_estimate(a: float | None = None, *, k: int, c: float, per_position: Sequence[float] | None = None,
                  c_measured: bool = False) -> SpecEstimate:
    """``spec_estimate(0.42, k=3, c=0.15)`` -> 'x1.15 expected'; or from per-position rates."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise UsageError(f"spec_estimate: k (draft tokens per verify step) must be an integer >= 1, got {k!r}")
    e = expected_tokens(a, k, per_position=per_position)
    acc = a if per_position is None else (sum(per_position) / len(per_position) if per_position else 0.0)
    return SpecEstimate(k, float(c), c_measured, acc, e, speedup(mean_acceptance_length=e, k=k, c=c),
                        break_even(k, c),
                        "per-position acceptance" if per_position is not None else "i.i.d. acceptance")


def spec_from_summary(summary, c: float, *, c_measured: bool = False) -> SpecEstimate:
    """Apply the model to a parsed run (:class:`kit.logs.SpecSummary`): its measured mean
    acceptance length gives the expected tokens directly."""
    k = summary.k
    al = summary.mean_acceptance_length
    if not k or al is None or math.isnan(al):
        raise ModelError(f"spec_from_summary: the run has no usable k ({k}) or acceptance length ({al})")
    return SpecEstimate(int(k), float(c), c_measured,
                        None if math.isnan(summary.draft_acceptance_rate) else summary.draft_acceptance_rate,
                        float(al), speedup(mean_acceptance_length=al, k=k, c=c), break_even(int(k), c),
                        "measured length")


def speedup_curves(c: float, ks: Iterable[int] = range(1, 8), points: int = 101) -> pd.DataFrame:
    """Speed-up vs i.i.d. acceptance for each k: columns ``k, acceptance, expected_tokens, speedup``."""
    grid = np.linspace(0.0, 1.0, points)
    rows = []
    for k in ks:
        for a in grid:
            e = expected_tokens(float(a), k)
            rows.append((k, float(a), e, e / (1.0 + k * c)))
    return pd.DataFrame(rows, columns=["k", "acceptance", "expected_tokens", "speedup"])
