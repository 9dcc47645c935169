"""Numbers as the kit prints them: no ``-0.0`` for a difference that rounds to zero, percentage ticks
without trailing zeros (``55.5%``, not ``55.50%``)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import kit  # noqa: E402
from kit.util import percent_text, signed  # noqa: E402


def test_a_difference_that_rounds_to_zero_has_no_sign():
    assert [signed(x) for x in (-0.04, 0.04, -0.0, -1234.56, 12.0)] == ["0.0", "0.0", "0.0", "-1,234.6", "+12.0"]


def test_percent_ticks_have_no_trailing_zeros():
    assert [percent_text(x) for x in (0.555, 0.5, 0.5525, -0.0, 1.0)] == ["55.5%", "50%", "55.25%", "0%", "100%"]


def test_the_speedup_figure_ticks():
    fig = kit.plots.speedup_curves(0.1, ks=[1, 3])
    fig.canvas.draw()
    labels = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if "%" in t.get_text()]
    assert labels and not [t for t in labels if t.endswith("0%") and "." in t]
