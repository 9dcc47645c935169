"""Redaction over a corpus of credential formats and decoys, and a real ``kit report`` run with
secrets planted in a session's log, in notebook output and in a ledger hypothesis: nothing leaks
into any exported artefact (pages, ledger copy, ipynb copies, report.json); decoys stay."""
from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kit.redact import MASK, find_secrets, redact_html, redact_json_text, redact_text
from tests.redact.secret_corpus import CREDENTIALS, DECOYS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MAX_DECOYS_MASKED = 0  # the bound: a decoy masked is a figure or a kernel name the reader loses


def _forms(needle: str) -> set[str]:
    """How a value can stand in an artefact: raw, HTML-escaped, JSON-escaped (also with \\/)."""
    j = json.dumps(needle)[1:-1]
    return {needle, html.escape(needle), html.escape(needle, quote=False), j, j.replace("/", "\\/")}


def _leaks(text: str) -> list[str]:
    return [name for name, _, needle in CREDENTIALS if any(f in text for f in _forms(needle))]


def test_the_corpus_is_big_enough():
    assert len({name for name, _, _ in CREDENTIALS}) >= 60
    assert len(DECOYS) >= 40


@pytest.mark.parametrize("form", ["raw", "html", "json"])
def test_every_credential_format_is_masked(form):
    leaked = []
    for name, line, needle in CREDENTIALS:
        text = {"raw": line, "html": html.escape(line), "json": json.dumps(line)}[form]
        red, n = redact_text(text)
        if n == 0 or any(f in red for f in _forms(needle)):
            leaked.append(name)
    assert leaked == [], f"{len(leaked)} of {len(CREDENTIALS)} formats leaked ({form}): {leaked}"


def test_credentials_in_one_log_are_masked_together():
    log = "\n".join(line for _, line, _ in CREDENTIALS)
    red, _ = redact_text(log)
    assert _leaks(red) == []


@pytest.mark.parametrize("form", ["raw", "html", "json"])
def test_decoys_stay(form):
    masked = []
    for line in DECOYS:
        text = {"raw": line, "html": html.escape(line), "json": json.dumps(line)}[form]
        if redact_text(text)[0] != text or find_secrets(text):
            masked.append(line)
    assert len(masked) <= MAX_DECOYS_MASKED, f"{len(masked)} of {len(DECOYS)} decoys masked ({form}): {masked}"


def test_decoys_beside_credentials_stay():
    log = "\n".join(DECOYS[i // 2] if i % 2 else CREDENTIALS[i // 2][1] for i in range(2 * len(DECOYS)))
    red, _ = redact_text(log)
    kept = [d for d in DECOYS if d in red]
    assert len(DECOYS) - len(kept) <= MAX_DECOYS_MASKED, [d for d in DECOYS if d not in red]


def test_ledger_copy_stays_valid_json():
    doc = json.dumps({"format": 1, "hypotheses": [
        {"id": "H1", "statement": CREDENTIALS[5][1], "evidence": CREDENTIALS[16][1], "verdict": "open"}]}, indent=2)
    red, n = redact_json_text(doc)
    assert n >= 2 and _leaks(red) == [] and json.loads(red)["hypotheses"][0]["verdict"] == "open"
    assert redact_json_text('{"format": 1, "hypotheses": []}\n') == ('{"format": 1, "hypotheses": []}\n', 0)


def test_page_safety_net_keeps_images_and_styles():
    page = ("<style>.x{color:red}</style><img src='data:image/png;base64,iVBORw0KGgo" + "A" * 80 + "'>"
            f"<pre>{html.escape(CREDENTIALS[0][1])}</pre>")
    red, n = redact_html(page)
    assert n == 1 and "iVBORw0KGgo" + "A" * 80 in red and "<style>.x{color:red}</style>" in red and MASK in red


# ------------------------------------------------------------------------------ a real report run
def _nb(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell('session = "default"\nhost = "local"')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p] + [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A session whose server log holds every credential format between decoys, whose ledger holds
    a hypothesis quoting an NCCL secret, and a notebook that prints the log, shows it as HTML and
    as a table, copies a log line into a new hypothesis (as notebook 04 did) and fails with a
    secret in its traceback."""
    root = tmp_path_factory.mktemp("planted")
    nbs = root / "notebooks"
    sess = nbs / "sess"
    sess.mkdir(parents=True)
    lines = []
    for i, (_, line, _) in enumerate(CREDENTIALS):
        lines.append(line)
        lines.append(DECOYS[i % len(DECOYS)])
    (sess / "server.log").write_text("\n".join(lines) + "\n")
    nccl = next(line for name, line, _ in CREDENTIALS if name.startswith("NCCL log"))
    aws = next(line for name, line, _ in CREDENTIALS if name == "aws credentials file")
    (sess / "ledger.json").write_text(json.dumps({"format": 1, "hypotheses": [
        {"id": "H1", "statement": f"IB auth slows AllReduce ({nccl})", "evidence": aws, "verdict": "open"}]}, indent=2))
    nbformat.write(_nb([
        "from pathlib import Path\ntext = Path(session, 'server.log').read_text()\nprint(text)",
        "import html\nfrom IPython.display import HTML\nHTML('<pre>' + html.escape(text) + '</pre>')",
        "import pandas as pd\npd.DataFrame({'line': text.splitlines()})",
        "import json\njson.loads(json.dumps({'lines': text.splitlines()}))",
        "from kit.ledger import Ledger\n"
        "nccl = next(l for l in text.splitlines() if 'NCCL_IB_SECRET_KEY set by' in l)\n"
        "Ledger.for_session(session).record('H2', statement='NCCL IB auth is on: ' + nccl, evidence=nccl,\n"
        "    verdict='open', source='planted')",
        f"raise RuntimeError('probe failed: ' + {CREDENTIALS[0][1]!r} + ' ' + {CREDENTIALS[20][1]!r})",
    ]), nbs / "a_logs.ipynb")
    nbformat.write(_nb(["from kit.ledger import Ledger\nLedger.for_session(session)"]), nbs / "index.ipynb")
    out = root / "report"
    proc = subprocess.run([sys.executable, "-m", "kit", "report", "--session", str(sess), "--notebooks", str(nbs),
                           "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    return {"out": out, "proc": proc, "log": "\n".join(lines)}


def _artefacts(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file() and "assets" not in p.relative_to(out).parts)


def test_report_run_leaks_nothing(planted):
    out = planted["out"]
    assert (out / "index.html").is_file(), planted["proc"].stderr[-2000:]
    names = {p.relative_to(out).as_posix() for p in _artefacts(out)}
    assert {"index.html", "a_logs.html", "ledger.json", "ipynb/a_logs.ipynb", "ipynb/index.ipynb",
            "report.json"} <= names
    leaks = {p.relative_to(out).as_posix(): _leaks(p.read_text(errors="replace")) for p in _artefacts(out)}
    assert {k: v for k, v in leaks.items() if v} == {}
    ledger = json.loads((out / "ledger.json").read_text())
    assert [h["id"] for h in ledger["hypotheses"]] == ["H1", "H2"]
    assert MASK in ledger["hypotheses"][1]["statement"] and "NCCL_IB_SECRET_KEY" in ledger["hypotheses"][1]["statement"]
    assert "RuntimeError: probe failed" in json.loads((out / "report.json").read_text())["notebooks"][0]["error"]
    assert planted["proc"].returncode == 1  # the planted failure is reported


def test_report_run_keeps_decoys(planted):
    nb = nbformat.read(planted["out"] / "ipynb" / "a_logs.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("from pathlib"))
    printed = "".join(o.get("text", "") for o in cell.outputs)
    page = (planted["out"] / "a_logs.html").read_text()
    lost_nb = [d for d in DECOYS if d not in printed]
    lost_page = [d for d in DECOYS if html.escape(d) not in page and html.escape(d, quote=False) not in page]
    assert len(lost_nb) <= MAX_DECOYS_MASKED, lost_nb
    assert len(lost_page) <= MAX_DECOYS_MASKED, lost_page


@pytest.mark.shared_data
def test_real_serving_logs_are_left_alone(shared_data):
    """Third-party SGLang/vLLM/NCCL/nvidia-smi logs hold no credential: nothing in them is masked
    (paths after tokenizer_path=, '#full token: 350592', '----Inter-Token Latency----' rules)."""
    logs = sorted(p for p in (shared_data / "logs").glob("*.log"))
    if not logs:
        pytest.skip("no logs in ../shared/data/logs")
    masked = {p.name: redact_text(p.read_text(errors="replace"))[1] for p in logs}
    assert {k: v for k, v in masked.items() if v} == {}
