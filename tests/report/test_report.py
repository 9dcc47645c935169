"""The report runner on small project-written notebooks: real kernels, real nbconvert, real Chromium."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import nbformat
import pytest

from kit import report
from kit.errors import NotebookFailed, ReportError
from kit.redact import redact_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Secrets planted in sources, stdout, HTML tables, tracebacks, widget state and markdown.
HF = "hf_" + "Zq8Xy3Kw9LmN2pQr5StUv7WxYz1AbCdEfG"
GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PASSWORD = "correct-horse-battery-9431"
BEARER = "eyJhbGciOiJIUzI1NiJ9" + ".c2VjcmV0LXBheWxvYWQ"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB"
SECRETS = (HF, GH, PASSWORD, BEARER, KEY_BODY, "s3cr3t-db-pass", "zebra-crossing-771", "mango-tango-5512")


def _nb(cells, params=None):
    nb = nbformat.v4.new_notebook()
    out = []
    if params is not None:
        p = nbformat.v4.new_code_cell(params)
        p.metadata["tags"] = ["parameters"]
        out.append(p)
    for c in cells:
        out.append(nbformat.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else nbformat.v4.new_code_cell(c))
    nb.cells = out
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A session and four tiny notebooks: plots + widget + ledger, planted secrets, a failure, an index."""
    root = tmp_path_factory.mktemp("tiny")
    nbs = root / "notebooks"
    (nbs / "sess").mkdir(parents=True)
    (nbs / "sess" / "ledger.json").write_text(json.dumps({"format": 1, "hypotheses": [
        {"id": "H1", "statement": "the tiny plot rises", "verdict": "open"}]}))
    nbformat.write(_nb([
        "md:# Plot\nA plot, a widget, a verdict.",
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nys = [1, 3, 2]\nplt.plot(ys); plt.title('tiny plot'); plt.show()",
        "import ipywidgets as w\nw.IntSlider(value=7, description='rank')",
        "from kit.ledger import Ledger, confirmed_if\n"
        "Ledger.for_session(session).record('H1', evidence=f'max {max(ys)}', verdict=confirmed_if(ys[1] > ys[0]),"
        " numbers={'max': max(ys)}, source='a_plot')",
        "print('session', session, 'host', host, 'extra', globals().get('extra'))",
    ], params='session = "default"\nhost = "local"'), nbs / "a_plot.ipynb")
    nbformat.write(_nb([
        f"md:Never show `HF_TOKEN={HF}` nor password: {PASSWORD}",
        f"token = '{HF}'\nprint('export HF_TOKEN=' + token)\nprint('Authorization: Bearer {BEARER}')",
        f"import pandas as pd\npd.DataFrame({{'k': ['{GH}', 'password={PASSWORD}']}})",
        f"print('-----BEGIN OPENSSH PRIVATE KEY-----\\n{KEY_BODY}\\n-----END OPENSSH PRIVATE KEY-----')",
        "import ipywidgets as w\nw.Text(value='DB_PASSWORD=s3cr3t-db-pass')",
        "from IPython.display import HTML\nHTML('<pre>' + {'HF_TOKEN': token}.__repr__() + '</pre>')",
        # A pygments-highlighted slice splits `api_key = "..."` across spans; its text/plain does not.
        "import kit\nkit.source.slice(kit.connect('local'), 'sess/settings.py', 1, 3)",
        "from kit.ledger import Ledger\n"
        "Ledger.for_session(session).record('H9', statement='x', evidence='api_key=mango-tango-5512')",
    ], params='session = "default"\nhost = "local"'), nbs / "b_secrets.ipynb")
    (nbs / "sess" / "settings.py").write_text('HOST = "gpu-box"\napi_key = "mango-tango-5512"\nPORT = 30000\n')
    nbformat.write(_nb([
        "print('before the failure')",
        # The traceback shows this source line with ANSI colour codes inside `password="..."`.
        f"def connect(password):\n    raise RuntimeError('probe failed with HF_TOKEN={HF}')\n"
        "connect(password=\"zebra-crossing-771\")",
        "print('never runs')",
    ], params='session = "default"\nhost = "local"'), nbs / "c_fails.ipynb")
    nbformat.write(_nb([
        "md:# Headlines",
        "from kit.ledger import Ledger\nLedger.for_session(session)",
    ], params='session = "default"\nhost = "local"'), nbs / "index.ipynb")
    out = root / "report"
    rep = report.build(nbs / "sess", out, notebooks=nbs, host="gpu-box", progress=None, cell_timeout=120)
    return {"root": root, "nbs": nbs, "out": out, "report": rep}


def test_runs_every_notebook_and_reports_the_failure(tiny):
    rep = tiny["report"]
    assert [r.name for r in rep.runs] == ["a_plot", "b_secrets", "c_fails", "index"]
    assert [r.name for r in rep.failed] == ["c_fails"]
    bad = rep.failed[0]
    assert bad.failed_cell == 4  # In[1] parameters, In[2] injected parameters, In[3] print, In[4] raise
    assert bad.error.startswith("RuntimeError: probe failed with HF_TOKEN=***REDACTED***")
    with pytest.raises(NotebookFailed, match=r"c_fails cell In\[4\]: RuntimeError"):
        rep.raise_for_failures()
    page = (tiny["out"] / "c_fails.html").read_text()
    assert "This notebook failed" in page and "kit-failed-cell" in page
    assert "RuntimeError" in page and "probe failed" in page  # the traceback is on the page
    nb = nbformat.read(tiny["out"] / "ipynb" / "c_fails.ipynb", as_version=4)
    assert nb.cells[-1].source == "print('never runs')" and nb.cells[-1].outputs == []


def test_parameters_and_ledger_reach_the_notebooks(tiny):
    page = (tiny["out"] / "a_plot.html").read_text()
    assert "session sess host gpu-box extra None" in page
    ledger = json.loads((tiny["out"] / "ledger.json").read_text())
    h1 = ledger["hypotheses"][0]
    assert (h1["id"], h1["verdict"], h1["numbers"]) == ("H1", "confirmed", {"max": 3})
    # The session's own ledger is untouched by a report run.
    assert json.loads((tiny["nbs"] / "sess" / "ledger.json").read_text())["hypotheses"][0]["verdict"] == "open"
    index = (tiny["out"] / "index.html").read_text()
    assert "decode-kit report" in index and "kit-ledger" in index and "the tiny plot rises" in index
    for name in ("a_plot.html", "b_secrets.html", "c_fails.html"):
        assert f"href='{name}'" in index
    summary = json.loads((tiny["out"] / "report.json").read_text())
    assert summary["generator"] == "decode-kit" and [n["ok"] for n in summary["notebooks"]] == [True, True, False, True]


def test_plots_are_embedded_and_assets_are_local(tiny):
    page = (tiny["out"] / "a_plot.html").read_text()
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/]{1000}', page)
    assert 'src="assets/require.js"' in page and "assets/embed-amd.js" in page
    for cdn in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net"):
        for f in tiny["out"].glob("*.html"):
            assert cdn not in f.read_text(), (cdn, f.name)
    assert (tiny["out"] / "assets" / "embed-amd.js").stat().st_size > 1_000_000


def test_planted_secrets_never_reach_the_report(tiny):
    files = [p for p in tiny["out"].rglob("*") if p.is_file() and p.parent.name != "assets"]
    assert len(files) >= 8
    for f in files:
        text = f.read_text(errors="replace")
        for secret in SECRETS:
            assert secret not in text, f"{secret[:6]}... leaked into {f.relative_to(tiny['out'])}"
    page = (tiny["out"] / "b_secrets.html").read_text()
    assert page.count("REDACTED") >= 6


@pytest.mark.chromium
def test_exported_pages_render_offline_in_chromium(tiny, tmp_path):
    from PIL import Image

    from kit.report._browser import load

    shot = tmp_path / "a_plot.png"
    loaded = load(tiny["out"] / "a_plot.html", screenshot=shot)
    assert loaded.requests == [], f"the page made network requests: {loaded.requests}"
    img = Image.open(shot).convert("L")
    hist = img.histogram()
    non_white = sum(hist[:240]) / (img.width * img.height)
    # The code is folded: the plot (axes, line, labels) and the slider are what shows; a page that drew
    # nothing but its navigation bar stays under 0.3%.
    assert non_white > 0.006, f"screenshot looks blank ({non_white:.1%} non-white pixels)"
    # The plot is an <img> with a data URI; the widget rendered from the vendored html-manager.
    assert 'src="data:image/png;base64,' in loaded.dom
    assert "widget-slider" in loaded.dom and 'class="widget-readout"' in loaded.dom
    for name in ("index.html", "b_secrets.html", "c_fails.html"):
        assert load(tiny["out"] / name).requests == [], name


@pytest.mark.chromium
def test_netlog_check_catches_a_cdn_page(tiny, tmp_path):
    """Control: the default nbconvert export loads require.js from a CDN, and the check sees it."""
    from nbconvert import HTMLExporter

    from kit.report._browser import load

    nb = nbformat.read(tiny["out"] / "ipynb" / "a_plot.ipynb", as_version=4)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    page = tmp_path / "cdn.html"
    page.write_text(body)
    requests = load(page, budget_ms=2000).requests
    assert any("cdnjs.cloudflare.com" in u for u in requests), requests


def test_existing_report_is_replaced_whole_and_foreign_dirs_are_refused(tmp_path, tiny):
    nbs = tmp_path / "nbs"
    (nbs / "s").mkdir(parents=True)
    nbformat.write(_nb(["print('hello')"], params='session = "x"\nhost = "local"'), nbs / "one.ipynb")
    out = tmp_path / "out"
    report.build(nbs / "s", out, notebooks=nbs, progress=None)
    (out / "stale.html").write_text("old page")
    report.build(nbs / "s", out, notebooks=nbs, progress=None)
    assert not (out / "stale.html").exists() and (out / "one.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nbs", "out"]  # no temp dirs left
    foreign = tmp_path / "mydocs"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(ReportError, match="not a kit report"):
        report.build(nbs / "s", foreign, notebooks=nbs, progress=None)
    assert (foreign / "thesis.tex").read_text() == "precious" and len(list(foreign.iterdir())) == 1


def test_failure_before_swap_leaves_old_report(tmp_path, monkeypatch):
    nbs = tmp_path / "nbs"
    (nbs / "s").mkdir(parents=True)
    nbformat.write(_nb(["print('hello')"]), nbs / "one.ipynb")
    out = tmp_path / "out"
    report.build(nbs / "s", out, notebooks=nbs, progress=None)
    before = sorted(p.name for p in out.iterdir())
    from kit.report import _export as _report_export

    def broken(*a, **k):
        raise ReportError("export exploded")

    monkeypatch.setattr(_report_export, "export", broken)
    with pytest.raises(ReportError, match="export exploded"):
        report.build(nbs / "s", out, notebooks=nbs, progress=None)
    assert sorted(p.name for p in out.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nbs", "out"]


def test_cell_timeout_fails_the_notebook_with_a_page(tmp_path):
    nbs = tmp_path / "nbs"
    (nbs / "s").mkdir(parents=True)
    nbformat.write(_nb(["print('start')", "import time\ntime.sleep(60)"]), nbs / "slow.ipynb")
    rep = report.build(nbs / "s", tmp_path / "out", notebooks=nbs, progress=None, cell_timeout=3)
    assert not rep.ok and "CellTimeoutError" in rep.failed[0].error
    assert rep.runs[0].seconds < 30
    assert "This notebook failed" in (tmp_path / "out" / "slow.html").read_text()


def test_dead_kernel_and_broken_ledger_still_give_pages(tmp_path):
    nbs = tmp_path / "nbs"
    (nbs / "s").mkdir(parents=True)
    nbformat.write(_nb(["import os\nos._exit(3)"]), nbs / "crash.ipynb")
    nbformat.write(_nb(["import os\nopen(os.environ['KIT_LEDGER'], 'w').write('{broken')"]), nbs / "spoil.ipynb")
    rep = report.build(nbs / "s", tmp_path / "out", notebooks=nbs, progress=None, cell_timeout=60)
    crash = rep.runs[0]
    assert not crash.ok and crash.error.startswith("DeadKernelError")
    assert rep.runs[1].ok
    assert "This notebook failed" in (tmp_path / "out" / "crash.html").read_text()
    assert "The ledger could not be read" in (tmp_path / "out" / "index.html").read_text()


def test_cli_exits_nonzero_naming_the_failed_notebook(tiny, tmp_path):
    out = tmp_path / "cli-report"
    proc = subprocess.run(
        [sys.executable, "-m", "kit", "report", "--session", str(tiny["nbs"] / "sess"), "--out", str(out),
         "--notebooks", str(tiny["nbs"]), "--no-input", "-p", "extra=[1, 2]", "--pdf"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1
    assert "c_fails failed at cell In[4]" in proc.stderr
    assert "[1/4] a_plot" in proc.stderr and "[4/4] index" in proc.stderr
    page = (out / "a_plot.html").read_text()
    assert "plt.plot" not in page  # --no-input hides code
    assert "extra [1, 2]" in page  # -p NAME=VALUE reaches every notebook as a Python literal
    assert HF not in proc.stderr + proc.stdout
    assert (out / "report.pdf").stat().st_size > 10_000 and "report.pdf" in proc.stderr  # --pdf, failure or not


@pytest.mark.chromium
def test_the_pdf_is_redacted_like_the_pages(tiny, tmp_path):
    """The PDF prints the redacted pages: no planted secret in its text or bytes, the failed notebook's
    page is in it; a page that still shows a secret the build found is refused, not printed."""
    import shutil

    from pypdf import PdfReader

    from kit.report._pdf import write_pdf

    pdf = write_pdf(tiny["out"], tmp_path / "tiny.pdf", secrets=SECRETS)
    reader = PdfReader(pdf)
    assert [o.title for o in reader.outline] == ["index", "a_plot", "b_secrets", "c_fails"]
    text = "".join(p.extract_text() for p in reader.pages)
    assert "REDACTED" in text and "This notebook failed" in text
    for secret in SECRETS:
        assert secret not in text and secret.encode() not in pdf.read_bytes(), secret[:6]
    leaky = tmp_path / "leaky"
    shutil.copytree(tiny["out"], leaky)
    page = leaky / "a_plot.html"
    page.write_text(page.read_text().replace("</main>", f"<p>{HF}</p></main>"))
    with pytest.raises(ReportError, match=r"tiny.pdf: 1 secret value\(s\) .* still read in the PDF; not written"):
        write_pdf(leaky, tmp_path / "tiny.pdf", secrets=[HF])


def test_missing_session_and_assets_give_one_line_errors(tmp_path, monkeypatch):
    with pytest.raises(ReportError, match=r"session .*nope: not a directory"):
        report.build(tmp_path / "nope", tmp_path / "out", progress=None)
    nbs = tmp_path / "nbs"
    (nbs / "s").mkdir(parents=True)
    nbformat.write(_nb(["1"]), nbs / "one.ipynb")
    from kit.report import _assets as _report_assets

    monkeypatch.setattr(_report_assets, "VENDOR_DIR", tmp_path / "empty")
    monkeypatch.setattr(_report_assets.check_vendored, "__defaults__", (tmp_path / "empty",))
    with pytest.raises(ReportError, match="run 'make assets'"):
        report.build(nbs / "s", tmp_path / "out", notebooks=nbs, progress=None)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, secret", [
    (f"export HF_TOKEN={HF}", HF),
    ("curl -H 'Authorization: Bearer abc.def-ghi' url", "abc.def-ghi"),
    ('{"password": "hunter2"}', "hunter2"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI"),
    ("git clone https://bob:pa55w0rd@example.com/r.git", "pa55w0rd"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----", "MIIEow"),
    ("sglang --api-key sk-abcdefghijklmnopqrstuvwx", "abcdefghijklmnop"),
    ('os.environ["HF_TOKEN"] = "plain-secret-value"', "plain-secret-value"),
    ("db_password = 'quiet-harbour-42'", "quiet-harbour-42"),
    ("secret_key=noisy-river-17", "noisy-river-17"),
    ("curl -H 'X-Api-Key: amber-fox-991' url", "amber-fox-991"),
    ('openai_api_key = "tall-cedar-808"', "tall-cedar-808"),
])
def test_redaction_patterns(text, secret):
    red, n = redact_text(text)
    assert secret not in red and n >= 1


def test_a_variable_passed_as_password_is_not_hunted_through_the_notebook():
    from kit.redact import find_secrets

    code = "pw_from_vault = vault.get('db')\nconnect(password=pw_from_vault)\nprint(len(pw_from_vault))"
    assert find_secrets(code) == set()
    red, n = redact_text(code, find_secrets(code))
    assert n == 1 and red.count("pw_from_vault") == 2  # only the kwarg position is masked


def test_code_reading_a_secret_is_not_hunted_as_a_literal():
    from kit.redact import find_secrets

    code = ('hf_token = os.environ["HF_TOKEN"]\nhome = os.environ["HOME"]\ntok = get_token(user)\n'
            'api_key = vault.read("k")')
    assert find_secrets(code) == set()
    red, _ = redact_text(code, find_secrets(code))
    assert 'home = os.environ["HOME"]' in red and "tok = get_token(user)" in red


def test_redaction_sees_through_ansi_and_html_markup():
    from kit.redact import find_secrets

    ansi = 'connect(password\x1b[38;5;241m=\x1b[39m\x1b[33m"zebra-crossing-771"\x1b[39m)'
    red, n = redact_text(ansi)
    assert "zebra" not in red and n == 1 and "\x1b[33m" in red  # colours kept
    spans = ('<span class="n">api_key</span> <span class="o">=</span> '
             '<span class="s2">&quot;mango-tango-5512&quot;</span>')
    secrets = find_secrets(spans)
    assert secrets == {"mango-tango-5512"}  # seen through the tags ...
    assert "mango" not in redact_text(spans)[0]  # ... and masked as a literal, on its own
    assert "mango" not in redact_text(spans, secrets)[0]


@pytest.mark.parametrize("text", [
    "Decode batch, #running-req: 1, #token: 108, token usage: 0.00, accept len: 2.17, gen throughput (token/s): 63.60",
    "Total generated tokens:                   512       ",
    "MAX_NUM_BATCHED_TOKENS=8192 NCCL_PROTO=LL NCCL_P2P_LEVEL=SYS",
    "SpecDecoding metrics: Mean acceptance length: 2.62, Accepted: 39 tokens, Drafted: 72 tokens",
    'parts = [{"item": "gap", "ms/token": gap_ms, "source": "benchmarks"}]',
    "sampling_params.max_tokens: 128, num_tokens=512",
    'if os.environ["HF_TOKEN"] == expected and HF_TOKEN == other:',  # a comparison, not an assignment
])
def test_redaction_leaves_serving_figures_alone(text):
    assert redact_text(text) == (text, 0)


def test_cli_rejects_a_malformed_param(tiny, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kit", "report", "--session", str(tiny["nbs"] / "sess"),
                           "--out", str(tmp_path / "o"), "-p", "not an identifier=1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "--param 'not an identifier=1': expected NAME=VALUE" in proc.stderr
    assert not (tmp_path / "o").exists()
