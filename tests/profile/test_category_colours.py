"""A category's colour is one ``[[category]]`` entry of ``categories.toml`` (``kit.plots`` draws with
it): every category a packaged rule names has one, and the figures use it."""
from __future__ import annotations

import re

import kit


def test_every_packaged_category_has_its_colour_entry():
    colours = kit.profile.category_colours()
    named = {r.category for r in kit.profile.default_rules()} | {"other"}
    assert sorted(named - set(colours)) == []
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours.values())
    assert len(set(colours.values())) == len(colours)          # two categories never share a colour


def test_the_plots_draw_with_the_toml_colours():
    for name, colour in kit.profile.category_colours().items():
        assert kit.plots.CATEGORY_COLORS[name] == colour
