"""Ledger.revise: a later check revises a verdict through the ledger, not by cutting strings;
Ledger.headlines: headline numbers with their provenance."""
from __future__ import annotations

from kit.ledger import Ledger
from kit.session import Evidence, Provenance


def _h1(ledger: Ledger) -> None:
    ledger.record("H1", statement="all-reduce is first-order", evidence="predicted 0.5 ms of 15 ms (3%).",
                  verdict="rejected", numbers={"per_token_ms": 0.5}, source="01_allreduce_share",
                  provenance=[Evidence("logs/a.log", Provenance("sample"), "step time")])


def test_revise_keeps_the_evidence_and_replaces_its_own_sentence_on_a_rerun(tmp_path):
    ledger = Ledger.open(tmp_path / "ledger.json")
    _h1(ledger)
    ab = [Evidence("bench/b.json", Provenance.measured(host="gpu1", how="bench"), "A/B")]
    for saved in (1.7, 1.9):  # the notebook run twice, the second time on other numbers
        h = ledger.revise("H1", check="the NCCL A/B", finding=f"it saved {saved} ms/token", verdict="open",
                          numbers={"ab_saved_ms_per_token": saved}, source="04_single_stream_gap",
                          provenance=ab, caveats=["the A/B contradicts the model"])
    assert h.evidence == "predicted 0.5 ms of 15 ms (3%). Checked against the NCCL A/B: it saved 1.9 ms/token"
    assert h.verdict == "open" and h.numbers == {"per_token_ms": 0.5, "ab_saved_ms_per_token": 1.9}
    assert h.source == "01_allreduce_share, checked by 04_single_stream_gap"
    assert [p["artefact"] for p in h.provenance] == ["logs/a.log", "bench/b.json"]
    assert h.evidence_kind == "mixed: measured, sample"
    assert Ledger.open(tmp_path / "ledger.json")["H1"].evidence == h.evidence  # saved


def test_headlines_say_where_each_number_came_from(tmp_path):
    ledger = Ledger.open(tmp_path / "ledger.json")
    _h1(ledger)
    ledger.record("H2", statement="launch-bound", verdict="confirmed", numbers={"idle": 0.61}, source="01_x",
                  provenance=[Evidence("traces/t", Provenance.measured(host="h200", how="recorder"), "trace")])
    t = ledger.headlines([("share", "H1", "per_token_ms", "{:.2f} ms"), ("idle", "H2", "idle", "{:.0%}"),
                          ("missing", "H9", "x", "{}")])
    assert list(t["value"]) == ["0.50 ms", "61%", "not recorded"]
    assert t["provenance"][0] == "sample" and "h200" in t["provenance"][1] and t["provenance"][2] == "not recorded"
    assert list(t["notebook"]) == ["01_allreduce_share", "01_x", ""]
