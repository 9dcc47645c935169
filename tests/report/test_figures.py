"""Every kit figure, drawn from the sample session with a provenance caption as long as the notebooks'
own, fits a report page's output column and keeps its smallest text readable there; a figure made by
the kit is handed back closed, so a notebook draws it once."""
from __future__ import annotations

import io
import struct

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import kit.plots  # noqa: E402
import kit.profile  # noqa: E402
from kit import env, logs  # noqa: E402
from kit.report._export import PAGE_WIDTH_PX  # noqa: E402
from tests.conftest import SAMPLE  # noqa: E402

CAPTION = ("Source: sample written to the SGLang 0.5.9 log format (not measured); measured on NVIDIA H200 "
           "(a cloud GPU machine; torch 2.11.0+cu130, CUDA 13.0, cuDNN 9.19, driver 580.159.04) with "
           "torch.profiler, 2026-12-03 (traces/tp1_eager/rank0.trace.json.gz and 3 more files)")
DPI = 100  # the inline backend's resolution in the report kernels


def _png_width(fig) -> int:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")  # what the inline backend does
    return struct.unpack(">II", buf.getvalue()[16:24])[0]


def _smallest_font(fig) -> float:
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]
    return min(sizes)


@pytest.fixture(scope="module")
def figures():
    prof = kit.profile.load(sorted((SAMPLE / "traces" / "tp1_eager").glob("rank*.trace.json.gz")))
    decode = prof.summary("decode")
    spec = logs.read(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log", version="0.5.9")
    topo = env.parse_topology((SAMPLE / "server" / "nvidia-smi-topo.txt").read_text())
    table = pd.DataFrame({"config": ["vLLM TP8 default", "SGLang TP8 default", "SGLang TP8 NCCL LL"],
                          "tok_s": [71.9, 63.6, 71.4]})
    title = "A figure of the sample session\n" + CAPTION
    return {
        "category_shares": kit.plots.category_shares({"eager": decode, "again": decode}, title=title),
        "step_timeline": kit.plots.step_timeline(prof.summary("all"), title=title),
        "top_kernels": kit.plots.top_kernels(decode, title=title),
        "acceptance_over_time": kit.plots.acceptance_over_time(spec, title=title),
        "acceptance_per_position": kit.plots.acceptance_per_position({"eagle3": spec.spec_summary()}, title=title),
        "throughput_over_time": kit.plots.throughput_over_time(spec, title=title),
        "speedup_curves": kit.plots.speedup_curves(0.15, title=title),
        "link_matrix_plot": kit.plots.link_matrix_plot(topo, title=title),
        "ab_plot": kit.plots.ab_plot(table, baseline="vLLM TP8 default", title=title),
    }


def test_figures_fit_the_page_and_their_text_stays_readable(figures):
    for name, fig in figures.items():
        width = _png_width(fig)
        assert width <= PAGE_WIDTH_PX, f"{name}: {width} px wide, wider than the page's {PAGE_WIDTH_PX} px column"
        smallest = _smallest_font(fig)
        assert smallest >= kit.plots.MIN_FONT_PT, f"{name}: text of {smallest} pt"
        shown_px = smallest * DPI / 72 * min(1.0, PAGE_WIDTH_PX / width)
        assert shown_px >= 9.0, f"{name}: its smallest text is {shown_px:.1f} px on the page"


def test_a_long_caption_is_wrapped_to_the_figure_not_the_figure_to_the_caption(figures):
    fig = figures["category_shares"]
    title = fig.axes[0].get_title()
    assert len(max(title.splitlines(), key=len)) < len(CAPTION) and "cloud GPU" in title.replace("\n", " ")
    # the bars keep most of the image: the axes span at least half the saved width
    fig.canvas.draw()
    assert fig.axes[0].get_window_extent().width >= 0.5 * _png_width(fig) * fig.dpi / DPI


def test_kit_figures_are_handed_back_closed(figures):
    """A figure still open in pyplot is drawn a second time when the inline backend flushes (the link
    matrix was: ``ax`` was tested after it had been reassigned)."""
    from matplotlib._pylab_helpers import Gcf

    open_figs = {id(m.canvas.figure) for m in Gcf.get_all_fig_managers()}
    for name, fig in figures.items():
        assert id(fig) not in open_figs, f"{name} was left open in pyplot"
    # a caller's own axes are drawn on, not closed
    fig, ax = plt.subplots()
    topo = env.parse_topology((SAMPLE / "server" / "nvidia-smi-topo.txt").read_text())
    assert kit.plots.link_matrix_plot(topo, ax=ax) is fig and plt.fignum_exists(fig.number)
    plt.close(fig)
