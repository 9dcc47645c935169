"""Every figure the catalogue records has the unit its name says, from one declared table (issue 46, item 3).

The sample session's analyses are recorded into a fresh store (summaries, a comparison, the ranks view, the
structural diff, log parses, benchmark files, an audit), then every figure is read back with SQL: each name is
declared in ``kit/util/_units.py`` and its unit fits the name (a ``_us`` figure in us, a share a fraction,
``decode_tok_s`` in tok/s, ``request_throughput`` in req/s, a ``batch_size`` a count).
"""
from __future__ import annotations

import glob
import re

import pytest

from kit import runs
from kit.util import UNITS, unit_of
from tests.conftest import SAMPLE


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    return tmp_path / "store"


def _fits(name: str, unit: str) -> bool:
    """Does ``unit`` fit what ``name`` says (the name's own words, read after the unit was declared)?"""
    base = name.split(".")[0]
    words = base.split("_")
    if "tok" in words and words[-1] == "s" or base.endswith("_tok_s") or re.search(r"tok_s_(lo|hi)$", base):
        return unit == "tok/s"
    if "us" in words:
        return unit == "us"
    if "ms" in words:
        return unit == "ms"
    if words[-1] == "s":
        return unit == "s"
    if "share" in words or "rate" in words and "request" not in words:
        return unit == "fraction"
    if "throughput" in words:
        return unit == ("req/s" if "request" in words else "tok/s")
    if "tokens" in words or words[-1] == "len":
        return unit == "tokens"
    return unit != ""


def _record_the_sample():
    from kit import audit, logs, profile

    t = SAMPLE / "traces"
    eager, graph = [str(t / "tp1_eager" / "rank0.trace.json.gz")], [str(t / "tp1_graph" / "rank0.trace.json.gz")]
    profile.load(eager).summary("decode")
    profile.compare(sorted(glob.glob(str(t / "cmp_gemm_a" / "*.json.gz"))),
                    sorted(glob.glob(str(t / "cmp_gemm_b" / "*.json.gz"))))
    profile.ranks(eager)
    profile.diff_structure(eager[0], graph[0])
    for log in sorted((SAMPLE / "logs").glob("*.log")):
        logs.read(log)
    for bench in sorted((SAMPLE / "bench").glob("*.json*")):
        logs.parse_bench(bench)
    audit.audit([str(SAMPLE / "logs")])


def test_every_recorded_figure_has_a_declared_unit_that_fits_its_name(store):
    import kit.runs  # noqa: F401  the catalogue installs its writer: the calls below are recorded

    _record_the_sample()
    figs = runs.query("SELECT DISTINCT kind, name, unit FROM figures ORDER BY kind, name")
    assert {"summary", "comparison", "ranks", "structure", "logs", "bench", "audit"} <= set(figs["kind"])
    undeclared = [f"{r.kind}: {r.name}" for r in figs.itertuples() if unit_of(r.name) == ""]
    assert undeclared == [], "figures without a declared unit (kit/util/_units.py)"
    wrong = [f"{r.kind}: {r.name} in {r.unit!r}" for r in figs.itertuples() if not _fits(r.name, r.unit)]
    assert wrong == []


def test_the_units_named_in_issue_46():
    assert unit_of("decode_tok_s") == "tok/s" and unit_of("request_throughput") == "req/s"
    assert unit_of("output_throughput") == "tok/s" and unit_of("batch_size") == "count"
    assert unit_of("allreduce_share_of_kernel") == "fraction" and unit_of("share_of_kernel.gemm") == "fraction"


def test_every_declared_unit_fits_its_name():
    assert [f"{n} in {u!r}" for n, u in UNITS.items() if not _fits(n, u)] == []


def test_a_result_type_records_by_defining_to_record_alone(store):
    """A new analysis result: its entry point wears ``@recorded``, its type defines ``to_record``; nothing
    else in the catalogue names it."""
    import kit.runs  # noqa: F401  the catalogue installs its writer
    from kit.util import recorded

    class Novel:
        def to_record(self, args):
            return {"figures": [("step_us", 12.5), ("share_of_kernel.gemm", 0.5)], "facts": {"verdict": "new"},
                    "settings": {"k": args["k"]}}

    @recorded("novel")
    def analyse(k: int) -> Novel:
        return Novel()

    analyse(3)
    got = runs.query("SELECT name, value, unit FROM figures WHERE kind = 'novel' ORDER BY name")
    assert list(got["name"]) == ["elapsed_s", "share_of_kernel.gemm", "step_us"]
    assert list(got["unit"]) == ["s", "fraction", "us"]


def test_a_recording_failure_is_counted_and_shown_by_kit_runs(store, capsys):
    import kit.runs  # noqa: F401  the catalogue installs its writer
    from kit.cli import main
    from kit.util import recorded

    class Broken:
        def to_record(self, args):
            raise ValueError("no figures today")

    @recorded("broken")
    def analyse() -> Broken:
        return Broken()

    assert isinstance(analyse(), Broken)   # the call itself never fails
    assert "run not recorded in the catalogue" in capsys.readouterr().err
    assert [f["kind"] for f in runs.failures()] == ["broken"]
    assert main(["runs", "list"]) == 0
    assert "1 run not recorded in this store" in capsys.readouterr().err
