"""Every kit figure is handed back closed in pyplot: a notebook draws it once, as the cell's value or
through ``display()``, and a trailing ``;`` hides every one of them alike (the comparison figures and
the explorer's were left open and drew themselves at the end of the cell whatever the ``;``)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import kit  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

TRACES = ROOT / "notebooks" / "sample" / "traces"


def _left_open(make) -> list[int]:
    before = set(plt.get_fignums())
    fig = make()
    assert isinstance(fig, matplotlib.figure.Figure)
    return sorted(set(plt.get_fignums()) - before)


def test_comparison_and_explorer_figures_are_closed():
    a = kit.profile.load(sorted((TRACES / "cmp_gemm_a").glob("rank*.json.gz")))
    b = kit.profile.load(sorted((TRACES / "cmp_gemm_b").glob("rank*.json.gz")))
    cmp = kit.profile.compare(a, b)
    assert _left_open(lambda: kit.plots.compare_waterfall(cmp)) == []
    assert _left_open(lambda: kit.plots.compare_families(cmp)) == []
    assert _left_open(lambda: kit.explorer.category_plot(a)) == []
    assert _left_open(lambda: kit.plots.category_shares({"A": a.summary()})) == []


def test_long_bar_labels_do_not_overlap():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    s = kit.profile.load(sorted((TRACES / "tp1_eager").glob("rank*.json.gz"))).summary()
    names = ["sglang_tp8_default_flashinfer_cuda_graph", "vllm_tp8_mtp_speculative_decoding_3", "short",
             "sglang-0.5.9 --attention-backend triton --disable-cuda-graph"]
    fig = kit.plots.category_shares({n: s for n in names})
    FigureCanvasAgg(fig)
    ax = fig.axes[0]
    boxes = [t.get_window_extent(fig.canvas.get_renderer()) for t in ax.get_xticklabels()]
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:]))
