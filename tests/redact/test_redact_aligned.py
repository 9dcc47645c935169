"""Issue 45 item 15: a table printed with ``df.to_string(index=False)`` (right-aligned cells one space
apart, a value holding spaces) leaks no ``api_key``/``admin_password`` row into the notebook copy, the
HTML page or the PDF: the three are made from the notebook ``redact_notebook`` redacted."""
from __future__ import annotations

import json

import nbformat
import pandas as pd

from kit.redact import redact_notebook, redact_text

KEY, PASSWORD = "Zq81rT0pLm3Vx9cB7nD2", "correct horse battery staple"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"name": ["model", "api_key", "admin_password", "max_tokens"],
                         "value": ["llama-3", KEY, PASSWORD, "512"]})


def test_to_string_without_index_is_redacted():
    text, n = redact_text(_frame().to_string(index=False))
    assert KEY not in text and PASSWORD not in text and n >= 2
    assert "llama-3" in text and "512" in text


def test_every_copy_of_the_printed_table_in_a_notebook_is_redacted():
    df = _frame()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(df.to_string(index=False))\ndf")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=df.to_string(index=False) + "\n"),
                    nbformat.v4.new_output("execute_result", execution_count=1,
                                           data={"text/plain": df.to_string(), "text/html": df.to_html()})]
    nb.cells.append(cell)
    redact_notebook(nb)
    dumped = json.dumps(nb)
    assert KEY not in dumped and PASSWORD not in dumped and "llama-3" in dumped
