"""Issue 45 item 14: layers by repetition on a step that holds several forward passes, and the search's
size bound (kernel-name codes as the finder sees them, built from a layer's real shape: norm, QKV,
rope, attention, O, residual, norm, gate/up, activation, down, residual, plus embedding and LM head)."""
from __future__ import annotations

import time

import numpy as np

from kit.profile.attribution._layers import MAX_PERIOD, layers_of

LAYER = list(range(10, 22))                 # one decoder layer's 12 kernels
FORWARD = [1, *LAYER * 4, 2, 3, 4]          # embedding, 4 layers, final norm + LM head + sampling


def test_a_step_of_eight_forwards_of_a_four_layer_model_is_not_eight_layers_high():
    g = layers_of(np.array(FORWARD * 8))
    assert not (g.layers == 8 and g.confidence == "high")
    assert g.layers == 4 and g.confidence == "low" and "8 forward passes" in g.how
    one = layers_of(np.array(FORWARD))
    assert one.layers == 4 and "forward passes" not in one.how


def test_the_repetition_search_is_bounded_on_a_huge_step():
    """116,400 kernels in one step (300 forwards of 32 layers): the search answers in a few seconds at
    most (it took 15.7 s unbounded on the 2-core machine, and grew with the square of the step), its
    period within the bound."""
    big = np.array(([1, *LAYER * 32, 2, 3, 4]) * 300)
    t0 = time.monotonic()
    g = layers_of(big)
    assert time.monotonic() - t0 < 5.0
    assert g.period <= MAX_PERIOD and g.layers > 0
