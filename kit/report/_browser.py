"""Open an exported page in headless Chromium: screenshot, rendered DOM, the page's own requests, its layout.

Chromium's net-log records every request of the network stack; those the *page* made carry its ``file://``
isolation key, the browser's own background traffic none: ``page_requests`` returns the former, so "the
report makes no network request" is a check on the page, not on Chromium's housekeeping."""
from __future__ import annotations

import html
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import ReportError

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium_path() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


@dataclass
class PageLoad:
    """What Chromium saw: the rendered DOM, the screenshot file and the page-initiated URLs."""

    dom: str = ""
    screenshot: Path | None = None
    requests: list[str] = field(default_factory=list)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Headless Chromium with the kit's flags and ``args``; ReportError where it is missing or hangs."""
    exe = chromium_path()
    if exe is None:
        raise ReportError("chromium not found; install it (apt-get install chromium, or 'make system-deps' as root)")
    try:
        return subprocess.run([exe, *FLAGS, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ReportError(f"chromium did not finish within {timeout:g} s: {' '.join(args[-2:])}") from exc


def load(page: str | Path, *, screenshot: str | Path | None = None, window: tuple[int, int] = (1200, 1600),
         budget_ms: int = 5000, timeout: float = 90.0) -> PageLoad:
    """Load ``page`` twice in headless Chromium (net-log + DOM dump, then screenshot)."""
    url = Path(page).resolve().as_uri()
    result = PageLoad()
    with tempfile.TemporaryDirectory(prefix="kit-chromium-") as tmp:
        netlog = Path(tmp) / "net.json"
        args = [f"--user-data-dir={tmp}/profile", f"--log-net-log={netlog}",
                f"--virtual-time-budget={budget_ms}", f"--window-size={window[0]},{window[1]}", "--dump-dom", url]
        proc = _run(args, timeout)
        if proc.returncode != 0:
            raise ReportError(f"chromium failed on {page} (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        result.dom = proc.stdout
        result.requests = page_requests(netlog)
        if screenshot is not None:
            shot = Path(screenshot).resolve()
            args = [f"--user-data-dir={tmp}/profile2", f"--virtual-time-budget={budget_ms}",
                    f"--window-size={window[0]},{window[1]}", "--hide-scrollbars", f"--screenshot={shot}", url]
            proc = _run(args, timeout)
            if proc.returncode != 0 or not shot.is_file():
                raise ReportError(f"chromium could not screenshot {page}: {proc.stderr.strip()[-300:]}")
            result.screenshot = shot
    return result


def page_requests(netlog: str | Path) -> list[str]:
    """URLs of requests the page itself started (file:// isolation key), in order, from a net-log."""
    try:
        data = json.loads(Path(netlog).read_text())
    except (OSError, ValueError):
        # Chromium may leave the closing brackets off when killed; the events list is still usable.
        text = Path(netlog).read_text().rstrip().rstrip(",")
        data = json.loads(text + "]}")
    types = {v: k for k, v in data["constants"]["logEventTypes"].items()}
    urls = []
    for ev in data.get("events", []):
        if types.get(ev.get("type")) != "URL_REQUEST_START_JOB":
            continue
        p = ev.get("params", {})
        if str(p.get("network_isolation_key", "")).startswith("file://") or p.get("initiator") == "null":
            urls.append(str(p.get("url", "")))
    return urls


# What a reader sees at a given width, measured by the page itself once it has loaded: the page's scroll
# and client widths, the elements that stick out past the page edge, the code blocks shown, and text
# cells reading NaN/None/nan. Written into the DOM as JSON, read back from --dump-dom.
_PROBE = """<script>window.addEventListener('load', function () {
 var d = document.documentElement, out = {scroll_width: d.scrollWidth, client_width: d.clientWidth,
  wide: [], code_visible: 0, code_total: 0, missing: [], order: []};
 document.querySelectorAll('table, pre, img, .jp-OutputArea-output').forEach(function (e) {
  var r = e.getBoundingClientRect();
  if (r.right > d.clientWidth + 1 && out.wide.length < 20)
   out.wide.push(e.tagName + '.' + e.className + ': ' + (e.innerText || '').slice(0, 80)); });
 function shown(e) { return e.checkVisibility
  ? e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true}) : !!e.getClientRects().length; }
 document.querySelectorAll('.jp-CodeCell .jp-InputArea').forEach(function (e) {
  out.code_total++; if (shown(e) && e.getBoundingClientRect().height > 0) out.code_visible++; });
 document.querySelectorAll('td, th, li, p, span').forEach(function (e) {
  var t = (e.innerText || '').trim();
  if (/^(NaN|nan|None|NaT|<NA>)$/.test(t) && shown(e) && !e.closest('.jp-InputArea, code, pre, .highlight')
      && !e.querySelector('code'))
   out.missing.push(t); });
 out.scrollers = [];
 document.querySelectorAll('body *').forEach(function (e) {
  var s = getComputedStyle(e).overflowX;
  if ((s == 'auto' || s == 'scroll') && e.scrollWidth > e.clientWidth + 1 && shown(e)
      && out.scrollers.length < 20)
   out.scrollers.push(e.tagName + '.' + e.className + ' ' + e.scrollWidth + '>' + e.clientWidth + ': '
                      + (e.innerText || '').slice(0, 80)); });
 document.querySelectorAll('[data-kit-block]').forEach(function (e) { out.order.push(e.dataset.kitBlock); });
 var p = document.createElement('pre'); p.id = 'kit-probe'; p.textContent = JSON.stringify(out);
 document.body.appendChild(p); });</script>"""


def layout(page: str | Path, *, width: int = 1400, height: int = 1000, open_code: bool = False,
           timeout: float = 90.0) -> dict:
    """Load ``page`` at ``width`` px in headless Chromium and return what the page measured of itself:
    ``scroll_width``/``client_width`` (equal: no sideways scroll), ``wide`` (elements past the right
    edge), ``scrollers`` (boxes that scroll sideways inside the page), ``code_visible``/``code_total``
    (code input areas shown / present), ``missing`` (cells that read NaN/None) and ``order`` (the
    ``data-kit-block`` names in page order). ``open_code`` expands every folded code cell first.
    The probe runs in a copy beside the page (same relative assets)."""
    src = Path(page)
    text = src.read_text(encoding="utf-8")
    probe = _PROBE
    if open_code:
        probe = probe.replace("var d =", "document.querySelectorAll('details').forEach(function (x) "
                                         "{ x.open = true; }); var d =", 1)
    idx = text.rfind("</body>")
    text = text[:idx] + probe + text[idx:] if idx >= 0 else text + probe
    copy = src.with_name(f".kit-probe-{src.name}")
    copy.write_text(text, encoding="utf-8")
    try:
        dom = load(copy, window=(width, height), timeout=timeout).dom
    finally:
        copy.unlink(missing_ok=True)
    start = dom.find("<pre id=\"kit-probe\">")
    if start < 0:
        raise ReportError(f"chromium: the layout probe did not run on {page}")
    body = dom[start + len("<pre id=\"kit-probe\">"):dom.find("</pre>", start)]
    return json.loads(html.unescape(body))
