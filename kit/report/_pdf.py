"""The whole report as one PDF: every page (the index first, then the notebooks in run order) printed on its
own by headless Chromium (the print CSS leaves out the navigation bar and the folded code), joined with pypdf,
one bookmark per notebook. The pages were redacted before they were written; the PDF's text is checked once
more for the secrets the build found, and a PDF that still holds one is not written."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

from pypdf import PdfReader, PdfWriter

from kit.errors import ReportError
from kit.report._browser import _run

PDF_NAME = "report.pdf"
# Chromium's switch for a print without its header (date, title) and footer (file:// URL, page number);
# the second is the name older builds know.
_NO_HEADER = ("--no-pdf-header-footer", "--print-to-pdf-no-header")


def pages_in_order(report_dir: Path) -> list[tuple[str, Path]]:
    """(title, page) of a written report: the index first, then each notebook's page in run order."""
    try:
        summary = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"report {report_dir}: no readable report.json ({exc})") from exc
    found = [(n["name"], report_dir / n["page"]) for n in summary.get("notebooks", []) if n.get("page")]
    index = [p for p in found if p[1].name == "index.html"] or [("index", report_dir / "index.html")]
    return index[:1] + [p for p in found if p[1].name != "index.html"]


def print_page(page: Path, pdf: Path, *, timeout: float = 120.0) -> Path:
    """Print one HTML page to ``pdf`` with headless Chromium (scripts run first: widgets, figures)."""
    with tempfile.TemporaryDirectory(prefix="kit-chromium-") as tmp:
        args = [*_NO_HEADER, f"--user-data-dir={tmp}/profile", "--virtual-time-budget=5000",
                f"--print-to-pdf={pdf.resolve()}", page.resolve().as_uri()]
        proc = _run(args, timeout)
    if proc.returncode != 0 or not pdf.is_file() or pdf.stat().st_size == 0:
        raise ReportError(f"chromium could not print {page} to PDF (exit {proc.returncode}): "
                          f"{proc.stderr.strip()[-300:]}")
    return pdf


def write_pdf(report_dir: str | os.PathLike[str], pdf: str | os.PathLike[str] | None = None, *,
              secrets: Iterable[str] = ()) -> Path:
    """Print every page of the report in ``report_dir`` and join them into one PDF (default
    ``<report_dir>/report.pdf``), one bookmark per notebook; return its path. Raises ReportError when
    Chromium is missing, a page cannot be printed, or the PDF's text holds one of ``secrets``."""
    report_dir = Path(report_dir)
    target = Path(pdf) if pdf is not None else report_dir / PDF_NAME
    writer = PdfWriter()
    with tempfile.TemporaryDirectory(prefix="kit-pdf-") as tmp:
        for i, (title, page) in enumerate(pages_in_order(report_dir)):
            part = print_page(page, Path(tmp) / f"{i:02d}.pdf")
            writer.append(PdfReader(part), outline_item=title)
        writer.add_metadata({"/Title": f"decode-kit report: {report_dir.name}", "/Creator": "decode-kit"})
        joined = Path(tmp) / PDF_NAME
        with joined.open("wb") as fh:
            writer.write(fh)
        _check_secrets(joined, [s for s in secrets if s], target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(joined, target)  # a rename, or a copy where the temporary directory is on another device
    return target


def _check_secrets(pdf: Path, secrets: list[str], target: Path) -> None:
    if not secrets:
        return
    text = "".join(p.extract_text() or "" for p in PdfReader(pdf).pages)
    flat = "".join(text.split())  # a printed line may wrap inside a long value
    leaked = sum(1 for s in secrets if s in text or "".join(s.split()) in flat)
    if leaked:
        raise ReportError(f"{target}: {leaked} secret value(s) the pages masked still read in the PDF; not written")
