"""Open an exported page in headless Chromium: screenshot, rendered DOM, and the page's own requests.

Used by the report tests and by the README screenshot. Chromium's net-log records every request of
the network stack; requests the *page* made carry the page's ``file://`` isolation key, while the
browser's own background traffic (update checks, account probes) carries none. ``page_requests``
returns the former, so "the report makes no network request" is a check on the page, not on
Chromium's housekeeping. ``file://`` loads do not go through the network stack and never appear.
"""
from __future__ import annotations

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
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageLoad:
    """What Chromium saw: the rendered DOM, the screenshot file and the page-initiated URLs."""

    dom: str = ""
    screenshot: Path | None = None
    requests: list[str] = field(default_factory=list)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ReportError(f"chromium did not finish within {timeout:g} s: {' '.join(args[-2:])}") from exc


def load(page: str | Path, *, screenshot: str | Path | None = None, window: tuple[int, int] = (1200, 1600),
         budget_ms: int = 5000, timeout: float = 90.0) -> PageLoad:
    """Load ``page`` twice in headless Chromium (net-log + DOM dump, then screenshot)."""
    exe = chromium_path()
    if exe is None:
        raise ReportError("chromium not found; install it (apt-get install chromium, or 'make system-deps' as root)")
    url = Path(page).resolve().as_uri()
    result = PageLoad()
    with tempfile.TemporaryDirectory(prefix="kit-chromium-") as tmp:
        netlog = Path(tmp) / "net.json"
        args = [exe, *FLAGS, f"--user-data-dir={tmp}/profile", f"--log-net-log={netlog}",
                f"--virtual-time-budget={budget_ms}", f"--window-size={window[0]},{window[1]}", "--dump-dom", url]
        proc = _run(args, timeout)
        if proc.returncode != 0:
            raise ReportError(f"chromium failed on {page} (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        result.dom = proc.stdout
        result.requests = page_requests(netlog)
        if screenshot is not None:
            shot = Path(screenshot).resolve()
            args = [exe, *FLAGS, f"--user-data-dir={tmp}/profile2", f"--virtual-time-budget={budget_ms}",
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
