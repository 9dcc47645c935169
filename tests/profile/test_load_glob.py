"""``kit.profile.load("rel/rank*.json.gz")`` without ``host=`` expands the pattern here (it said
"no such file" before); a pattern that matches nothing says so."""
from __future__ import annotations

import pytest

import kit
from tests.conftest import ROOT


def test_a_local_glob_is_expanded(monkeypatch):
    monkeypatch.chdir(ROOT)
    p = kit.profile.load("notebooks/sample/traces/tp1_eager/rank*.trace.json.gz")
    assert p.files == ["notebooks/sample/traces/tp1_eager/rank0.trace.json.gz"]


def test_a_glob_matching_nothing_says_so(tmp_path):
    with pytest.raises(kit.errors.TraceError, match="no file matches this pattern"):
        kit.profile.load(str(tmp_path / "rank*.json.gz"))
