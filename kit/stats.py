"""The kit's noise rule and NaN test, in one low place that every analysis can import: a difference of two
means is *beyond noise* when it exceeds two standard errors of the difference (:func:`noise`); the profile
comparison, the structural diff, the rank view and both gates decide by it."""
from __future__ import annotations

import math
import numbers

NOISE_SE = 2.0   # standard errors of the difference that make it noise


def noise(se2_a, se2_b, z: float = NOISE_SE):
    """``z`` (two) standard errors of the difference of two independent means (or medians), from each one's
    squared standard error (floats or numpy arrays alike; an unknown one, NaN, makes the noise unknown)."""
    return z * (se2_a + se2_b) ** 0.5


def sq_se(std: float, n: int) -> float:
    """The squared standard error of a mean of ``n`` values with standard deviation ``std``."""
    return std * std / n if n else math.nan


def is_nan(x) -> bool:
    """Whether ``x`` is a NaN number (a Python or numpy float; None and non-numbers are not)."""
    return isinstance(x, numbers.Number) and x != x
