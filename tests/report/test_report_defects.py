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
