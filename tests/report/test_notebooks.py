"""The investigation notebooks on the bundled sample session: committed clean, executed by a real
kernel through ``kit.report``, verdicts computed (and changing when the evidence changes), pages
rendered offline in headless Chromium."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from kit import report
from kit.ledger import LEDGER_ENV, Ledger
from tests.conftest import ROOT, SAMPLE

NOTEBOOKS = ROOT / "notebooks"
EXPECTED = ["00_environment", "01_allreduce_share", "02_backend_defaults", "03_speculative_acceptance",
            "04_single_stream_gap", "05_live_experiment", "06_run_catalogue", "07_a_vs_b", "index"]
WITH_PLOTS = ["00_environment", "01_allreduce_share", "03_speculative_acceptance", "04_single_stream_gap",
              "05_live_experiment"]


def test_committed_notebooks_are_clean_and_parameterised():
    found = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    assert found == sorted(EXPECTED)
    for path in NOTEBOOKS.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code), f"{path.name} has outputs"
        params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
        src = params[0].source
        assert re.search(r'^session = "sample"', src, re.M) and re.search(r'^host = "local"', src, re.M), path.name
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), path.name
        assert str(ROOT.parent) not in path.read_text(), f"{path.name} contains a machine path"


def test_sample_session_is_labelled():
    readme = (SAMPLE / "README.md").read_text()
    for part in ("traces/", "env/", "engine/", "logs/", "bench/", "server/", "model/", "ledger.json"):
        assert part in readme, part
    for log in (SAMPLE / "logs").glob("*.log"):
        assert log.read_text().startswith("# SAMPLE"), log.name
    for res in (SAMPLE / "bench").glob("*.json*"):
        first = res.read_text().splitlines()[0] if res.suffix == ".jsonl" else res.read_text()
        assert json.loads(first)["sample"] is True, res.name


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory):
    before = (SAMPLE / "ledger.json").read_bytes()
    out = tmp_path_factory.mktemp("sample") / "report"
    rep = report.build(SAMPLE, out, progress=None, cell_timeout=300)
    assert (SAMPLE / "ledger.json").read_bytes() == before, "a report run must not modify the session"
    return rep


def test_every_notebook_runs_on_the_sample_session(sample_report):
    assert [r.name for r in sample_report.runs] == EXPECTED
    assert sample_report.ok, [(r.name, r.error) for r in sample_report.failed]
    for name in EXPECTED:
        assert (sample_report.out / ("index.html" if name == "index" else f"{name}.html")).is_file()
    # The sample holds no secret: any redaction here would be a false positive mangling real content.
    assert [r.redactions for r in sample_report.runs] == [0] * len(EXPECTED)


def test_every_hypothesis_gets_a_computed_verdict(sample_report):
    ledger = Ledger.open(sample_report.out / "ledger.json")
    assert [h.id for h in ledger] == ["H0", "H1", "H2", "H3", "H4", "H5", "H6", "H7", "AB1", "AB2"]
    for h in ledger:
        if h.id.startswith("AB"):  # 07's causes: candidates to test (open), with the experiment that would decide
            assert h.verdict == "open" and h.source == "07_a_vs_b" and h.test.startswith("kit.experiment("), h
            assert h.provenance and all(p["kind"] == "sample" for p in h.provenance), h
            continue
        assert h.verdict in ("confirmed", "rejected") or (h.id == "H1" and h.verdict == "open"), h
        assert h.source.startswith(("00_", "01_", "02_", "03_", "04_", "05_")) and h.evidence and h.numbers, h
        assert h.provenance, f"{h.id} says nothing about where its evidence came from"
        for p in h.provenance:  # every artefact of the sample session is accounted for
            assert p["kind"] != "unknown", (h.id, p)
    # H1: the NCCL A/B saves more than the whole predicted all-reduce; the ledger says the model is
    # contradicted and the verdict rests on the A/B (a lower bound that cannot decide: open).
    h1 = ledger["H1"]
    assert h1.numbers["ab_saved_ms_per_token"] > h1.numbers["per_token_ms"]
    assert h1.verdict == "open" and any("contradicts the AllReduce model" in c for c in h1.caveats)
    # H2: the evidence names the machine it came from and says the serving host runs CUDA graphs.
    h2 = ledger["H2"]
    assert "H200" in h2.evidence and h2.numbers["cuda_graphs_on_serving_host"] is True
    assert any("not from the serving host" in c for c in h2.caveats)
    # H4: like with like: acceptance length vs break-even length, i.i.d. acceptance vs i.i.d. break-even.
    h4 = ledger["H4"].numbers
    assert ((h4["mean_acceptance_length"] > h4["break_even_length"])
            == (h4["iid_acceptance"] > h4["break_even_acceptance"]))
    assert h4["mean_acceptance_length"] < h4["break_even_length"] and ledger["H4"].verdict == "rejected"
    # Sample evidence is never called measured.
    for hid in ("H0", "H3", "H4", "H5", "H6"):
        assert ledger[hid].evidence_kind != "measured", hid
    assert ledger["H2"].evidence_kind == "mixed: measured, sample"
    # Values a reader can check against the sample's own files.
    assert ledger["H0"].numbers["compute_capability"] == "12.0" and ledger["H0"].verdict == "confirmed"
    assert ledger["H3"].numbers["is_sm100_supported"] is False
    assert "does not apply on compute capability 12.0" in ledger["H3"].evidence
    assert abs(ledger["H4"].numbers["draft_acceptance"] - (1.68 - 1) / 3) < 0.01  # 42% printed = AL 1.68 of 4
    assert ledger["H4"].numbers["printed_accept_rate"] == pytest.approx(0.42, abs=0.01)
    h5 = ledger["H5"].numbers
    assert h5["tok_s_before"] == pytest.approx(63.6) and h5["tok_s_after"] == pytest.approx(71.4)


def test_measured_is_said_only_of_measured_numbers(sample_report):
    """Outside code cells, "measured" on a page of the sample report appears only in phrases about the
    real traces (measured on the H200) or in "not measured"; the sample's logs, benchmarks and
    captures are never called measured."""
    allowed = re.compile(
        r"\(not measured\)|: not measured|predicted, not measured|measured on NVIDIA H200|measured\.json|"
        r"<b>measured</b>|<em>measured</em>|mixed: measured|step times measured outside the profiler|"
        r"no multi-rank trace measured|measured step from CUDA events|measured-on-NVIDIA-H200|<b>measured step</b>|"
        r"measured on the development machine \(tinyserve&#x27;s CPU runner|"
        r"measured on the development machine \(tinyserve's CPU runner|the trace-measured difference|"
        r"&quot;measured&quot; only for what was measured|"
        r'"measured" only for what was measured|'
        r'class=["\']kit-kind["\'][^>]*>measured</span>')  # a verdict card's badge: the ledger's own evidence kind
    for name in EXPECTED:
        page = (sample_report.out / ("index.html" if name == "index" else f"{name}.html")).read_text()
        text = re.sub(r"<script[\s\S]*?</script>|<style[\s\S]*?</style>|data:image/png;base64,[A-Za-z0-9+/=]+|"
                      r'<div class="highlight[^"]*"><pre>[\s\S]*?</pre>', "", page)  # code cells are not claims
        left = allowed.sub("", text)
        bad = [left[max(0, m.start() - 60): m.end() + 40] for m in re.finditer("measured", left)]
        assert not bad, f"{name}: 'measured' said of something not shown to be measured: {bad[:3]}"
    index = (sample_report.out / "index.html").read_text()
    assert re.search(r"<th style=[\"']text-align:left[\"']>provenance</th>", index) and "sample written to the" in index


def test_plots_are_embedded(sample_report):
    for name in WITH_PLOTS:
        page = (sample_report.out / f"{name}.html").read_text()
        assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/]{2000}', page), name
    index = (sample_report.out / "index.html").read_text()
    assert "kit-ledger" in index and "H6" in index


# Figures each page of the sample report must show: a figure lost (a closed figure whose display was
# suppressed) or drawn twice (a figure left open in pyplot and also displayed) changes the count.
IMAGES_PER_PAGE = {"00_environment": 1, "01_allreduce_share": 2, "02_backend_defaults": 0,
                   "03_speculative_acceptance": 5, "04_single_stream_gap": 5, "05_live_experiment": 2,
                   "06_run_catalogue": 0, "07_a_vs_b": 0, "index": 0}


def _page_images(page: str) -> list[tuple[int, int]]:
    """(width, height) in pixels of every <img> embedded in a page, read from the PNG header."""
    import base64
    import struct

    sizes = []
    for m in re.finditer(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/]{32})', page):
        head = base64.b64decode(m.group(1))
        sizes.append(struct.unpack(">II", head[16:24]))
    return sizes


def test_every_figure_is_on_its_page_once_and_fits_the_page_width(sample_report):
    """Images per page as the notebooks draw them, each no wider than the page's output column, so the
    page shows it at its own size and the smallest font of a kit figure stays readable there."""
    from kit.plots import MIN_FONT_PT
    from kit.report._export import PAGE_WIDTH_PX

    counts, too_wide = {}, []
    for name in EXPECTED:
        page = (sample_report.out / ("index.html" if name == "index" else f"{name}.html")).read_text()
        sizes = _page_images(page)
        counts[name] = len(sizes)
        too_wide += [(name, w) for w, _h in sizes if w > PAGE_WIDTH_PX]
    assert counts == IMAGES_PER_PAGE
    assert not too_wide, f"figures wider than the page's {PAGE_WIDTH_PX} px output column: {too_wide}"
    # At the inline backend's 100 dpi and no shrinking, the smallest text of a kit figure is this tall:
    assert MIN_FONT_PT * 100 / 72 >= 9.0


def test_parameters_and_the_ledger_are_shown_once(sample_report):
    for name in EXPECTED:
        nb = nbformat.read(sample_report.out / "ipynb" / f"{name}.ipynb", as_version=4)
        tags = [t for c in nb.cells for t in c.metadata.get("tags", [])]
        assert tags.count("parameters") == 1 and "injected-parameters" not in tags, name
        params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        assert re.search(r'^session = "sample"', params.source, re.M), name  # the value given by kit report
        committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        own = next(c for c in committed.cells if "parameters" in c.metadata.get("tags", []))
        comments = [line.split("#", 1)[1] for line in own.source.splitlines() if "#" in line]
        assert all(c in params.source for c in comments), f"{name}: the parameters' comments were lost"
    index = (sample_report.out / "index.html").read_text()
    assert len(re.findall(r"<table class=[\"']kit-ledger[\"']", index)) == 1, "the index shows the ledger twice"


def test_pages_do_not_name_this_machines_directories(sample_report):
    checkout = str(ROOT.resolve())
    for page in [*sample_report.out.glob("*.html"), sample_report.out / "ledger.json"]:
        assert checkout not in page.read_text(), f"{page.name} names {checkout}"
    page02 = (sample_report.out / "02_backend_defaults.html").read_text()
    assert "sample/engine/tinyserve/srt/server_args.py" in page02


def test_verdict_follows_the_evidence(tmp_path):
    """02 on a B200-class capture (compute capability 10.0) in a copy of the session: the sm100
    default now applies. (A session reads its own artefacts: a capture lives inside it.)"""
    import shutil

    session = tmp_path / "b200-session"
    shutil.copytree(SAMPLE, session, ignore=shutil.ignore_patterns(".kit", "__pycache__"))
    (session / "server" / "b200.csv").write_text("index, name, memory.total [MiB], compute_cap, driver_version\n"
                                                 "0, NVIDIA B200, 183359 MiB, 10.0, 580.126.20\n")
    ledger_path = tmp_path / "ledger.json"
    nb, run = report.execute_notebook(
        NOTEBOOKS / "02_backend_defaults.ipynb", cwd=NOTEBOOKS,
        parameters={"session": str(session), "host": "local", "gpu_capture": "server/b200.csv"},
        env={LEDGER_ENV: str(ledger_path)})
    assert run.ok, run.error
    h3 = Ledger.open(ledger_path)["H3"]
    assert h3.verdict == "confirmed" and h3.numbers["is_sm100_supported"] is True
    assert "applies on compute capability 10.0" in h3.evidence


@pytest.mark.chromium
def test_sample_report_renders_offline(sample_report, tmp_path):
    from PIL import Image

    from kit.report._browser import load

    shot = tmp_path / "index.png"
    for name in EXPECTED:
        page = sample_report.out / ("index.html" if name == "index" else f"{name}.html")
        loaded = load(page, screenshot=shot if name == "index" else None)
        assert loaded.requests == [], f"{name} made network requests: {loaded.requests}"
        if name == "01_allreduce_share":  # the explorer's widgets render from the vendored manager
            assert "widget-dropdown" in loaded.dom
    img = Image.open(shot).convert("L")
    non_white = sum(img.histogram()[:240]) / (img.width * img.height)
    assert non_white > 0.03, f"index screenshot looks blank ({non_white:.1%})"


@pytest.mark.chromium
def test_every_page_reads_as_a_report_at_1400_px(sample_report):
    """Opened as a teammate opens it: no sideways scroll (the page nor any box in it), no code shown
    until 'show code' is clicked, no NaN/None where a value is missing; the index shows the verdict
    cards first, then the run table, then the full ledger."""
    from kit.report._browser import layout

    for name in EXPECTED:
        seen = layout(sample_report.out / ("index.html" if name == "index" else f"{name}.html"), width=1400)
        assert seen["scroll_width"] == seen["client_width"], (name, seen["wide"])
        assert seen["scrollers"] == [] and seen["wide"] == [], (name, seen["scrollers"], seen["wide"])
        assert seen["code_total"] > 0 and seen["code_visible"] == 0, (name, seen["code_visible"])
        assert seen["missing"] == [], (name, seen["missing"])
        if name == "index":
            assert seen["order"] == ["verdicts", "runs", "ledger"]
    opened = layout(sample_report.out / "04_single_stream_gap.html", open_code=True)
    assert opened["code_visible"] == opened["code_total"] > 10  # every cell's code is one click away
    index = (sample_report.out / "index.html").read_text()
    assert len(re.findall(r"class=[\"']kit-card[\"']", index)) == 8  # H0..H7
    page01 = (sample_report.out / "01_allreduce_share.html").read_text()
    # H1 as 01 recorded it (rejected by the model) says what the ledger holds after 04's A/B.
    row = re.search(r"data-kit-id=[\"']H1[\"'] data-kit-verdict=[\"']rejected[\"']>(.*?)</tr>", page01, re.S)
    assert row and "the ledger now: <b>open</b>" in row.group(1)
    nb04 = nbformat.read(NOTEBOOKS / "04_single_stream_gap.ipynb", as_version=4)
    code04 = "\n".join(c.source for c in nb04.cells if c.cell_type == "code")
    assert not re.search(r"^\s*def ", code04, re.M) and "sess.root" not in code04


# Figures drawn by widgets from their saved state (the explorer), printed in the PDF beside the page's <img>s.
WIDGET_FIGURES = {"01_allreduce_share": 1}


@pytest.mark.chromium
def test_the_pdf_has_one_section_per_notebook_with_every_figure(sample_report, tmp_path):
    from pypdf import PdfReader

    from kit.report._pdf import write_pdf

    pdf = PdfReader(write_pdf(sample_report.out, tmp_path / "report.pdf"))
    starts = [(o.title, pdf.get_destination_page_number(o)) for o in pdf.outline]
    assert [t for t, _ in starts] == ["index"] + EXPECTED[:-1]
    ends = [p for _, p in starts[1:]] + [len(pdf.pages)]
    for (name, first), end in zip(starts, ends):
        assert end > first, name
        images = sum(len(pdf.pages[i].images) for i in range(first, end))
        assert images == IMAGES_PER_PAGE[name] + WIDGET_FIGURES.get(name, 0), name
        title = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells[0].source.splitlines()[0][2:]
        assert " ".join(title.split()[:4]) in " ".join(pdf.pages[first].extract_text().split()), name
    text = " ".join(" ".join(p.extract_text().split()) for p in pdf.pages)
    assert "show code" not in text and "NaN" not in text


@pytest.mark.gpu_fixture
def test_explorer_static_views_on_the_real_trace():
    import matplotlib

    matplotlib.use("Agg")
    import kit.profile
    from kit import env, explorer

    prof = kit.profile.load(sorted((SAMPLE / "traces" / "tp1_eager").glob("rank*.trace.json.gz")))
    decode = prof.kernels[prof.kernels["phase"] == "decode"]
    cats = explorer.category_time(prof)
    assert cats["time_us"].sum() == pytest.approx(decode["dur_us"].sum())
    assert cats["share"].sum() == pytest.approx(1.0) and cats["time_us"].is_monotonic_decreasing
    top = explorer.top_kernels(prof, category="gemm", n=3)
    assert len(top) == 3 and set(top["category"]) == {"gemm"} and top["time_us"].is_monotonic_decreasing
    one_step = explorer.top_kernels(prof, step=int(decode["step"].iloc[0]), n=100)
    assert one_step["calls"].sum() == (decode["step"] == decode["step"].iloc[0]).sum()
    assert explorer.category_plot(prof, rank=0).axes[0].get_xlabel() == "GPU time (ms)"
    topo = env.parse_topology((SAMPLE / "server" / "nvidia-smi-topo.txt").read_text())
    fig = kit.plots.link_matrix_plot(topo)
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {"PIX", "NODE", "SYS", "X"} <= labels
    widget = explorer.explore(prof)
    rank_w, step_w, cat_w = widget.children[0].children
    assert [o[0] for o in rank_w.options] == ["all", "0"] and len(step_w.options) == 17
    cat_w.value = "gemm"  # re-renders without a kernel (no error)


@pytest.mark.ssh
def test_backend_defaults_notebook_over_ssh(sshd, tmp_path):
    """02 with ``host`` an ~/.ssh/config alias of the real sshd fixture: the slices, the predicate and
    the engine's defaults are all asked of the host over SSH, and the verdict is the same."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host kitgpu\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_path}\n  IdentitiesOnly yes\n")
    (home / ".ssh" / "known_hosts").write_text(Path(sshd.known_hosts).read_text())
    ledger_path = tmp_path / "ledger.json"
    nb, run = report.execute_notebook(
        NOTEBOOKS / "02_backend_defaults.ipynb", cwd=NOTEBOOKS,
        parameters={"session": sshd.stage(SAMPLE), "host": "kitgpu"},  # readable by the sshd user
        env={LEDGER_ENV: str(ledger_path), "HOME": str(home), "KIT_KNOWN_HOSTS": sshd.kit_known_hosts})
    assert run.ok, run.error
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "kitgpu: tinyserve.srt.server_args ->" in text
    h3 = Ledger.open(ledger_path)["H3"]
    assert h3.verdict == "rejected" and "does not apply on compute capability 12.0" in h3.evidence


def test_environment_notebook_live_on_a_host_without_gpus(tmp_path):
    """00 with live=True fingerprints the host itself; this machine has no GPU, so H0 stays open."""
    ledger_path = tmp_path / "ledger.json"
    nb, run = report.execute_notebook(
        NOTEBOOKS / "00_environment.ipynb", cwd=NOTEBOOKS,
        parameters={"session": "sample", "host": "local", "live": True, "trace_captures": "no-such-dir"},
        env={LEDGER_ENV: str(ledger_path)})
    assert run.ok, run.error
    h0 = Ledger.open(ledger_path)["H0"]
    assert h0.verdict == "open" and "no GPU" in h0.evidence
