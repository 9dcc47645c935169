"""Build / execute_notebook / discover: run the notebooks and write the report (documented in the package docstring)."""
from __future__ import annotations

import ast
import contextlib
import datetime as _dt
import html as _html
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from papermill.parameterize import parameterize_notebook

from kit.errors import LedgerError, NotebookFailed, ReportError
from kit.ledger import LEDGER_ENV, Ledger
from kit.redact import notebook_secrets, redact_json_text, redact_notebook, redact_text
from kit.report import _assets as assets
from kit.report import _export as export
from kit.report._pdf import PDF_NAME, write_pdf
from kit.util import kit_version

MARKER = "report.json"  # written into every report; only directories holding it are replaced
DEFAULT_CELL_TIMEOUT = 300.0


@dataclass
class NotebookRun:
    """What happened to one notebook: status, time, page, and the failing cell if any."""

    name: str
    ok: bool
    seconds: float
    page: str = ""  # relative URL of the exported page in the report
    failed_cell: int | None = None  # execution count (In [N]) of the failing cell
    cell_index: int | None = None  # index of the failing cell in the executed notebook
    error: str = ""  # "ename: evalue" (redacted)
    redactions: int = 0

    def __repr__(self) -> str:
        status = "ok" if self.ok else f"FAILED at cell In[{self.failed_cell}]: {self.error}"
        return f"NotebookRun({self.name}: {status}, {self.seconds:.1f} s)"


@dataclass
class Report:
    """The result of :func:`build`: where the report is and how each notebook went."""

    out: Path
    runs: list[NotebookRun] = field(default_factory=list)
    seconds: float = 0.0
    pdf: Path | None = None  # the whole report as one PDF (``build(pdf=True)``), else None

    @property
    def failed(self) -> list[NotebookRun]:
        return [r for r in self.runs if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        """Raise NotebookFailed naming the first failed notebook and cell (the pages are written)."""
        if self.failed:
            first = self.failed[0]
            names = ", ".join(r.name for r in self.failed)
            raise NotebookFailed(f"{len(self.failed)} notebook(s) failed: {names}; first: {first.name} cell "
                                 f"In[{first.failed_cell}]: {first.error} (page: {self.out / first.page})",
                                 notebook=first.name, cell=first.failed_cell)

    def __repr__(self) -> str:
        return (f"Report({self.out.name!r}, {len(self.runs)} notebooks, {len(self.failed)} failed, "
                f"{self.seconds:.1f} s)")


# --------------------------------------------------------------------------------------- discovery
def discover(notebooks_dir: str | os.PathLike[str]) -> list[Path]:
    """The notebooks of a report, in run order: sorted by name, ``index.ipynb`` last."""
    d = Path(notebooks_dir)
    if not d.is_dir():
        raise ReportError(f"notebooks directory {d}: not a directory")
    found = sorted(p for p in d.glob("*.ipynb") if not p.name.startswith("."))
    if not found:
        raise ReportError(f"notebooks directory {d}: no .ipynb files")
    return _index_last(found)


def _index_last(paths: list[Path]) -> list[Path]:
    return [p for p in paths if p.stem != "index"] + [p for p in paths if p.stem == "index"]


# --------------------------------------------------------------------------------------- execution
@contextlib.contextmanager
def _interrupts(noted: list[int]):
    """While a notebook runs outside nbclient's event loop (starting, stopping): a SIGINT (Ctrl-C) is
    noted, then raised as usual; yields the notes, so a caller can tell an interrupt from the errors
    nbclient's cleanup turns it into. Only in the main thread, where signal handlers live."""
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def on_interrupt(signum, frame):
        noted.append(signum)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield noted
    except KeyboardInterrupt:
        noted.append(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, before)


def _run_client(client, kernel_env: dict, cell_timeout: float) -> tuple[str, str] | None:
    """Execute the notebook; the failure as (error name, message), or None. The kernel's own stderr
    goes to a temporary file, read back when the kernel dies: a kernel interrupted while starting (the
    kernel manager interrupts it on every shutdown, a Ctrl-C's too) would print its traceback among
    the report's lines."""
    with tempfile.TemporaryFile("w+", prefix="kit-kernel-") as log:
        try:
            client.execute(env=kernel_env, stderr=log)
        except CellExecutionError as exc:
            return (getattr(exc, "ename", "") or "CellExecutionError", getattr(exc, "evalue", "") or str(exc))
        except CellTimeoutError:
            return ("CellTimeoutError", f"cell did not finish within {cell_timeout:g} s (per-cell timeout)")
        except DeadKernelError as exc:
            log.seek(0)
            last = [x for x in log.read().splitlines() if x.strip()][-1:]
            return ("DeadKernelError", f"the kernel died: {exc}" + (f" (it said: {last[0][:300]})" if last else ""))
        except Exception as exc:  # kernel could not start, or a message-level failure
            return (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    return None


def execute_notebook(path: str | os.PathLike[str], *, parameters: Mapping[str, Any] | None = None,
                     cwd: str | os.PathLike[str] | None = None, cell_timeout: float = DEFAULT_CELL_TIMEOUT,
                     env: Mapping[str, str] | None = None) -> tuple[Any, NotebookRun]:
    """Run one notebook in a fresh kernel; return the executed notebook and its :class:`NotebookRun`.

    Parameters are injected after the cell tagged ``parameters`` (papermill's rules). Execution
    stops at the first failing cell (an exception, a cell timeout, a dead kernel); that notebook is
    returned with the error in the cell's outputs, a banner at the top and an anchor at the cell.
    The kernel runs with ``KIT_RUNS=off`` (unless ``env`` sets it): a report never records into the user's
    run catalogue (notebook 06 turns recording on into a catalogue of its own).
    """
    path = Path(path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for bad files
        raise ReportError(f"notebook {path}: cannot read ({type(exc).__name__}: {exc})") from exc
    if parameters:
        for cell in nb.cells:  # papermill reads .metadata.tags and .metadata.papermill unguarded
            cell.metadata.setdefault("tags", [])
        nb.metadata.setdefault("papermill", {})
        nb = parameterize_notebook(nb, dict(parameters), kernel_name="python3", language="python")
    current = {"index": None}

    def on_cell_start(cell: Any = None, cell_index: int | None = None, **_: Any) -> None:
        current["index"] = cell_index

    kernel_env = dict(os.environ)
    kernel_env["KIT_RUNS"] = "off"
    kernel_env.update(dict(env or {}))
    kernel_env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    client = NotebookClient(nb, timeout=cell_timeout, startup_timeout=60.0, kernel_name="python3",
                            resources={"metadata": {"path": str(Path(cwd or path.parent))}}, allow_errors=False,
                            record_timing=False, on_cell_start=on_cell_start,
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no TCP-without-encryption warning
    t0 = time.perf_counter()
    # a Ctrl-C: noted by our handler, or by nbclient's own (it installs one on its event loop while a
    # kernel runs, cleans the kernel up and lets the cell fail, as an AssertionError or a cancelled
    # wait): either way the build stops here, the notebook is not recorded as failed, the next one
    # does not start
    noted: list[int] = []
    try:
        with _interrupts(noted):
            failure = _run_client(client, kernel_env, cell_timeout)
    except BaseException:
        if not (noted or getattr(client, "_async_cleanup_kernel_future", None) is not None):
            raise
        raise KeyboardInterrupt from None
    if noted or getattr(client, "_async_cleanup_kernel_future", None) is not None:
        raise KeyboardInterrupt
    seconds = time.perf_counter() - t0
    run = NotebookRun(name=path.stem, ok=failure is None, seconds=seconds)
    if failure:
        idx = current["index"] if current["index"] is not None else 0
        _mark_failure(nb, idx, *failure)
        run.error = f"{failure[0]}: {failure[1]}".strip().rstrip(":")
        cell = nb.cells[idx + 2] if idx + 2 < len(nb.cells) else None  # after banner + anchor
        run.failed_cell = cell.get("execution_count") if cell is not None else None
        run.cell_index = idx
    return nb, run


def _mark_failure(nb: Any, idx: int, ename: str, evalue: str) -> None:
    """Make the failure visible: an error output if the cell has none, an anchor and a top banner."""
    if idx < len(nb.cells):
        cell = nb.cells[idx]
        outputs = cell.setdefault("outputs", []) if cell.get("cell_type") == "code" else None
        if outputs is not None and not any(o.get("output_type") == "error" for o in outputs):
            outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                                  traceback=[f"{ename}: {evalue}"]))
        count = cell.get("execution_count")
    else:
        count = None
    anchor = nbformat.v4.new_markdown_cell("<a id='kit-failed-cell'></a>\n**The notebook failed in the next cell.**")
    first = evalue.splitlines()[0] if evalue else ""
    banner = nbformat.v4.new_markdown_cell(
        "<div style='border:2px solid #cf222e;background:#ffebe9;padding:8px 12px;border-radius:6px'>"
        f"<b>This notebook failed</b> at cell In [{count if count is not None else '?'}]: "
        f"<code>{_html.escape(ename)}: {_html.escape(first)}</code>. "
        "<a href='#kit-failed-cell'>Jump to the failing cell</a>; cells after it did not run.</div>")
    for c in (anchor, banner):
        c.metadata["tags"] = ["kit-failure"]
    nb.cells.insert(idx, anchor)
    nb.cells.insert(0, banner)


# --------------------------------------------------------------------------------------- report
def _progress_default(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ReportError(f"report directory {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not _is_report(out):
        raise ReportError(f"report directory {out}: exists, is not empty and is not a kit report (no {MARKER}); "
                          "refusing to replace it, choose another --out")


def _is_report(out: Path) -> bool:
    try:
        return json.loads((out / MARKER).read_text()).get("generator") == "decode-kit"
    except (OSError, ValueError, AttributeError):
        return False


def _swap_in(tmp: Path, out: Path) -> None:
    """Replace ``out`` by ``tmp``: rename the old one aside, rename the new one in, then delete the old."""
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.rename(out, old)
        try:
            os.rename(tmp, out)
        except OSError:
            os.rename(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out)


def _rel_for_kernel(path: Path, cwd: Path) -> str:
    """Paths under the notebooks' directory are passed relative (short, machine-independent)."""
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path.resolve())


def build(session: str | os.PathLike[str], out: str | os.PathLike[str] = "report", *,
          notebooks: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
          host: str = "local", no_input: bool = False, cell_timeout: float = DEFAULT_CELL_TIMEOUT,
          parameters: Mapping[str, Any] | None = None,
          progress: Callable[[str], None] | None = _progress_default, pdf: bool = False) -> Report:
    """Execute the notebooks on ``session``, export them to ``out`` and write ``index.html``.

    ``notebooks`` is a directory (default: the project's ``notebooks/``, else ``./notebooks``) or a list of
    notebook files. Every notebook receives ``session`` and ``host`` as papermill parameters, plus
    ``parameters``; ``KIT_LEDGER`` in its environment names the report's copy of the ledger. Failed notebooks
    are listed in ``report.failed`` (``raise_for_failures()`` turns them into NotebookFailed); ReportError when
    nothing can be written (missing session, assets or notebooks, an ``out`` that is not a kit report).
    ``pdf=True`` also writes the whole report as one PDF, ``<out>/report.pdf``, redacted like the pages.
    """
    say = progress or (lambda _m: None)
    t_start = time.perf_counter()
    session = Path(session)
    if not session.is_dir():
        raise ReportError(f"session {session}: not a directory")
    out = Path(out)
    paths = _resolve_notebooks(notebooks, session)
    _check_out(out)
    assets.check_vendored()

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        assets.copy_assets(tmp / "assets")
        ledger_file = tmp / "ledger.json"
        if (session / "ledger.json").is_file():
            shutil.copyfile(session / "ledger.json", ledger_file)
        nb_dir = paths[0].parent
        base_params = {"session": _rel_for_kernel(session, nb_dir), "host": host}
        base_params.update(dict(parameters or {}))
        # This machine's directories, shown relative on the pages: the session by its name, the checkout as '.'.
        local_roots = {str(session.resolve()): session.name, str(nb_dir.resolve().parent): "."}
        executed = _execute_all(paths, base_params, ledger_file, local_roots, cell_timeout, say)
        runs = [r for _, _, r, _ in executed]
        secrets = _export_all(tmp, executed, ledger_file, local_roots, no_input=no_input,
                              index=lambda ledger: _index_block(runs, ledger, session, host,
                                                                time.perf_counter() - t_start))
        report = Report(out=out, runs=runs, seconds=time.perf_counter() - t_start)
        (tmp / MARKER).write_text(json.dumps(_summary(report, session, host), indent=2) + "\n")
        if pdf:
            say(f"kit report: printing {len(runs)} pages to {out}/{PDF_NAME} ...")
            write_pdf(tmp, secrets=secrets)
            report.pdf = out / PDF_NAME
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report.seconds = time.perf_counter() - t_start
    say(f"kit report: wrote {out}/index.html ({len(runs)} notebooks, {len(report.failed)} failed, "
        f"{report.seconds:.1f} s)" + (f" and {report.pdf}" if report.pdf else ""))
    return report


def _execute_all(paths: list[Path], params: dict[str, Any], ledger_file: Path, local_roots: Mapping[str, str],
                 cell_timeout: float, say: Callable[[str], None]) -> list[tuple[Path, Any, NotebookRun, set[str]]]:
    """Run every notebook in turn; tidy what it shows (one parameters cell, relative paths) and find
    the secrets in it (each notebook's own set; they are masked everywhere in :func:`_export_all`)."""
    executed = []
    for i, path in enumerate(paths, 1):
        say(f"kit report: [{i}/{len(paths)}] {path.stem} ...")
        nb, run = execute_notebook(path, parameters=params, cwd=path.parent, cell_timeout=cell_timeout,
                                   env={LEDGER_ENV: str(ledger_file.resolve())})
        _one_parameters_cell(nb)
        _relative_paths(nb, local_roots)
        secrets = notebook_secrets(nb)
        run.error = redact_text(run.error, secrets)[0]
        run.page = "index.html" if path.stem == "index" else f"{path.stem}.html"
        status = "ok" if run.ok else f"FAILED at cell In[{run.failed_cell}]: {run.error}"
        say(f"kit report: [{i}/{len(paths)}] {path.stem} {status} ({run.seconds:.1f} s)")
        executed.append((path, nb, run, secrets))
    return executed


def _export_all(tmp: Path, executed: list[tuple[Path, Any, NotebookRun, set[str]]], ledger_file: Path,
                local_roots: Mapping[str, str], *, no_input: bool, index: Callable[[Any], str]) -> set[str]:
    """Write every page, the redacted ledger copy and the ipynb copies into ``tmp``; ``index(ledger)``
    gives the index block (``None``: without the ledger, which the index notebook shows itself).
    Returns the secret values masked (the PDF is checked for them too)."""
    runs = [r for _, _, r, _ in executed]
    # A value recognised in one notebook (quoted, after a flag) is masked in all of them, where
    # another prints it bare: every page, ipynb copy and the ledger get the same set.
    all_secrets: set[str] = set().union(*(sec for *_, sec in executed))
    for _, nb, run, _ in executed:
        run.redactions, _ = redact_notebook(nb, all_secrets, scan=False)
        run.error = redact_text(run.error, all_secrets)[0]
    if ledger_file.is_file():  # verdict evidence is notebook output too
        raw = ledger_file.read_bytes().decode("utf-8", "replace")
        text, n = redact_json_text(_replace_roots(raw, local_roots, json_escaped=True), all_secrets)
        if n or text != raw:
            ledger_file.write_text(text, encoding="utf-8")
    pages = [(("index" if r.page == "index.html" else r.name), r.page, r.ok) for r in runs]
    if not any(r.page == "index.html" for r in runs):
        pages.insert(0, ("index", "index.html", True))
    try:
        ledger: Any = Ledger.open(ledger_file)
    except LedgerError as exc:  # a notebook left it unreadable: say so on the index, keep the pages
        ledger = exc
    exporter = export.make_exporter(no_input=no_input)
    (tmp / "ipynb").mkdir()
    for path, nb, run, _ in executed:
        top = export.nav_html(pages, run.page)
        if run.page == "index.html":  # the index notebook shows the ledger itself
            top += index(ledger if isinstance(ledger, Exception) else None)
        on_page: set[str] = set()
        page, extra = export.export(exporter, nb, title=path.stem, top_block=top, secrets=all_secrets, found=on_page)
        run.redactions += extra
        if run.page == "index.html":
            page = _place_runs(page)
        elif not isinstance(ledger, Exception):
            page = _mark_revised(page, ledger)
        if on_page:  # seen only once rendered: the notebook copy must not keep it either
            redact_notebook(nb, all_secrets | on_page, scan=False)
        (tmp / run.page).write_text(page, encoding="utf-8")
        nbformat.write(nb, tmp / "ipynb" / path.name)
    if not any(r.page == "index.html" for r in runs):
        block = export.nav_html(pages, "index.html") + index(ledger)
        page, _ = export.redact_html(export.standalone_page("decode-kit report", block), all_secrets)
        (tmp / "index.html").write_text(page, encoding="utf-8")
    return all_secrets


def _resolve_notebooks(notebooks: Any, session: Path) -> list[Path]:
    if notebooks is None:
        # the project's own notebooks (beside the kit package), else ./notebooks; never whatever
        # *.ipynb happen to sit beside the session directory
        candidates = [Path(__file__).resolve().parents[2] / "notebooks", Path("notebooks"),
                      session.resolve().parent]  # the last only for an installed kit without its notebooks
        for c in candidates:
            if c.is_dir() and any(c.glob("*.ipynb")):
                return discover(c)
        raise ReportError(f"no notebooks found (looked in {candidates[0]}, ./notebooks and beside the session); "
                          "pass --notebooks DIR")
    if isinstance(notebooks, (str, os.PathLike)):
        return discover(notebooks)
    paths = [Path(p) for p in notebooks]
    for p in paths:
        if not p.is_file():
            raise ReportError(f"notebook {p}: not a file")
    if not paths:
        raise ReportError("no notebooks given")
    return _index_last(paths)


def _one_parameters_cell(nb: Any) -> None:
    """Show the parameters once: papermill adds an ``injected-parameters`` cell after the notebook's own
    ``parameters`` cell. The values given are written into the notebook's cell, each in place of its
    default, keeping the comments that explain it; the injected cell is dropped. Where the notebook's
    cell cannot be rewritten (a value spread over lines it cannot parse), its defaults are dropped instead."""
    tagged = {t: i for i, c in enumerate(nb.cells) for t in c.get("metadata", {}).get("tags", [])
              if t in ("parameters", "injected-parameters")}
    if "injected-parameters" not in tagged or "parameters" not in tagged:
        return
    own, injected = nb.cells[tagged["parameters"]], nb.cells[tagged["injected-parameters"]]
    try:
        given = {n.targets[0].id: ast.get_source_segment(injected.source, n.value)
                 for n in ast.parse(injected.source).body
                 if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
        lines = own.source.splitlines()
        for node in reversed(ast.parse(own.source).body):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in given:
                name, first, last = node.targets[0].id, node.lineno - 1, node.end_lineno - 1
                tail = lines[last][node.end_col_offset:]
                lines[first:last + 1] = [f"{name} = {given.pop(name)}{tail}"]
        lines += [f"{name} = {value}  # given by kit report" for name, value in given.items()]
    except (SyntaxError, AttributeError, IndexError):
        nb.cells.pop(tagged["parameters"])
        return
    own.source = "\n".join(lines)
    own.outputs = injected.get("outputs", [])
    own.execution_count = injected.get("execution_count")
    nb.cells.pop(tagged["injected-parameters"])


def _replace_roots(text: str, roots: Mapping[str, str], *, json_escaped: bool = False) -> str:
    for root, short in sorted(roots.items(), key=lambda kv: -len(kv[0])):
        if json_escaped:
            root, short = json.dumps(root)[1:-1], json.dumps(short)[1:-1]
        text = text.replace(root + "/", short + "/").replace(root, short)
    return text


def _relative_paths(nb: Any, roots: Mapping[str, str]) -> None:
    """Outputs name this machine's session and checkout directories by their short names (a report is
    read elsewhere: the absolute paths of the machine that made it say nothing there)."""
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if "text" in out:
                out["text"] = _replace_roots(out["text"], roots)
            for mime, value in out.get("data", {}).items():
                if isinstance(value, str) and mime.startswith("text/"):
                    out["data"][mime] = _replace_roots(value, roots)


def _summary(report: Report, session: Path, host: str) -> dict[str, Any]:
    return {"generator": "decode-kit", "kit_version": kit_version(),
            "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "session": session.name, "host": host,
            "notebooks": [{"name": r.name, "ok": r.ok, "seconds": round(r.seconds, 2), "page": r.page,
                           "failed_cell": r.failed_cell, "error": r.error, "redactions": r.redactions}
                          for r in report.runs]}


def _index_block(runs: list[NotebookRun], ledger: Any, session: Path, host: str, seconds: float) -> str:
    rows = []
    for r in runs:
        status = ("<span class='kit-ok'>ok</span>" if r.ok else
                  f"<span class='kit-bad'>failed at In [{r.failed_cell}]</span>: {_html.escape(r.error)}")
        rows.append(f"<tr><td><a href='{_html.escape(r.page, quote=True)}'>{_html.escape(r.name)}</a></td>"
                    f"<td>{status}</td><td style='text-align:right'>{r.seconds:.1f} s</td></tr>")
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if ledger is None:
        ledger_html = ""
    elif isinstance(ledger, Exception):
        ledger_html = f"<p class='kit-bad'>The ledger could not be read: {_html.escape(str(ledger))}</p>"
    else:
        ledger_html = ledger.to_html() if len(ledger) else "<p>The ledger is empty.</p>"
    return (
        "<div class='kit-head'><h1>decode-kit report</h1>"
        f"<p>Session <code>{_html.escape(session.name)}</code>, host <code>{_html.escape(host)}</code>, "
        f"generated {when} by decode-kit {kit_version()} in {seconds:.0f} s.</p>"
        f"{_RUNS_START}<div class='kit-head' data-kit-block='runs'>"
        "<table><thead><tr><th>notebook</th><th>status</th><th>run time</th></tr></thead><tbody>"
        + "".join(rows) + f"</tbody></table></div>{_RUNS_END}" + ledger_html + "</div>")


# The index notebook says where the run table goes (a markdown cell holding RUNS_PLACEHOLDER, after its
# verdict cards); without one the table stays at the top of the page.
RUNS_PLACEHOLDER = '<div id="kit-runs"></div>'
_RUNS_START, _RUNS_END = "<!-- kit-runs -->", "<!-- /kit-runs -->"


# A ledger row as the page holds it (nbconvert may rewrite the attribute quotes): id, verdict, up to the
# end of the verdict cell.
_LEDGER_ROW = re.compile(r"(<tr data-kit-id=[\"']([^\"']+)[\"'] data-kit-verdict=[\"'](\w+)[\"']>"
                         r"\s*<td[^>]*>.*?</td>\s*<td[^>]*>.*?)(</td>)", re.S)


def _mark_revised(page: str, ledger: Any) -> str:
    """A hypothesis a page shows with a verdict a later notebook revised says so under its badge, with
    the ledger's verdict: the page keeps what its own notebook found, and no reader takes it for the last word."""
    def note(m: re.Match) -> str:
        h = ledger.get(_html.unescape(m.group(2)))
        if h is None or h.verdict == m.group(3):
            return m.group(0)
        return (m.group(1) + "<div class='kit-revised' style='font-size:11px;color:#57606a;margin-top:4px'>"
                f"the ledger now: <b>{_html.escape(h.verdict)}</b> ({_html.escape(h.source)}; see the index)</div>"
                + m.group(4))
    return _LEDGER_ROW.sub(note, page)


def _place_runs(page: str) -> str:
    """Move the run table of the index block to the index notebook's placeholder, if it has one."""
    at, start, end = page.find(RUNS_PLACEHOLDER), page.find(_RUNS_START), page.find(_RUNS_END)
    if at < 0 or start < 0 or end < start:
        return page
    block = page[start:end + len(_RUNS_END)]
    page = page[:start] + page[end + len(_RUNS_END):]
    return page.replace(RUNS_PLACEHOLDER, block, 1)
