"""kit.report.table, the verdict cards and the session's configuration table: what a report page shows,
checked on the rendered HTML and on the sample session's own files."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import kit.report
from kit.errors import UsageError
from kit.ledger import Hypothesis, Ledger
from tests.conftest import SAMPLE

KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "std::array<char*, 1ul>>(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")


def _cells(html: str) -> list[tuple[str, str]]:
    """(text-align, text) of every body cell."""
    body = html.split("<tbody>", 1)[1]
    return [(m.group(1), re.sub(r"<[^>]+>", "", m.group(2)))
            for m in re.finditer(r"<td style='[^']*text-align:(\w+)[^']*'>(.*?)</td>", body)]


def test_text_left_numbers_right_missing_named_never_nan():
    df = pd.DataFrame({"config": ["vLLM TP8 default", "SGLang TP8"], "tok/s": [82.67, np.nan],
                       "attention": [None, "flashinfer"], "graphs": [True, False], "n": [3, 4]})
    t = kit.report.table(df, missing={"attention": "not in log"}, units={"n": "runs"})
    html = t._repr_html_()
    cells = _cells(html)
    assert cells[:5] == [("left", "vLLM TP8 default"), ("right", "82.67"), ("left", "not in log"),
                         ("left", "yes"), ("right", "3")]
    assert cells[5:7] == [("left", "SGLang TP8"), ("right", "-")]
    assert "n (runs)" in html and "NaN" not in html and "None" not in html
    assert "not in log" in repr(t) and "NaN" not in repr(t)


def test_a_long_name_is_shortened_with_the_full_name_on_hover():
    t = kit.report.table(pd.DataFrame({"kernel": [KERNEL], "share": [0.25]}), short=40)
    html = t._repr_html_()
    shown = _cells(html)[0][1]
    assert len(shown) < len(KERNEL) and "\u2026" in shown
    assert f"title='{KERNEL.replace('<', '&lt;').replace('>', '&gt;')}'" in html
    # Prose wraps at word boundaries instead: no word is long, nothing is cut.
    prose = "the engine disabled its custom all-reduce on more than two PCIe-only GPUs " * 3
    assert _cells(kit.report.table(pd.DataFrame({"note": [prose]}))._repr_html_())[0][1] == prose


def test_footnotes_decimals_and_no_negative_zero():
    df = pd.DataFrame({"run": ["a", "b", "c"], "delta": [-0.0001, 1.5, 2.25], "steps": [1.0, 2.0, 3.0],
                       "source": ["sample written by hand", "sample written by hand", "measured on H200"]})
    t = kit.report.table(df, digits={"delta": 2}, notes=["source"])
    rows = t.rows
    assert [r[1] for r in rows] == ["0.00", "1.50", "2.25"]  # never "-0.00"
    assert [r[2] for r in rows] == ["1", "2", "3"]  # whole numbers without decimals
    assert [r[3] for r in rows] == ["[1]", "[1]", "[2]"] and t.notes == ["sample written by hand", "measured on H200"]
    assert "<li>measured on H200</li>" in t._repr_html_()


def test_index_series_code_columns_and_misuse():
    s = pd.Series([6, 23], index=pd.Index(["attention", "mamba2"], name="mixer"), name="layers")
    t = kit.report.table(s)
    assert t.columns == ["mixer", "layers"] and t.rows == [["attention", "6"], ["mamba2", "23"]]
    unnamed = kit.report.table(pd.DataFrame({"capture": ["eager"]}, index=["tp1_eager"]))
    assert unnamed.columns == ["", "capture"] and unnamed.rows == [["tp1_eager", "eager"]]
    t = kit.report.table(pd.DataFrame({"kind": ["parameter"], "value": ["None"]}), code=["value"])
    assert "<code>None</code>" in t._repr_html_()
    with pytest.raises(UsageError, match=r"no column\(s\) \['nope'\]"):
        kit.report.table(pd.DataFrame({"a": [1]}), notes=["nope"])
    with pytest.raises(UsageError, match="expected a DataFrame"):
        kit.report.table([1, 2])


def test_verdict_cards_show_the_deciding_number_and_its_provenance(tmp_path):
    led = Ledger(tmp_path / "ledger.json", [
        Hypothesis(id="H1", statement="all-reduce is first-order", verdict="open",
                   numbers={"lower": 0.1095, "model": 0.103}, source="01_allreduce_share",
                   provenance=[{"kind": "sample", "label": "sample written by hand"}]),
        Hypothesis(id="H7", statement="graphs matter", verdict="confirmed", numbers={"speedup": 0.21},
                   source="05_live_experiment", provenance=[{"kind": "measured", "label": "measured on gpu-box"}])])
    cards = led.cards([("A/B lower bound", "H1", "lower", "{:.0%}"), ("model", "H1", "model", "{:.0%}"),
                       ("speed", "H7", "speedup", "x{:.2f}"), ("missing", "H9", "x", "{}")])
    html = cards._repr_html_()
    assert html.startswith("<div class='kit-cards' data-kit-block='verdicts'")
    assert html.count("class='kit-card'") == 3
    h1 = html.split("class='kit-card'")[1]
    assert h1.index("11%") < h1.index("model") and ">open<" in h1 and ">sample<" in h1
    assert ">measured<" in html.split("class='kit-card'")[2] and "x0.21" in html
    assert "not recorded" in html.split("class='kit-card'")[3]
    assert repr(cards).splitlines()[0] == "H1 open: 11% (A/B lower bound; sample)"


def test_session_configurations_read_from_the_sample_files():
    sess = kit.session.open(SAMPLE)
    table = sess.configurations([
        {"name": "vLLM", "version": None, "bench": "bench/vllm_tp8_default.json",
         "log": "logs/vllm_0.11.0_tp8_default.log", "nccl": None},
        {"name": "SGLang LL", "version": "0.5.9", "bench": "bench/sglang_tp8_nccl_ll.jsonl",
         "log": "logs/sglang_0.5.9_tp8_nccl_ll.log", "nccl": "logs/nccl_info_tp8_ll.log"}]).set_index("config")
    vllm, sgl = table.loc["vLLM"], table.loc["SGLang LL"]
    assert pd.isna(vllm["attention"]) and pd.isna(vllm["overlap scheduler"])  # vLLM's log names neither
    assert sgl["attention"] == "flashinfer" and sgl["speculative"] == "none" and sgl["overlap scheduler"] is False
    assert "NCCL_PROTO=LL" in sgl["NCCL env"] and vllm["NCCL env"] == "not captured"
    assert re.fullmatch(r"off \(log line \d+\)", sgl["custom all-reduce"])
    assert sgl["ms/token"] == pytest.approx(1000 / sgl["tok/s (bench)"])
    assert sgl["tok/s (bench)"] == pytest.approx(71.4) and "sample" in sgl["source"]
    shown = kit.report.table(table, missing="not in log")._repr_html_()  # vLLM: attention, speculative, overlap
    assert "NaN" not in shown and "None" not in shown and shown.count("not in log") == 3


def test_exported_code_is_folded_unless_tagged_and_the_notebook_copy_keeps_it():
    """nbconvert with the report's template: each code cell's input inside a closed <details>
    ('show code'); a cell tagged show-code keeps its code in view; outputs stay outside."""
    import nbformat

    from kit.report._export import SHOW_CODE_TAG, export, make_exporter

    nb = nbformat.v4.new_notebook()
    folded = nbformat.v4.new_code_cell("x_folded = 1\nx_folded", outputs=[
        nbformat.v4.new_output("execute_result", data={"text/plain": "result-one"}, execution_count=1)])
    shown = nbformat.v4.new_code_cell("y_shown = 2", metadata={"tags": [SHOW_CODE_TAG]})
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), folded, shown]
    page, _ = export(make_exporter(), nb, title="t")
    blocks = re.findall(r"<details class=\"kit-code\"><summary>show code</summary>(.*?)</details>", page, re.S)
    assert len(blocks) == 1 and "x_folded" in blocks[0] and "result-one" not in blocks[0]
    assert "y_shown" in page and "y_shown" not in blocks[0] and "result-one" in page
    assert folded.source == "x_folded = 1\nx_folded"  # the notebook itself is left as it was
