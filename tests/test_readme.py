"""README's examples as doctests: every ``>>>`` example of README.md runs from the repository root against
the bundled sample, so the figures README quotes are what the kit computes (issue 46 item 7: README's
``allreduce_cost`` example left out ``allreduces_per_layer`` and gave 104 calls and 21% where the report
gives 52 calls and 10%)."""
from __future__ import annotations

import doctest

from tests.conftest import ROOT


def test_readme_examples_run_as_doctests(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("KIT_RUNS", "off")
    text = (ROOT / "README.md").read_text()
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "README.md", str(ROOT / "README.md"), 0)
    assert len(test.examples) >= 8, "README has lost its doctests"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} README examples failed (output above)"
