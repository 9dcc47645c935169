"""The hypothesis ledger: verdict validation, atomic saves, concurrent writers, rendering."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kit.errors import LedgerError
from kit.ledger import Hypothesis, Ledger, confirmed_if


def test_record_creates_file_and_round_trips(tmp_path):
    path = tmp_path / "session" / "ledger.json"
    led = Ledger.open(path)
    assert len(led) == 0 and not path.exists()
    led.record("H1", statement="AllReduce dominates decode", test="category share",
               verdict=confirmed_if(0.52 >= 0.30), numbers={"allreduce_share": 0.52}, source="01")
    led.record("H2", statement="Backend default applies", verdict="open")
    again = Ledger.open(path)
    assert [h.id for h in again] == ["H1", "H2"]
    assert again["H1"].verdict == "confirmed"
    assert again["H1"].numbers == {"allreduce_share": 0.52}
    # Only given fields change; numbers merge key by key.
    again.record("H1", evidence="52% of decode kernel time", numbers={"steps": 40})
    h1 = Ledger.open(path)["H1"]
    assert h1.statement == "AllReduce dominates decode" and h1.verdict == "confirmed"
    assert h1.numbers == {"allreduce_share": 0.52, "steps": 40}
    assert h1.evidence == "52% of decode kernel time"


def test_invalid_verdict_and_missing_statement_are_refused(tmp_path):
    led = Ledger.open(tmp_path / "l.json")
    with pytest.raises(LedgerError, match="verdict 'maybe' is not one of open, confirmed, rejected"):
        led.record("H1", statement="x", verdict="maybe")
    with pytest.raises(LedgerError, match="needs a statement"):
        led.record("H9", verdict="open")
    assert not (tmp_path / "l.json").exists()
    with pytest.raises(LedgerError):
        Hypothesis("", "no id")


def test_confirmed_if():
    assert confirmed_if(True) == "confirmed"
    assert confirmed_if(False) == "rejected"
    assert confirmed_if(None) == "open"


def test_numbers_are_json_scalars(tmp_path):
    np = pytest.importorskip("numpy")
    led = Ledger.open(tmp_path / "l.json")
    h = led.record("H1", statement="s", numbers={"a": np.float64(0.25), "b": float("nan"), "c": np.int64(3)})
    assert h.numbers == {"a": 0.25, "b": None, "c": 3}
    json.loads((tmp_path / "l.json").read_text())  # strict JSON: no NaN
    with pytest.raises(LedgerError, match="number 'd'"):
        led.record("H1", numbers={"d": [1, 2]})


def test_corrupt_or_foreign_file_gives_one_line_error(tmp_path):
    bad = tmp_path / "ledger.json"
    bad.write_text("{not json")
    with pytest.raises(LedgerError, match=r"ledger .*ledger.json: not valid JSON \(line 1"):
        Ledger.open(bad)
    bad.write_text(json.dumps({"hypotheses": [{"id": "H1", "statement": "s", "verdict": "perhaps"}]}))
    with pytest.raises(LedgerError, match="verdict 'perhaps'"):
        Ledger.open(bad)
    with pytest.raises(LedgerError, match=r"ledger .*ledger.json: hypothesis H1: verdict 'perhaps'"):
        Ledger.open(bad)  # the message names the file
    bad.write_text(json.dumps({"hypotheses": [{"id": "H1", "statement": "s", "numbers": "0.5"}]}))
    with pytest.raises(LedgerError, match=r"ledger .*ledger.json: hypothesis H1: numbers must be an object"):
        Ledger.open(bad)
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(LedgerError, match="'hypotheses' list"):
        Ledger.open(bad)
    with pytest.raises(LedgerError, match="is a directory"):
        Ledger.open(tmp_path)


def test_failed_write_leaves_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ledger.json"
    led = Ledger.open(path)
    led.record("H1", statement="first", verdict="rejected")
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(LedgerError, match=r"ledger .*ledger.json: cannot write \(No space left on device\)"):
        led.record("H1", verdict="confirmed")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]  # no temp file left behind


_WRITER = textwrap.dedent("""
    import sys
    from kit.ledger import Ledger
    path, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    led = Ledger.open(path)
    for i in range(n):
        led.record(f"{prefix}{i % 7}", statement="s" * 2000, evidence=str(i), numbers={"i": i})
""")


def _wait_for_a_write(path, prefix: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if any(h.id.startswith(prefix) for h in Ledger.open(path)):
                return
        except LedgerError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"the writer recorded nothing in {timeout} s")


def test_killed_writer_never_corrupts_the_file(tmp_path):
    """SIGKILL a process in the middle of a stream of saves: the file always parses."""
    path = tmp_path / "ledger.json"
    Ledger.open(path).record("H0", statement="seed")
    for delay in (0.05, 0.2, 0.4):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "K", "100000"])
        _wait_for_a_write(path, "K")  # a loaded machine may take a while to start Python
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        led = Ledger.open(path)  # raises if torn
        assert "H0" in led and any(h.id.startswith("K") for h in led)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "ledger.json"]
    # A killed writer may leave its own temp file, but never a damaged ledger.
    assert all(name.startswith(".ledger.json.") for name in leftovers)


def test_concurrent_writers_keep_each_others_verdicts(tmp_path):
    path = tmp_path / "ledger.json"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), p, "40"]) for p in ("A", "B")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    ids = {h.id for h in Ledger.open(path)}
    assert ids == {f"A{i}" for i in range(7)} | {f"B{i}" for i in range(7)}


def test_rendering_is_deterministic_and_escaped(tmp_path):
    led = Ledger.open(tmp_path / "ledger.json")
    led.record("H1", statement="<script>alert(1)</script> dominates", verdict="confirmed",
               numbers={"share": 0.51234567}, evidence="51.2% of decode", source="01_allreduce_share")
    led.record("H2", statement="second", verdict="open")
    assert repr(led) == "Ledger('ledger.json', 2 hypotheses: open=1, confirmed=1, rejected=0)"
    assert repr(led["H1"]) == ("Hypothesis(H1: confirmed; '<script>alert(1)</script> dominates'; share=0.5123)")
    html = led._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "confirmed" in html and "share = 0.5123" in html
    text = str(led)
    assert "H1     confirmed" in text and "evidence: 51.2% of decode" in text
    frame = led.to_frame()
    assert list(frame["id"]) == ["H1", "H2"] and list(frame["verdict"]) == ["confirmed", "open"]
    assert Ledger.open(tmp_path / "ledger.json")._repr_html_() == html


# ---------------------------------------------------------------- issue 15 / 16: merges, damage, provenance
def test_two_instances_saved_in_turn_keep_both_sets_of_verdicts(tmp_path):
    path = tmp_path / "ledger.json"
    Ledger.open(path).record("H0", statement="seed")
    a, b = Ledger.open(path), Ledger.open(path)  # both read the same file
    a._items["HA"] = Hypothesis("HA", "from a", verdict="confirmed")
    a["H0"].evidence = "a looked at H0"
    b._items["HB"] = Hypothesis("HB", "from b", verdict="rejected")
    a.save()
    b.save()  # before the fix this wrote b's view over a's: HA and a's H0 evidence were lost
    final = Ledger.open(path)
    assert [h.id for h in final] == ["H0", "HA", "HB"]
    assert final["HA"].verdict == "confirmed" and final["HB"].verdict == "rejected"
    assert final["H0"].evidence == "a looked at H0"
    # record() on a stale instance keeps the others too
    c = Ledger.open(path)
    Ledger.open(path).record("HD", statement="d", verdict="open")
    c.record("HC", statement="c")
    assert {h.id for h in Ledger.open(path)} == {"H0", "HA", "HB", "HC", "HD"}


def test_save_refuses_a_conflicting_change_and_leaves_the_file(tmp_path):
    path = tmp_path / "ledger.json"
    Ledger.open(path).record("H1", statement="s", verdict="open")
    a, b = Ledger.open(path), Ledger.open(path)
    a["H1"].verdict = "confirmed"
    a.save()
    before = path.read_bytes()
    b["H1"].verdict = "rejected"
    with pytest.raises(LedgerError, match=r"not saved: H1 changed both here and in the file"):
        b.save()
    assert path.read_bytes() == before
    b.reload()
    b["H1"].verdict = "rejected"
    b.save()
    assert Ledger.open(path)["H1"].verdict == "rejected"


def test_damaged_ledgers_are_one_clear_error_and_stay_as_they_were(tmp_path):
    path = tmp_path / "ledger.json"
    cases = {
        "latin-1": '{"format": 1, "hypotheses": [{"id": "H1", "statement": "caf\xe9"}]}'.encode("latin-1"),
        "null statement": json.dumps({"hypotheses": [{"id": "H1", "statement": None}]}).encode(),
        "number statement": json.dumps({"hypotheses": [{"id": "H1", "statement": 3}]}).encode(),
        "deep": b"[" * 100000 + b"]" * 100000,
        "bad provenance": json.dumps({"hypotheses": [{"id": "H1", "statement": "s", "provenance": "sample"}]}).encode(),
    }
    for name, raw in cases.items():
        path.write_bytes(raw)
        with pytest.raises(LedgerError, match=r"^ledger .*ledger.json: ") as info:
            Ledger.open(path)
        assert "\n" not in str(info.value), name
        with pytest.raises(LedgerError):
            if name == "deep":
                Ledger.open(path).record("H2", statement="x")
            else:
                Ledger(path).record("H2", statement="x")
        assert path.read_bytes() == raw, f"{name}: the damaged file was changed"
    with pytest.raises(LedgerError, match="not UTF-8 text"):
        path.write_bytes(cases["latin-1"])
        Ledger.open(path)
    # null text fields other than the statement load as empty and render
    path.write_text(json.dumps({"hypotheses": [{"id": "H1", "statement": "s", "evidence": None, "test": None}]}))
    assert "H1" in Ledger.open(path).to_html()


def test_a_killed_writers_temp_file_is_removed_by_the_next_writer(tmp_path):
    path = tmp_path / "ledger.json"
    Ledger.open(path).record("H0", statement="seed")
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "K", "100000"])
    _wait_for_a_write(path, "K")
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    (tmp_path / ".ledger.json.abandoned.tmp").write_text("x" * 1000)  # as a kill -9 mid-write leaves it
    Ledger.open(path).record("H1", statement="after the kill")
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]


def test_old_ledger_files_load_and_provenance_round_trips(tmp_path):
    path = tmp_path / "ledger.json"
    old = {"format": 1, "hypotheses": [{"id": "H1", "statement": "s", "test": "", "evidence": "", "verdict": "open",
                                        "numbers": {}, "source": "posed"}]}
    path.write_text(json.dumps(old))
    h = Ledger.open(path)["H1"]
    assert h.provenance == [] and h.caveats == [] and h.evidence_kind == "not stated"
    led = Ledger.open(path)
    led.record("H1", verdict="rejected", caveats=["the measurement contradicts the model"],
               provenance=[{"artefact": "logs/a.log", "kind": "sample", "label": "sample (not measured)",
                            "role": "step time"},
                           {"artefact": "traces/x", "kind": "measured", "label": "measured on h200"}])
    again = Ledger.open(path)["H1"]
    assert again.evidence_kind == "mixed: measured, sample"
    assert again.caveats == ["the measurement contradicts the model"]
    html = Ledger.open(path).to_html()
    assert "provenance" in html and "sample (not measured)" in html and "contradicts the model" in html
    with pytest.raises(LedgerError, match="needs at least a 'kind'"):
        led.record("H1", provenance=[{"artefact": "x"}])
