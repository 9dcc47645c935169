"""Small-sample statistics without scipy: mean with a Student-t confidence interval (on the log scale for
positive quantities, none below :data:`MIN_REPEATS` repeats), Welch's t-test.

The t distribution's CDF is computed from the regularised incomplete beta function (continued
fraction, as in Numerical Recipes §6.4), accurate to ~1e-10, which is plenty for p-values.
"""
from __future__ import annotations

import math
import statistics
from typing import Sequence


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > 1e-300 else 1e-300
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > 1e-300 else 1e-300
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-12:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided p-value of a t statistic with ``df`` degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, by bisection on :func:`t_sf2`."""
    target = 2.0 * (1.0 - p)
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf2(mid, df) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


MIN_REPEATS = 3          # fewer repeats: no interval is given (two give a t quantile of 12.7: no information)
TOO_FEW = f"too few repeats for an interval: fewer than {MIN_REPEATS}"


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its two-sided confidence interval.

    Values all above zero (latencies, throughputs, ratios: quantities that cannot be negative) get the
    Student-t interval of their logarithms, back-transformed, so it never reaches below zero (a TTFT of
    7.4 ms from 2 repeats was printed as [-5.1, 19.9]); other values get the plain Student-t interval.
    Fewer than :data:`MIN_REPEATS` values give no interval (NaN bounds: :data:`TOO_FEW`)."""
    xs = finite(values)
    n = len(xs)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    m = sum(xs) / n
    if n < MIN_REPEATS:
        return (m, math.nan, math.nan)
    q = t_quantile(0.5 + level / 2.0, n - 1)
    if all(x > 0 for x in xs):
        logs = [math.log(x) for x in xs]
        lm = sum(logs) / n
        half = q * math.sqrt(sum((x - lm) ** 2 for x in logs) / (n - 1)) / math.sqrt(n)
        return (m, min(m, math.exp(lm - half)), max(m, math.exp(lm + half)))
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    half = q * sd / math.sqrt(n)
    return (m, m - half, m + half)


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's unequal-variance t-test of mean(b) vs mean(a): (t, two-sided p). NaN if undefined."""
    xa, xb = finite(a), finite(b)
    if len(xa) < 2 or len(xb) < 2:
        return (math.nan, math.nan)
    ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
    va = sum((x - ma) ** 2 for x in xa) / (len(xa) - 1)
    vb = sum((x - mb) ** 2 for x in xb) / (len(xb) - 1)
    se2 = va / len(xa) + vb / len(xb)
    if se2 == 0:
        return (math.inf if mb != ma else 0.0, 0.0 if mb != ma else 1.0)
    t = (mb - ma) / math.sqrt(se2)
    df = se2 ** 2 / ((va / len(xa)) ** 2 / (len(xa) - 1) + (vb / len(xb)) ** 2 / (len(xb) - 1))
    return (t, t_sf2(t, df))


def finite(values: Sequence[float]) -> list[float]:
    """The values that are finite numbers (None, NaN and inf left out)."""
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def median(values: Sequence[float]) -> float:
    xs = finite(values)
    return statistics.median(xs) if xs else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), ``q`` in 0..100."""
    xs = sorted(finite(values))
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100.0
    f = math.floor(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)
