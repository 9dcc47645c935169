"""Credentials typed on command lines: every format of the corpus is masked wherever a line can stand
(raw, HTML-escaped, JSON-escaped), look-alike command lines stay whole, and a real ``kit report`` run
in which a cell prints a script with ``!cat`` leaks none of them into pages, ``ipynb/`` copies or the
ledger copy, including a token that another notebook prints bare."""
from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kit.redact import MASK, find_secrets, redact_text
from tests.redact.cmdline_corpus import CMDLINE_CREDENTIALS, CMDLINE_DECOYS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FORMS = ("raw", "html", "json")


def _as(form: str, line: str) -> str:
    return {"raw": line, "html": html.escape(line), "json": json.dumps(line)}[form]


def _needle_forms(needle: str) -> set[str]:
    j = json.dumps(needle)[1:-1]
    return {needle, html.escape(needle), html.escape(needle, quote=False), j, j.replace("/", "\\/")}


def _leaks(text: str) -> list[str]:
    return [name for name, _, needle in CMDLINE_CREDENTIALS if any(f in text for f in _needle_forms(needle))]


def test_the_corpus_is_big_enough():
    assert len({name for name, _, _ in CMDLINE_CREDENTIALS}) == len(CMDLINE_CREDENTIALS) >= 100
    assert len(set(CMDLINE_DECOYS)) == len(CMDLINE_DECOYS) >= 50


@pytest.mark.parametrize("form", FORMS)
def test_every_command_line_format_is_masked(form):
    leaked = [name for name, line, needle in CMDLINE_CREDENTIALS
              if any(f in redact_text(_as(form, line))[0] for f in _needle_forms(needle))]
    assert leaked == [], f"{len(leaked)} of {len(CMDLINE_CREDENTIALS)} formats leaked ({form}): {leaked}"


@pytest.mark.parametrize("form", FORMS)
def test_command_line_decoys_stay(form):
    masked = [line for line in CMDLINE_DECOYS
              if redact_text(_as(form, line))[0] != _as(form, line) or find_secrets(_as(form, line))]
    assert masked == [], f"{len(masked)} of {len(CMDLINE_DECOYS)} decoys masked ({form}): {masked}"


def test_a_script_of_both_keeps_the_decoys_and_masks_the_rest():
    lines = [x for pair in zip(CMDLINE_DECOYS * 2, CMDLINE_CREDENTIALS) for x in (pair[0], pair[1][1])]
    red, _ = redact_text("\n".join(lines))
    assert _leaks(red) == []
    assert [d for d in CMDLINE_DECOYS if d not in red.splitlines()] == []


def test_only_the_secret_is_masked():
    red, n = redact_text("sshpass -p 'Wq8v!Zr4mKp2' ssh -p 2222 bench@gpu-node")
    assert n == 1 and red == f"sshpass -p '{MASK}' ssh -p 2222 bench@gpu-node"
    assert redact_text("mysql -u root -pS3cr3tPass -h db")[0] == f"mysql -u root -p{MASK} -h db"


# ------------------------------------------------------------------------------ a real report run
def _nb(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell('session = "default"\nhost = "local"')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p] + [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


WANDB = next(line for name, line, _ in CMDLINE_CREDENTIALS if name == "wandb login hex")
WANDB_KEY = WANDB.split()[-1]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A session holding a launch script with every command-line format between decoys. Notebook
    ``a_script`` shows it with ``!cat`` (the host's shell echoes it) and records a line of it in the
    ledger; notebook ``b_bare`` prints the W&B key alone (letters and digits, nothing around it)."""
    root = tmp_path_factory.mktemp("cmdline")
    nbs = root / "notebooks"
    sess = nbs / "sess"
    sess.mkdir(parents=True)
    lines = [x for pair in zip(CMDLINE_DECOYS * 2, CMDLINE_CREDENTIALS) for x in (pair[0], pair[1][1])]
    (sess / "run.sh").write_text("\n".join(lines) + "\n")
    nbformat.write(_nb([
        "!cat {session}/run.sh",
        "from pathlib import Path\nfrom kit.ledger import Ledger\n"
        "line = next(l for l in Path(session, 'run.sh').read_text().splitlines() if l.startswith('sshpass -p '))\n"
        "Ledger.for_session(session).record('H1', statement='login by ' + line, evidence=line, verdict='open',\n"
        "    source='planted')",
    ]), nbs / "a_script.ipynb")
    nbformat.write(_nb([f"print({WANDB_KEY[:20]!r} + {WANDB_KEY[20:]!r})"]), nbs / "b_bare.ipynb")
    out = root / "report"
    proc = subprocess.run([sys.executable, "-m", "kit", "report", "--session", str(sess), "--notebooks", str(nbs),
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert (out / "index.html").is_file(), proc.stderr[-2000:]
    return out


def _artefacts(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file() and "assets" not in p.relative_to(out).parts)


def test_report_pages_copies_and_ledger_leak_nothing(report):
    names = {p.relative_to(report).as_posix() for p in _artefacts(report)}
    assert {"a_script.html", "b_bare.html", "ipynb/a_script.ipynb", "ipynb/b_bare.ipynb", "ledger.json"} <= names
    leaks = {p.relative_to(report).as_posix(): _leaks(p.read_text(errors="replace")) for p in _artefacts(report)}
    assert {k: v for k, v in leaks.items() if v} == {}
    statement = json.loads((report / "ledger.json").read_text())["hypotheses"][0]["statement"]
    assert statement.startswith("login by sshpass -p ") and MASK in statement


def test_a_bare_token_is_masked_in_the_copy_as_on_the_page(report):
    copy = nbformat.read(report / "ipynb" / "b_bare.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in copy.cells for o in c.get("outputs", []))
    assert printed.strip() == MASK
    assert WANDB_KEY not in (report / "b_bare.html").read_text()


def test_report_keeps_the_decoys(report):
    copy = nbformat.read(report / "ipynb" / "a_script.ipynb", as_version=4)
    cell = next(c for c in copy.cells if c.source.startswith("!cat"))
    printed = "".join(o.get("text", "") for o in cell.outputs)
    assert "sshpass -p " in printed
    assert [d for d in CMDLINE_DECOYS if d not in printed] == []
