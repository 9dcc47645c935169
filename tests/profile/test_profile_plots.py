"""kit.plots profile figures render from real summaries (Agg backend) with the bars they should have."""
from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from kit import plots, profile
from tests.conftest import SAMPLE

pytestmark = pytest.mark.usefixtures("kit_cache_dir")  # tests/conftest.py: a fresh cache per test


def _summary(scenario):
    return profile.load(sorted((SAMPLE / "traces" / scenario).glob("rank*.trace.json.gz"))).summary("decode")


@pytest.mark.gpu_fixture
def test_category_shares_across_configurations_and_ranks(tmp_path):
    e, g = _summary("tp1_eager"), _summary("tp1_graph")
    fig = plots.category_shares({"eager": e, "graph": g})
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["eager", "graph"]
    # one stacked segment per category with time (idle included) per configuration
    n_cats = len(set(e.categories["category"]) | set(g.categories["category"]))
    assert len(ax.patches) == 2 * n_cats
    tops = {}
    for patch in ax.patches:
        x = round(patch.get_x(), 3)
        tops[x] = max(tops.get(x, 0), patch.get_y() + patch.get_height())
    # each bar stacks to (kernel + idle) / wall: 100% but for the few us where kernels overlap on
    # two streams (the eager trace's copies)
    expected = [100.0 * s.categories["time_us"].sum() / s.wall_time_us for s in (e, g)]
    assert [tops[x] for x in sorted(tops)] == pytest.approx(expected, rel=1e-9)
    assert all(t == pytest.approx(100.0, abs=0.1) for t in tops.values())
    fig.savefig(tmp_path / "shares.png")
    assert len(plots.category_shares(g, of="kernel").axes[0].get_xticklabels()) == 1


@pytest.mark.shared_data
def test_category_shares_one_bar_per_rank(shared_data):
    s = profile.load(sorted((shared_data / "traces/param/dlrm_kineto").glob("*.json.gz"))).summary()
    ax = plots.category_shares(s).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"rank {r}" for r in range(8)]
    # shares of each rank's own wall time; compute and communication overlap on these ranks, so
    # a bar stacks past 100% by exactly the overlapped time
    tops = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0), patch.get_y() + patch.get_height())
    pr = s.per_rank.set_index("rank")
    expected = 100.0 * (pr["kernel_us"] + pr["idle_us"]) / pr["wall_us"]
    assert [tops[r] for r in range(8)] == pytest.approx(list(expected), rel=1e-9)
    assert max(tops.values()) > 100.0


@pytest.mark.gpu_fixture
def test_step_timeline_and_top_kernels():
    g = _summary("tp1_graph")
    fig = plots.step_timeline(g)
    ax = fig.axes[0]
    assert len(ax.get_xticks()) == 16
    line = ax.get_lines()[0]
    assert list(line.get_ydata()) == pytest.approx(list(g.per_step["wall_us"]))
    fig2 = plots.top_kernels(g, n=2)
    assert 0 < len(fig2.axes[0].patches) <= 2 * (len(g.categories) - 1)
    with pytest.raises(ValueError):
        plots.category_shares(g, of="cpu")
