"""Plots of parsed logs and of the speculative model: real figures drawn from the sample logs."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest

import kit.logs as L
from kit.plots import _logs as P
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "logs"


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_acceptance_over_time_marks_idle_windows():
    d = L.read(DATA / "sglang_0.5.9_eagle.log")
    fig = P.acceptance_over_time(d)
    ax1, ax2 = fig.axes
    window, idle = ax1.lines[0], ax1.lines[1]
    y = list(window.get_ydata())
    # the line is broken (NaN) at the after-idle window instead of running across the idle gap
    assert math.isnan(y[0]) and y[1:] == [1.68, 1.00, 2.00] and list(idle.get_ydata()) == [1.68]
    assert list(window.get_xdata())[1:] == [1.0, 2.0, 3.0]
    assert list(idle.get_xdata()) == [list(window.get_xdata())[0]]
    assert "sglang unknown, k=3" in fig._suptitle.get_text()
    assert ax2.lines[0].get_ydata()[3] == pytest.approx(1 / 3)


def test_acceptance_per_position_two_runs():
    runs = {"0.10": L.read(DATA / "vllm_0.10.1.1_ansi.log"), "0.34": L.read(DATA / "vllm_0.34_current.log")}
    fig = P.acceptance_per_position(runs)
    ax = fig.axes[0]
    heights = [round(p.get_height(), 4) for p in ax.patches]
    assert heights[:2] == [round(0.8 * 2 / 3 + 0.6 / 3, 4), round(0.4 * 2 / 3 + 0.2 / 3, 4)]
    assert len(heights) == 5  # 2 positions + 3 positions
    empty = P.acceptance_per_position(L.read(DATA / "sglang_0.5.9_eagle.log"))
    assert "no per-position" in empty.axes[0].texts[0].get_text()


def test_throughput_over_time_both_engines():
    fig = P.throughput_over_time(L.read(DATA / "vllm_0.10.1.1_ansi.log"))
    ax = fig.axes[0]
    assert list(ax.lines[0].get_ydata()) == [90.0, 100.0] and list(ax.lines[1].get_ydata()) == [0.3]
    fig2 = P.throughput_over_time(L.read(DATA / "sglang_0.4.10_decode.log"))
    assert list(fig2.axes[0].lines[0].get_ydata()) == [150.25, 149.75]


def test_speedup_curves_with_runs(tmp_path):
    runs = {"sglang": L.read(DATA / "sglang_0.5.9_eagle.log"), "vllm": L.read(DATA / "vllm_0.34_current.log")}
    fig = P.speedup_curves(0.15, runs=runs)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert labels[:7] == ["k=1 (break-even 15%)", "k=2 (break-even 24%)", "k=3 (break-even 32%)",
                          "k=4 (break-even 38%)", "k=5 (break-even 43%)", "k=6 (break-even 48%)",
                          "k=7 (break-even 51%)"]
    stars = [line for line in ax.lines if line.get_marker() == "*"]
    assert len(stars) == 2
    assert stars[1].get_ydata()[0] == pytest.approx((1 + 99 / 54) / 1.45)
    # each star sits on the curve of its k: x is the i.i.d. acceptance giving the measured length
    from kit import models

    for star, run in zip(stars, runs.values()):
        summ = L.spec_summary(run)
        a = star.get_xdata()[0]
        assert models.expected_tokens(a, summ.k) == pytest.approx(summ.mean_acceptance_length, rel=1e-6)
        assert star.get_ydata()[0] == pytest.approx(models.speedup(a, summ.k, 0.15), rel=1e-6)
    assert "c=0.15 (assumed)" in ax.get_title()
    fig.savefig(tmp_path / "speedup.png")
    assert (tmp_path / "speedup.png").stat().st_size > 10_000
