"""The kit's plots: matplotlib figures sized and labelled to read well in an exported HTML report.

Profile plots (from :class:`kit.profile.Summary`):

- :func:`category_shares` — stacked bars of kernel-category shares, one bar per rank of one summary
  or per configuration (a dict of labelled summaries), GPU idle as its own segment.
- :func:`step_timeline` — per-step stacked category time with the step's wall time as a line.
- :func:`top_kernels` — the top kernels of each category, horizontal bars.
- :func:`module_time` — the module view: kernel time per module class and per layer index.

Log and speculative-decoding plots (from :mod:`kit.logs` / :mod:`kit.models`):

- :func:`acceptance_over_time`, :func:`acceptance_per_position`, :func:`throughput_over_time`,
  :func:`speedup_curves` (defined in ``kit.plots._logs``).

Run comparison plots (from :class:`kit.profile.Comparison`, defined in ``kit.plots._compare``):

- :func:`compare_waterfall` — from run A's step time to run B's, one bar per part of the difference.
- :func:`compare_families` — the top kernel families of both runs side by side.
- :func:`structure_waterfall` — two runs (two engines) node by node: layer kind x operation family
  (from :func:`kit.profile.diff_structure`, defined in ``kit.plots._structure``).

Load plots (from :class:`kit.bench.LoadResult`, defined in ``kit.plots._load``):

- :func:`latency_cdf` — the CDF of TTFT, ITL, TPOT or E2E per load level, p50/p90/p99 marked.
- :func:`throughput_latency` — throughput (or goodput) against a latency percentile over a sweep.
- :func:`concurrency_scaling` — a single-stream run's decode and output tok/s against concurrency.

Latency reconciliation (from :class:`kit.bench.Reconciliation`, defined in ``kit.plots._reconcile``):

- :func:`itl_waterfall` — the client's inter-token gap split into HTTP, output path, scheduler and GPU parts.

Environment and comparison plots:

- :func:`link_matrix_plot` — the ``nvidia-smi topo -m`` GPU link matrix as a coloured grid.
- :func:`ab_plot` — single-stream tok/s of compared configurations against a baseline.

Sizes: no figure is wider than :data:`MAX_WIDTH_IN` inches (it fits a report page's output column at
the inline backend's 100 dpi) and no text is smaller than :data:`MIN_FONT_PT` points;
:func:`fit_text` wraps titles and axis labels (long provenance captions) to the figure's width.

Profile and log figures are returned already closed in pyplot (nothing is shown or saved here): a
notebook draws it once, as the cell's value or through ``display(fig)`` inside a loop, never a second
time when the inline backend flushes. Colours are fixed per category so figures side by side compare.
The run comparison figures are returned open (the inline backend draws them when the cell ends).
Notebooks put the provenance of what a figure was drawn from in its title (``kit.session.caption``).

Files:

- ``_profile.py``: profile figures: category shares, step timeline, top kernels, module view; link matrix, A/B
- ``_logs.py``: log figures: acceptance and throughput over time, speed-up curves
- ``_compare.py``: run comparison figures: waterfall, kernel families side by side
- ``_structure.py``: the structural waterfall of two runs
- ``_load.py``: load figures: latency CDF, throughput against latency
- ``_reconcile.py``: the inter-token latency waterfall
"""
from __future__ import annotations

from kit.plots._compare import compare_families, compare_waterfall
from kit.plots._load import concurrency_scaling, latency_cdf, throughput_latency
from kit.plots._logs import acceptance_over_time, acceptance_per_position, speedup_curves, throughput_over_time
from kit.plots._profile import (
                               CATEGORY_COLORS,
                               MAX_WIDTH_IN,
                               MIN_FONT_PT,
                               ab_plot,
                               category_shares,
                               fit_text,
                               link_matrix_plot,
                               module_time,
                               step_timeline,
                               top_kernels,
)
from kit.plots._reconcile import itl_waterfall
from kit.plots._structure import structure_waterfall
from kit.util import publish

__all__ = [
    'CATEGORY_COLORS', 'MAX_WIDTH_IN', 'MIN_FONT_PT', 'ab_plot', 'fit_text', 'compare_families',
    'compare_waterfall', 'concurrency_scaling', 'latency_cdf', 'throughput_latency', 'acceptance_over_time',
    'acceptance_per_position',
    'category_shares', 'link_matrix_plot', 'module_time', 'speedup_curves', 'step_timeline', 'throughput_over_time',
    'top_kernels', 'itl_waterfall', 'structure_waterfall'
]

publish(globals(), __all__)
