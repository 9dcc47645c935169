"""Defects found in use (issue 16), each pinned by a test that failed before its fix."""
from __future__ import annotations

import pytest


def test_report_runs_the_projects_notebooks_not_those_beside_the_session(tmp_path, capsys):
    from kit.cli import main
    from kit.report._build import _resolve_notebooks
    from tests.conftest import ROOT

    (tmp_path / "stray.ipynb").write_text("{}")
    session = tmp_path / "my-session"
    session.mkdir()
    found = _resolve_notebooks(None, session)
    assert found and all(p.parent == ROOT / "notebooks" for p in found)
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "ledger_path" not in capsys.readouterr().out


def test_a_figure_returned_as_the_cells_value_is_drawn_once(tmp_path):
    import nbformat

    from kit import report

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('session = "sample"\nhost = "local"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("%matplotlib inline\nimport pandas as pd\nimport kit.plots\n"
                                          "t = pd.DataFrame({'config': ['a', 'b'], 'tok_s': [60.0, 70.0]})\n"
                                          "kit.plots.ab_plot(t, baseline='a')"),
                nbformat.v4.new_code_cell("from IPython.display import display\n"
                                          "for b in ('a', 'b'):\n    display(kit.plots.ab_plot(t, baseline=b))")]
    path = tmp_path / "figs.ipynb"
    nbformat.write(nb, path)
    out, run = report.execute_notebook(path, cwd=tmp_path, parameters={})
    assert run.ok, run.error
    images = [sum("image/png" in o.get("data", {}) for o in c.outputs) for c in out.cells if c.cell_type == "code"]
    assert images[-2:] == [1, 2]  # before the fix: 2 and 4


def test_a_report_notebook_records_nothing_into_the_users_catalogue(tmp_path, monkeypatch):
    """Building the report recorded 36 runs into the user's catalogue (KIT_RUNS on, the user's KIT_RUNS_DIR)
    although notebook 06 says it never does: the report's kernels run with KIT_RUNS=off."""
    import nbformat

    from kit import report
    from tests.conftest import SAMPLE

    store = tmp_path / "users-store"
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(store))
    trace = SAMPLE / "traces" / "tp1_graph" / "rank0.trace.json.gz"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('session = "sample"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(f"import os, kit\nkit.profile.load({str(trace)!r}).summary()\n"
                                          "print(os.environ['KIT_RUNS'])")]
    path = tmp_path / "records.ipynb"
    nbformat.write(nb, path)
    out, run = report.execute_notebook(path, cwd=tmp_path, parameters={})
    assert run.ok, run.error
    assert "off" in out.cells[-1].outputs[0]["text"]
    assert not store.exists() or not any(store.rglob("*.parquet")), sorted(store.rglob("*"))


@pytest.mark.parametrize("page", ["00_environment", "02_backend_defaults"])
def test_pages_00_and_02_show_their_tables_through_kit_report_table(tmp_path, page):
    """Pages 00 and 02 showed tables with pandas' own HTML (every cell right-aligned: text columns squeezed
    letter by letter); every table there goes through kit.report.table (text left-aligned, fits the page)."""
    from kit import report
    from tests.conftest import ROOT

    nb, run = report.execute_notebook(ROOT / "notebooks" / f"{page}.ipynb", cwd=ROOT / "notebooks",
                                      parameters={}, env={"KIT_RUNS": "off"})
    assert run.ok, run.error
    raw = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs
           if 'class="dataframe' in o.get("data", {}).get("text/html", "")]
    assert not raw, f"cells {raw} show a DataFrame through pandas' own HTML"
