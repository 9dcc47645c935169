"""kit.source over a LocalHost and over a real OpenSSH sshd: the tinyserve fixture engine, the
project's own source, hostile file names, error messages and the transfer cache."""
from __future__ import annotations

import ast
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

import kit
from kit import source
from kit.errors import RemoteFileError, SourceError
from tests.conftest import ROOT, stage_readable

# What the tests read, over SSH too: a readable copy (the checkout may be unreadable to the sshd user).
STAGED = stage_readable("notebooks/sample/engine", "kit/__init__.py", "kit/errors.py", "kit/source/__init__.py",
                        "kit/source/_api.py")
ENGINE = STAGED / "notebooks" / "sample" / "engine"
TINY = ENGINE / "tinyserve"
SERVER_ARGS = str(TINY / "srt" / "server_args.py")
COMMON = str(TINY / "srt" / "utils" / "common.py")
HYBRID = str(TINY / "srt" / "model_hooks" / "hybrid_mamba.py")
ERRORS_PY = str(STAGED / "kit" / "errors.py")
SOURCE_PY = str(STAGED / "kit" / "source" / "_api.py")
HOSTILE = "a b;$(touch PWNED)'\""


class CountingHost:
    """A real host with call counters on the three transport calls kit.source uses."""

    def __init__(self, host) -> None:
        self._host = host
        self.calls = {"stat": 0, "read_bytes": 0, "run": 0}

    def __getattr__(self, name):
        return getattr(self._host, name)

    def stat(self, path):
        self.calls["stat"] += 1
        return self._host.stat(path)

    def read_bytes(self, path):
        self.calls["read_bytes"] += 1
        return self._host.read_bytes(path)

    def run(self, cmd, **kw):
        self.calls["run"] += 1
        return self._host.run(cmd, **kw)


@pytest.fixture(scope="module")
def ssh_host(sshd):
    host = sshd.connect()
    yield host
    host.close()


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def host(request):
    if request.param == "local":
        with kit.connect("local") as h:
            yield h
    else:
        yield request.getfixturevalue("ssh_host")


@pytest.fixture
def workdir(request, host, tmp_path):
    """A scratch directory the host's login user can read (the sshd user is not root)."""
    if host.target == "local":
        yield tmp_path
        return
    sshd = request.getfixturevalue("sshd")
    d = Path(tempfile.mkdtemp(dir=sshd.tmp))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_cache():
    source.cache_clear()
    yield


def _line_of(path: str, needle: str) -> int:
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in {path}")


def _write(d: Path, name: str, text: str | bytes, mode: int = 0o644) -> str:
    p = d / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    p.chmod(mode)
    return str(p)


# --- slice ---------------------------------------------------------------------------------------
def test_slice_matches_sed_and_numbers_lines(host):
    n = _line_of(SERVER_ARGS, 'sm100_default_attention_backend="flashinfer"')
    sl = source.slice(host, SERVER_ARGS, n - 5, n + 5, highlight=n)
    sed = host.run(f"sed -n {n - 5},{n + 5}p {shlex.quote(SERVER_ARGS)}", timeout=30)
    assert sed.ok
    assert list(sl.lines) == sed.stdout.rstrip("\n").split("\n")
    assert (sl.start, sl.end, len(sl), sl.host) == (n - 5, n + 5, 11, host.name)
    text = str(sl).splitlines()
    assert text[5].startswith(f"{n}>") and 'sm100_default_attention_backend="flashinfer"' in text[5]
    assert text[0].startswith(f"{n - 5} ")
    assert repr(sl) == (f"Slice(host={host.name!r}, path={SERVER_ARGS!r}, start={n - 5}, end={n + 5}, lines=11)")


def test_slice_html_is_highlighted_with_real_line_numbers(host):
    n = _line_of(SERVER_ARGS, 'sm100_default_attention_backend="flashinfer"')
    page = source.slice(host, SERVER_ARGS, n - 2, n + 2, highlight=n)._repr_html_()
    assert f">{n}<" in page or f"{n} " in page
    assert "#fff2a8" in page                       # the highlighted match line
    assert "&quot;flashinfer&quot;" in page or "flashinfer" in page
    assert f"{host.name}:{SERVER_ARGS}:{n - 2}-{n + 2}" in page
    assert "<script" not in page


def test_slice_range_errors_and_clipping(host):
    total = len(Path(ERRORS_PY).read_text().splitlines())
    sl = source.slice(host, ERRORS_PY, total - 2, total + 50)
    assert sl.clipped and sl.end == total and len(sl) == 3
    assert f"the file has {total} lines" in sl.note and f"({sl.note})" in str(sl)
    with pytest.raises(SourceError, match=rf"{host.name}:.*errors\.py: start line {total + 1} is past the end"):
        source.slice(host, ERRORS_PY, total + 1, total + 5)
    with pytest.raises(SourceError, match="start at 1"):
        source.slice(host, ERRORS_PY, 0, 3)
    with pytest.raises(SourceError, match="end before start"):
        source.slice(host, ERRORS_PY, 10, 3)


# --- grep ----------------------------------------------------------------------------------------
def test_grep_one_round_trip_over_the_engine_tree(host):
    counting = CountingHost(host)
    matches = source.grep(counting, str(ENGINE), 'sm100_default_attention_backend="flashinfer"', context=2,
                          regex=False)
    assert counting.calls == {"stat": 0, "read_bytes": 0, "run": 1}
    assert [(m.path, m.line) for m in matches] == [(SERVER_ARGS, _line_of(SERVER_ARGS, 'backend="flashinfer"'))]
    m = matches[0]
    assert len(m.before) == 2 and len(m.after) == 2
    sl = source.slice(host, m.path, m.line - 2, m.line + 2)
    assert list(sl.lines) == [*m.before, m.text, *m.after]
    assert matches.tool in ("rg", "grep")
    assert list(matches.to_frame().columns) == ["path", "line", "text"]


def test_grep_regex_glob_and_no_match(host):
    regex = source.grep(host, str(TINY), r"def is_sm(90|100|120)_supported")
    assert sorted(m.text.split("(")[0] for m in regex) == [
        "def is_sm100_supported", "def is_sm120_supported", "def is_sm90_supported"]
    assert {m.path for m in regex} == {COMMON}
    assert len(source.grep(host, str(TINY), "is_sm100_supported", glob="*.md")) == 0
    none = source.grep(host, str(TINY), "no such text anywhere 0xdeadbeef")
    assert len(none) == 0 and none.note is None
    single = source.grep(host, ERRORS_PY, "class KitError", regex=False)
    assert [(m.path, m.line) for m in single] == [(ERRORS_PY, _line_of(ERRORS_PY, "class KitError"))]


def test_grep_rg_and_grep_agree(host):
    if not host.run("command -v rg", timeout=10).ok:
        pytest.skip(f"ripgrep is not installed on {host.name}; only the grep path can be exercised")
    by_rg = source.grep(host, str(TINY), "attention_backend", context=1, tool="rg")
    by_grep = source.grep(host, str(TINY), "attention_backend", context=1, tool="grep")
    assert by_rg.tool == "rg" and by_grep.tool == "grep"
    key = lambda ms: sorted((m.path, m.line, m.text, m.before, m.after) for m in ms)  # noqa: E731
    assert key(by_rg) == key(by_grep) and len(by_rg) > 20


def test_grep_missing_path_names_host_and_path(host, workdir):
    missing = str(workdir / "not-there")
    with pytest.raises(RemoteFileError) as err:
        source.grep(host, missing, "x")
    assert str(err.value) == f"{host.name}:{missing}: no such file or directory"


# --- enclosing / find / definition -----------------------------------------------------------------
def _ast_scope(path: str, qualname: str) -> tuple[int, int]:
    tree = ast.parse(Path(path).read_text())
    node = tree
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return start, node.end_lineno


def test_enclosing_gives_innermost_def_with_qualname(host):
    n = _line_of(SERVER_ARGS, 'sm100_default_attention_backend="flashinfer"')
    scope = source.enclosing(host, SERVER_ARGS, n)
    assert (scope.kind, scope.name, scope.qualname) == ("method", "_adjust_nemotron_h", "ServerArgs._adjust_nemotron_h")
    assert (scope.start, scope.end) == _ast_scope(SERVER_ARGS, "ServerArgs._adjust_nemotron_h")
    assert scope.slice.highlight == (n,) and scope.slice.start == scope.start and scope.slice.end == scope.end
    inner = _line_of(SERVER_ARGS, "self.attention_backend = sm100_default_attention_backend")
    scope = source.enclosing(host, SERVER_ARGS, inner)
    assert scope.qualname == "ServerArgs._handle_mamba_radix_cache"
    assert (scope.start, scope.end) == _ast_scope(SERVER_ARGS, "ServerArgs._handle_mamba_radix_cache")
    cls_line = _line_of(SERVER_ARGS, "    tp_size: int = 1")
    assert source.enclosing(host, SERVER_ARGS, cls_line).qualname == "ServerArgs"
    assert source.enclosing(host, SERVER_ARGS, 1) is None  # the module docstring
    with pytest.raises(SourceError, match="outside the file"):
        source.enclosing(host, SERVER_ARGS, 10**6)


def test_find_reports_every_kind_with_values_and_enclosing(host):
    found = source.find(host, SERVER_ARGS, "sm100_default_attention_backend")
    assert [(s.kind, s.value, s.enclosing) for s in found] == [
        ("keyword", '"triton"', "ServerArgs._handle_model_specific_adjustments"),
        ("keyword", '"flashinfer"', "ServerArgs._adjust_nemotron_h"),
        ("parameter", "None", "ServerArgs._handle_mamba_radix_cache"),
    ]
    assert [s.line for s in found][:2] == [_line_of(SERVER_ARGS, 'backend="triton",'),
                                           _line_of(SERVER_ARGS, 'backend="flashinfer",')]
    fields = [s for s in source.find(host, SERVER_ARGS, "attention_backend") if s.kind == "field"]
    assert [(s.line, s.value, s.enclosing) for s in fields] == [
        (_line_of(SERVER_ARGS, "attention_backend: Optional[str] = None"), "None", "ServerArgs")]
    attrs = [s for s in source.find(host, SERVER_ARGS, "attention_backend") if s.kind == "attribute"]
    assert {"ServerArgs._handle_mamba_radix_cache", "ServerArgs._handle_model_specific_adjustments"} <= \
        {s.enclosing for s in attrs}
    assert [s.kind for s in source.find(host, SERVER_ARGS, "ServerArgs") if s.kind == "class"] == ["class"]
    consts = source.find(host, SERVER_ARGS, "ATTENTION_BACKEND_CHOICES")
    assert consts[0].kind == "variable" and consts[0].enclosing is None and consts[0].value.startswith("[")
    funcs = source.find(host, COMMON, "is_sm100_supported")
    assert [(s.kind, s.line) for s in funcs] == [("function", _line_of(COMMON, "def is_sm100_supported"))]
    imports = source.find(host, SERVER_ARGS, "is_sm100_supported")
    assert imports[0].kind == "import" and imports[0].value is None


def test_find_json_records_have_the_documented_keys(host):
    records = json.loads(source.find(host, SERVER_ARGS, "sm100_default_attention_backend").to_json())
    assert records and all(list(r) == ["path", "line", "kind", "name", "value", "enclosing"] for r in records)


def test_definition_follows_reexport_to_common(host):
    d = source.definition(host, "is_sm100_supported", near=SERVER_ARGS)
    assert (d.path, d.kind, d.qualname) == (COMMON, "function", "is_sm100_supported")
    assert d.line == _line_of(COMMON, "def is_sm100_supported")
    assert len(d.via) == 2
    assert d.via[0].startswith(f"{SERVER_ARGS}:") and "from tinyserve.srt.utils import" in d.via[0]
    assert "utils/__init__.py" in d.via[1] and "from .common import" in d.via[1]
    assert any("cap[0] == 10" in line for line in d.slice.lines)
    assert d.slice.start == d.line and d.slice.end == _ast_scope(COMMON, "is_sm100_supported")[1]


def test_definition_relative_imports_members_and_modules(host):
    d = source.definition(host, "is_sm90_supported", near=HYBRID)  # from ..utils.common import ...
    assert (d.path, len(d.via)) == (COMMON, 1)
    d = source.definition(host, "ServerArgs", near=HYBRID)  # from ..server_args import ServerArgs (TYPE_CHECKING)
    assert (d.path, d.kind) == (SERVER_ARGS, "class")
    d = source.definition(host, "ServerArgs._handle_mamba_radix_cache", near=SERVER_ARGS)
    assert (d.kind, d.qualname) == ("method", "ServerArgs._handle_mamba_radix_cache")
    d = source.definition(host, "logging", near=SERVER_ARGS)  # stdlib, located through the host's python3
    assert d.kind == "module" and d.path.endswith("logging/__init__.py")
    with pytest.raises(SourceError, match="cannot find where 'no_such_name' is defined"):
        source.definition(host, "no_such_name", near=SERVER_ARGS)


def test_definition_of_a_module_that_is_an_empty_file(host, workdir):
    """``import pkg`` whose ``pkg/__init__.py`` is empty (the usual case) is still a module definition."""
    pkg = workdir / "emptypkg"
    pkg.mkdir()
    pkg.chmod(0o755)
    init = _write(pkg, "__init__.py", "")
    user = _write(pkg, "user.py", "import emptypkg\n")
    d = source.definition(host, "emptypkg", near=user)
    assert (d.path, d.kind, d.qualname) == (init, "module", "emptypkg")
    assert d.slice.lines == () and d.slice.note == "empty file" and "(empty file)" in str(d)
    assert "(no lines)" in d._repr_html_()


def test_project_source_kiterror(host):
    found = source.find(host, ERRORS_PY, "KitError")
    cls = [s for s in found if s.kind == "class"]
    assert [(s.line, s.enclosing) for s in cls] == [(_line_of(ERRORS_PY, "class KitError("), None)]
    d = source.definition(host, "SourceError", near=SOURCE_PY)  # from kit.errors import ... SourceError
    assert (d.path, d.kind, d.line) == (ERRORS_PY, "class", _line_of(ERRORS_PY, "class SourceError("))


def test_module_path_and_predicate_on_the_host(host):
    env = {"PYTHONPATH": str(ENGINE), "PYTHONDONTWRITEBYTECODE": "1"}  # leave no __pycache__ in the repo
    assert source.module_path(host, "tinyserve.srt.server_args", env=env) == SERVER_ARGS
    assert source.module_path(host, "tinyserve.srt.utils", env=env) == str(TINY / "srt" / "utils" / "__init__.py")
    code = "from tinyserve.srt.utils import is_sm100_supported, is_sm120_supported\n" \
           "[is_sm100_supported(), is_sm120_supported()]"
    # No GPU here: the capability comes from the environment variable (the last fallback).
    on_rtx_pro = host.python(code, env={**env, "TINYSERVE_DEVICE_CAPABILITY": "12.0"})
    on_b200 = host.python(code, env={**env, "TINYSERVE_DEVICE_CAPABILITY": "10.0"})
    if host.run("command -v nvidia-smi", timeout=10).ok:
        pytest.skip("a GPU host answers from nvidia-smi, not the environment variable")
    assert (on_rtx_pro, on_b200) == ([False, True], [True, False])
    with pytest.raises(SourceError, match="cannot locate module no_such_module_kit"):
        source.module_path(host, "no_such_module_kit")
    with pytest.raises(SourceError, match="not a dotted module name"):
        source.module_path(host, "os; touch PWNED")


def test_module_path_falls_back_to_pip_show(host, workdir):
    # A distribution whose package raises on import: find_spec("brokenpkg.sub") fails, pip's file list works.
    pkg = workdir / "brokenpkg"
    pkg.mkdir()
    pkg.chmod(0o755)
    _write(pkg, "__init__.py", "raise ImportError('this package cannot be imported')\n")
    sub = _write(pkg, "sub.py", "VALUE = 1\n")
    info = workdir / "brokenpkg-1.0.dist-info"
    info.mkdir()
    info.chmod(0o755)
    _write(info, "METADATA", "Metadata-Version: 2.1\nName: brokenpkg\nVersion: 1.0\n")
    _write(info, "RECORD", "brokenpkg/__init__.py,,\nbrokenpkg/sub.py,,\nbrokenpkg-1.0.dist-info/METADATA,,\n")
    env = {"PYTHONPATH": str(workdir)}
    assert source.module_path(host, "brokenpkg.sub", env=env) == sub
    with pytest.raises(SourceError, match="cannot locate module brokenpkg.nothere"):
        source.module_path(host, "brokenpkg.nothere", env=env)


# --- diff ------------------------------------------------------------------------------------------
def test_diff_between_versions_uses_file_line_numbers(host, workdir):
    text = Path(COMMON).read_text()
    new = text.replace("cap[0] == 10 and _cuda_at_least(12, 8)", "cap[0] in (10, 11) and _cuda_at_least(12, 9)")
    assert new != text
    a_path, b_path = _write(workdir, "common_a.py", text), _write(workdir, "common_b.py", new)
    a = source.enclosing(host, a_path, _line_of(COMMON, "def is_sm100_supported"))
    b = source.enclosing(host, b_path, _line_of(COMMON, "def is_sm100_supported"))
    d = source.diff(a, b)
    assert (d.added, d.removed, d.same) == (1, 1, False)
    changed = _line_of(COMMON, "cap[0] == 10 and")
    assert changed == a.end  # the last line of the function, so the hunk starts 3 lines above it
    assert f"@@ -{changed - 3},4 +{changed - 3},4 @@" in d.text.splitlines()
    assert "-    return cap is not None and cap[0] == 10 and _cuda_at_least(12, 8)" in d.text.splitlines()
    page = d._repr_html_()
    assert f">{changed}</td>" in page and "background:#fff5b1" in page
    assert source.diff(a, source.enclosing(host, a_path, a.start)).same


def test_diff_same_region_across_two_hosts(ssh_host):
    n = _line_of(SERVER_ARGS, "def _handle_mamba_radix_cache")
    with kit.connect("local") as local:
        d = source.diff(source.enclosing(local, SERVER_ARGS, n), source.enclosing(ssh_host, SERVER_ARGS, n))
    assert d.same and "identical" in str(d)
    assert "local:" in repr(d) and f"{ssh_host.name}:" in repr(d)


# --- errors ----------------------------------------------------------------------------------------
def _one_line(exc: BaseException, host, path: str) -> str:
    msg = str(exc)
    assert "\n" not in msg and host.name in msg and path in msg, msg
    return msg


def test_error_messages_name_host_and_path(host, workdir):
    missing = str(workdir / "missing.py")
    with pytest.raises(RemoteFileError) as err:
        source.slice(host, missing, 1, 2)
    _one_line(err.value, host, missing)
    with pytest.raises(RemoteFileError) as err:
        source.find(host, str(workdir), "x")
    assert "is a directory" in _one_line(err.value, host, str(workdir))
    binary = _write(workdir, "blob.py", b"\x7fELF\x00\x00\x01" * 50)
    with pytest.raises(SourceError) as err:
        source.slice(host, binary, 1, 2)
    assert "binary file" in _one_line(err.value, host, binary)
    latin = _write(workdir, "latin1.py", "x = 1\ny = 'caf\xe9'\n".encode("latin-1"))
    with pytest.raises(SourceError) as err:
        source.enclosing(host, latin, 1)
    assert "not UTF-8 text (byte 0xe9" in _one_line(err.value, host, latin) and "line 2" in str(err.value)


def test_permission_denied_names_host_and_path(host, workdir):
    secret = _write(workdir, "secret.py", "x = 1\n", mode=0o000)
    probe = host.run(f"cat {shlex.quote(secret)}", timeout=10)
    if probe.ok:
        pytest.skip(f"{host.name} logs in as root, which can read a mode-000 file")
    with pytest.raises(RemoteFileError) as err:
        source.slice(host, secret, 1, 1)
    assert "ermission denied" in _one_line(err.value, host, secret)
    with pytest.raises(RemoteFileError) as err:
        source.grep(host, secret, "x")
    assert str(err.value) == f"{host.name}:{secret}: permission denied"


def test_syntax_error_falls_back_to_text_search_and_says_so(host, workdir):
    broken = _write(workdir, "broken.py", (
        "class Args:\n"
        "    backend: str = 'triton'\n"
        "\n"
        "    def pick(self):\n"
        "        if self.backend is None\n"          # missing colon: SyntaxError at line 5
        "            self.backend = 'flashinfer'\n"
        "        return self.backend\n"))
    found = source.find(host, broken, "backend")
    assert "syntax error at line 5" in found.note and "text search" in found.note
    assert [(s.line, s.value) for s in found] == [(2, "'triton'"), (6, "'flashinfer'")]
    assert found[1].enclosing == "Args.pick"
    scope = source.enclosing(host, broken, 6)
    assert scope.qualname == "Args.pick" and (scope.start, scope.end) == (4, 7) and "syntax error" in scope.note
    with pytest.raises(SourceError, match="cannot follow imports"):
        source.definition(host, "backend", near=broken)


# --- hostile names -----------------------------------------------------------------------------------
def test_hostile_names_are_data_never_code(host, workdir):
    d = workdir / HOSTILE
    d.mkdir()
    d.chmod(0o755)
    path = _write(d, HOSTILE + ".py", "def handler():\n    mode = \"$(touch PWNED)';\"\n    return mode\n")
    sl = source.slice(host, path, 1, 3)
    assert sl.lines[1] == "    mode = \"$(touch PWNED)';\""
    assert source.enclosing(host, path, 2).qualname == "handler"
    assert source.find(host, path, "mode")[0].value == "\"$(touch PWNED)';\""
    matches = source.grep(host, str(workdir), "$(touch PWNED)';", regex=False)
    assert [(m.path, m.line) for m in matches] == [(path, 2)]
    matches = source.grep(host, path, "touch PWNED", context=1, glob=HOSTILE)
    assert [(m.path, m.line, m.before, m.after) for m in matches] == [
        (path, 2, ("def handler():",), ("    return mode",))]
    pkg = d / "pkg"
    pkg.mkdir()
    pkg.chmod(0o755)
    _write(pkg, "__init__.py", "")
    impl = _write(pkg, "impl.py", "def helper():\n    return 1\n")
    user = _write(pkg, "user.py", "from .impl import helper\nfrom pkg.impl import helper as h2\n")
    assert source.definition(host, "helper", near=user).path == impl    # relative import, quoted paths
    assert source.definition(host, "h2", near=user).path == impl        # absolute import in the same tree
    with pytest.raises(RemoteFileError):
        source.slice(host, str(d / "$(touch PWNED)"), 1, 1)
    with pytest.raises(RemoteFileError):
        source.grep(host, str(d / "x;touch PWNED"), "x")
    home = host.run("printf %s \"$HOME\"", timeout=10).stdout
    for place in (str(workdir), str(d), home):
        listing = host.run(f"ls -a {shlex.quote(place)}", timeout=10)
        assert listing.ok and "PWNED" not in listing.stdout.split("\n"), place
    assert "PWNED" not in os.listdir(os.getcwd())  # read here: the sshd user may not enter the checkout


# --- cache -------------------------------------------------------------------------------------------
def test_twenty_slices_cost_one_transfer_and_twenty_stats(host, workdir):
    path = _write(workdir, "big.py", Path(SERVER_ARGS).read_text())
    counting = CountingHost(host)
    for i in range(20):
        source.slice(counting, path, 1 + 10 * i, 20 + 10 * i)
    for _ in range(5):
        source.find(counting, path, "attention_backend")
    info = source.cache_info()
    assert counting.calls == {"stat": 25, "read_bytes": 1, "run": 0}
    assert (info.stats, info.transfers, info.hits, info.parses, info.parse_hits) == (25, 1, 24, 1, 4)
    assert info.bytes_transferred == Path(path).stat().st_size
    # A changed file (new size and mtime) is transferred again and its new lines seen.
    with open(path, "a") as fh:
        fh.write("NEW_LAST_LINE = 1\n")
    os.utime(path, (Path(path).stat().st_atime, Path(path).stat().st_mtime + 5))
    total = len(Path(path).read_text().splitlines())
    assert source.slice(counting, path, total, total).lines == ("NEW_LAST_LINE = 1",)
    assert counting.calls["read_bytes"] == 2 and source.cache_info().transfers == 2


# --- CLI ---------------------------------------------------------------------------------------------
def test_cli_slice_grep_find(capsys):
    from kit.cli import main

    n = _line_of(SERVER_ARGS, 'sm100_default_attention_backend="flashinfer"')
    assert main(["source", "slice", SERVER_ARGS, str(n), str(n + 1)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split(None, 1) == [str(n), 'sm100_default_attention_backend="flashinfer",']
    assert main(["source", "grep", "-C", "1", "-F", str(ENGINE), 'backend="flashinfer"']) == 0
    out = capsys.readouterr().out
    assert f"{SERVER_ARGS}:{n}:" in out and f"{SERVER_ARGS}-{n - 1}-" in out
    assert main(["source", "grep", str(ENGINE), "zzz_not_there_zzz"]) == 1
    capsys.readouterr()
    assert main(["source", "find", SERVER_ARGS, "sm100_default_attention_backend", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["value"] for r in records if r["kind"] == "keyword"] == ['"triton"', '"flashinfer"']
    assert all(set(r) == {"path", "line", "kind", "name", "value", "enclosing"} for r in records)
    assert main(["source", "slice", str(ROOT / "no_such_file.py"), "1", "2"]) == 1
    assert "no_such_file.py" in capsys.readouterr().err


def test_cli_on_an_ssh_host_with_explicit_key_and_known_hosts(sshd, capsys):
    from kit.cli import main

    opts = ["--host", sshd.target, "--identity", str(sshd.key_path), "--known-hosts", str(sshd.known_hosts),
            "--no-ssh-config"]
    n = _line_of(SERVER_ARGS, 'sm100_default_attention_backend="flashinfer"')
    assert main(["source", "slice", SERVER_ARGS, str(n), str(n), *opts]) == 0
    assert capsys.readouterr().out.split(None, 1) == [str(n), 'sm100_default_attention_backend="flashinfer",\n']
    # without the fixture's known_hosts the server's key is unknown: refused, exit 1, named
    assert main(["source", "slice", SERVER_ARGS, "1", "1", "--host", sshd.target, "--identity",
                 str(sshd.key_path), "--known-hosts", os.devnull, "--no-ssh-config"]) == 1
    assert sshd.target.split("@")[-1].split(":")[0] in capsys.readouterr().err
