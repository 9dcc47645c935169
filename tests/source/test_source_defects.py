"""Defects found in use (issue 16), each pinned by a test that failed before its fix."""
from __future__ import annotations

import sys

import pytest

import kit
from kit import source
from kit.errors import SourceError


@pytest.fixture
def local():
    with kit.connect("local") as h:
        yield h


def test_definition_is_the_implementation_not_the_first_overload(local, tmp_path):
    f = tmp_path / "api.py"
    f.write_text("from typing import overload\nimport typing\n\n"
                 "@overload\ndef pick(x: int) -> int: ...\n\n"
                 "@typing.overload\ndef pick(x: str) -> str: ...\n\n"
                 "def pick(x):\n    return x\n\n"
                 "use = pick(1)\n")
    d = source.definition(local, "pick", near=str(f))
    assert d.line == 10 and "return x" in "".join(d.slice.lines)


def test_grep_context_shows_in_text_and_html(local, tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\nb = 2\nTARGET = 3\nc = 4\nd = 5\n")
    hits = source.grep(local, str(f), "TARGET", context=1)
    assert hits[0].before == ("b = 2",) and hits[0].after == ("c = 4",)
    text = repr(hits)
    assert f"{f}-2- b = 2" in text and f"{f}:3: TARGET = 3" in text and f"{f}-4- c = 4" in text
    page = hits._repr_html_()
    assert "b" in page and ">2<" in page and ">4<" in page and "<b>3</b>" in page


def test_grep_table_has_no_error_boxes_around_double_backticks(local, tmp_path):
    f = tmp_path / "d.py"
    f.write_text('def f():\n    """Use ``flashinfer`` here\n    and ``triton`` there."""\n')
    page = source.grep(local, str(f), "triton")._repr_html_()
    assert "border" not in page.split("<table", 1)[1] or "#FF0000" not in page.upper()
    assert "#F00" not in page.upper() and "FF0000" not in page.upper()


def test_module_path_on_local_uses_the_running_interpreter(local, tmp_path, monkeypatch):
    """A python3 on PATH that is not this interpreter (here: one that cannot import json) is not asked."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'not the kernel python' >&2\nexit 3\n")
    (fake / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    assert source.module_path(local, "json") == sys.modules["json"].__file__


def test_definition_in_a_lone_file_follows_a_sibling_import(local, tmp_path):
    (tmp_path / "helpers.py").write_text("def is_ready():\n    return True\n")
    script = tmp_path / "script.py"
    script.write_text("from helpers import is_ready\n\nprint(is_ready())\n")
    d = source.definition(local, "is_ready", near=str(script))
    assert d.path == str(tmp_path / "helpers.py") and d.line == 1
    lone = tmp_path / "lone.py"
    lone.write_text("from nowhere_to_be_found import is_ready\n")
    with pytest.raises(SourceError, match=r"'is_ready' is imported there \(from nowhere_to_be_found import"):
        source.definition(local, "is_ready", near=str(lone))


def test_cli_grep_takes_path_then_pattern_like_the_api(tmp_path, capsys):
    from kit.cli import main

    f = tmp_path / "m.py"
    f.write_text("NEEDLE = 1\n")
    assert main(["source", "grep", str(f), "NEEDLE"]) == 0
    assert f"{f}:1:NEEDLE = 1" in capsys.readouterr().out



@pytest.mark.parametrize("tool", ["grep", "rg"])
def test_grep_paths_with_newlines_come_back_whole(local, tmp_path, tool):
    """Issue 24: a file named ``x\\n.py`` made grep return the path ``.py``. Records are cut at the
    NUL after each path, never at newlines, for matches and context lines of both tools."""
    if tool == "rg" and not local.run("command -v rg", timeout=10).ok:
        pytest.skip("ripgrep is not installed here; the grep path is tested")
    odd = tmp_path / "x\n.py"
    odd.write_text("a = 1\nNEEDLE = 2\nb = 3\n")
    twin = tmp_path / "--\n.py"  # grep's group separator, then a newline, inside a name
    twin.write_text("NEEDLE = 4\n")
    plain = tmp_path / "plain.py"
    plain.write_text("x = 0\nNEEDLE = 5\n")
    for context in (0, 1):
        hits = source.grep(local, str(tmp_path), "NEEDLE", context=context, tool=tool)
        got = sorted((m.path, m.line, m.text) for m in hits)
        assert got == sorted([(str(odd), 2, "NEEDLE = 2"), (str(twin), 1, "NEEDLE = 4"),
                              (str(plain), 2, "NEEDLE = 5")]), got
        if context:
            byp = {m.path: m for m in hits}
            assert byp[str(odd)].before == ("a = 1",) and byp[str(odd)].after == ("b = 3",)
            assert byp[str(plain)].before == ("x = 0",)
