"""The kit's plots: matplotlib figures sized and labelled to read well in an exported HTML report.

Sizes: no figure is wider than :data:`MAX_WIDTH_IN` inches (it fits a report page's output column at
the inline backend's 100 dpi) and no text is smaller than :data:`MIN_FONT_PT` points;
:func:`fit_text` wraps titles and axis labels (long provenance captions) to the figure's width.
Every figure is returned closed in pyplot (nothing is shown or saved here): a notebook draws it once,
as the cell's value or through ``display(fig)`` inside a loop. Colours are fixed per category so figures
side by side compare. Notebooks put the provenance of what a figure was drawn from in its title
(``kit.session.caption``).
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

__all__ = ['CATEGORY_COLORS', 'MAX_WIDTH_IN', 'MIN_FONT_PT', 'ab_plot', 'fit_text', 'compare_families',
           'compare_waterfall', 'concurrency_scaling', 'latency_cdf', 'throughput_latency', 'acceptance_over_time',
           'acceptance_per_position', 'category_shares', 'link_matrix_plot', 'module_time', 'speedup_curves',
           'step_timeline', 'throughput_over_time', 'top_kernels', 'itl_waterfall', 'structure_waterfall']

publish(globals(), __all__)
