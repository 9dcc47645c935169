"""Issue 45 item 13: hostile engine records at the reconciliation's input step, each on the input the
issue describes (the sample session's graph run at concurrency 1, its engine log rewritten): refused
or flagged with its count, never a negative part, a changed percentile or a traceback."""
from __future__ import annotations

import json
import math

import anyio
import pytest

import kit
from tests.conftest import ROOT

SAMPLE = ROOT / "notebooks" / "sample" / "bench" / "reconcile" / "graph"
CLIENT = SAMPLE / "c1.json"
MARKERS = ("Step record: ", "Request record: ")


def _log(tmp_path, change=None, *, name="engine.log", drop=None) -> str:
    """The sample engine log with each record passed through ``change(kind, record, index)`` (None drops it)."""
    out, seen = [], {"step": 0, "request": 0}
    for line in (SAMPLE / "engine.log").read_text().splitlines():
        marker = next((m for m in MARKERS if m in line), None)
        if marker is None:
            out.append(line)
            continue
        kind = "step" if marker.startswith("Step") else "request"
        head, body = line.split(marker, 1)
        rec = json.loads(body)
        i = seen[kind]
        seen[kind] += 1
        recs = change(kind, rec, i) if change else [rec]
        out += [head + marker + json.dumps(r) for r in recs]
    path = tmp_path / name
    path.write_text("\n".join(out) + "\n")
    return str(path)


def _t(rec, part: str, band: str = "median_band") -> float:
    return float(rec.table.set_index("part").loc[part, band])


@pytest.fixture(scope="module")
def clean():
    return kit.bench.reconcile(CLIENT, SAMPLE / "engine.log")


def test_swapped_forward_start_and_end_are_dropped_and_counted(tmp_path, clean):
    def swap(kind, r, i):
        if kind == "step" and i % 10 == 3:
            r["fwd0"], r["fwd1"] = r["fwd1"], r["fwd0"]
        return [r]

    rec = kit.bench.reconcile(CLIENT, _log(tmp_path, swap))
    n = sum(1 for w in rec.warnings if "forward that ends before it starts" in w)
    assert n == 1 and not rec.refused
    assert _t(rec, "forward") > 0 and min(rec.tokens["forward"].dropna()) >= 0
    every = kit.bench.reconcile(CLIENT, _log(tmp_path, lambda k, r, i: [{**r, "fwd0": r["fwd1"], "fwd1": r["fwd0"]}
                                                                         if k == "step" else r], name="all.log"))
    assert every.refused and "no usable step record" in every.refused

    from kit.mcp import Policy, available
    from kit.mcp._server import call

    p = Policy(roots=(tmp_path, ROOT))
    out = anyio.run(call, p, {t.name: t for t in available(p)}, "bench_reconcile",
                    {"client": str(CLIENT), "engine_log": str(tmp_path / "engine.log")})
    assert out["ok"] and out["trust"]["verdict"] != "usable"


def test_descending_emit_times_are_dropped_and_counted(tmp_path):
    def backwards(kind, r, i):
        if kind == "request" and i == 2:
            r["emit"] = sorted(r["emit"], reverse=True)
        return [r]

    rec = kit.bench.reconcile(CLIENT, _log(tmp_path, backwards))
    assert any(w.endswith("1 request record with token times that run backwards (descending emit or write times): "
                          "dropped") for w in rec.warnings), rec.warnings
    assert rec.tokens["sched"].dropna().min() > -1.0   # no negative scheduler from a backwards list


def test_duplicated_records_do_not_move_the_percentiles(tmp_path, clean):
    rec = kit.bench.reconcile(CLIENT, _log(tmp_path, lambda k, r, i: [r, dict(r)]))
    assert any("step records: the same step recorded twice" in w for w in rec.warnings)
    assert any("request records: the same id recorded twice" in w for w in rec.warnings)
    for part in ("sched", "forward", "client ITL"):
        assert _t(rec, part, "slowest_1pct") == pytest.approx(_t(clean, part, "slowest_1pct"))


def test_numbers_as_strings_and_nan_or_inf_times_are_counted_not_a_traceback(tmp_path):
    def odd(kind, r, i):
        if kind == "step" and i in (4, 5):
            r["fwd0"] = str(r["fwd0"])
        if kind == "step" and i == 6:
            r["fwd1"] = math.nan
        if kind == "request" and i == 1:
            r["sent"] = [str(x) for x in r["sent"]]
        if kind == "request" and i == 3:
            r["emit"][2] = math.inf
        return [r]

    rec = kit.bench.reconcile(CLIENT, _log(tmp_path, odd))
    text = " | ".join(rec.warnings)
    assert "3 step records with times that are not finite numbers" in text
    assert "2 request records with token times that are not lists of finite numbers" in text
    assert not rec.refused and math.isfinite(_t(rec, "forward"))


def test_no_step_records_is_refused_with_the_reason(tmp_path):
    rec = kit.bench.reconcile(CLIENT, _log(tmp_path, lambda k, r, i: [] if k == "step" else [r]))
    assert rec.refused and "no usable step record (0 given)" in rec.refused


def test_a_clock_offset_of_two_and_a_half_itls_is_flagged(tmp_path, clean):
    itl = float(clean.tokens["gap"].median()) / 1e3
    shift = 2.5 * itl

    def later(kind, r, i):
        for k in ("fwd0", "fwd1", "pf0", "pf1", "arrival"):
            if isinstance(r.get(k), (int, float)):
                r[k] += shift
        for k in ("emit", "got", "sent"):
            if isinstance(r.get(k), list):
                r[k] = [x + shift for x in r[k]]
        return [r]

    rec = kit.bench.reconcile(CLIENT, _log(tmp_path, later))
    assert not rec.refused
    note = [w for w in rec.warnings if "clock offset" in w]
    assert note and "x the median ITL" in note[0]
    assert _t(rec, "forward") == pytest.approx(_t(clean, "forward"), rel=1e-6)   # the parts do not move
    assert not any("clock offset" in w for w in clean.warnings)
