"""Argument misuse is :class:`kit.errors.UsageError` (a ValueError too), one line naming what was given
and what is taken: never a bare ValueError/TypeError from deep inside."""
from __future__ import annotations

import pytest

import kit
from kit.errors import UsageError


@pytest.mark.parametrize("call, says", [
    (lambda: kit.connect("local", port=22), "takes no options"),
    (lambda: kit.provenance.Provenance("guessed"), "is not one of"),
    (lambda: kit.plots.category_shares({}, of="bogus"), "'bogus'"),
    (lambda: kit.plots.latency_cdf(kit.bench.LoadResult.__new__(kit.bench.LoadResult), metric="speed"), "speed"),
    (lambda: kit.source.grep(kit.connect("local"), ".", "x", context=-1), "context must be >= 0"),
])
def test_argument_misuse_is_a_usage_error(call, says):
    with pytest.raises(UsageError, match=says):
        call()


def test_spec_estimate_k_0_names_itself_not_break_even():
    with pytest.raises(UsageError, match="^spec_estimate: k") as e:
        kit.models.spec_estimate(0.5, k=0, c=0.1)
    assert "break_even" not in str(e.value)


@pytest.mark.parametrize("tool", ["auto", "grep"])
def test_a_bad_regex_says_what_is_wrong_and_how_to_search_a_literal(tool):
    with pytest.raises(kit.errors.SourceError) as e:
        kit.source.grep(kit.connect("local"), "kit/util/_text.py", "(", tool=tool)
    msg = str(e.value)
    assert not msg.rstrip().endswith(":") and ("unclosed group" in msg or "Unmatched" in msg)
    assert "regex=False" in msg and "\n" not in msg
