"""The progress bar for long work: :func:`progress`.

tqdm (and what it brings: ``asyncio`` through ``tqdm.auto``, ``multiprocessing`` for its lock) is imported
only when a bar is to be drawn, once the work has run ``delay`` seconds in a terminal or a notebook: a
command that ends sooner, writes to a pipe or runs with ``KIT_PROGRESS=off`` never loads it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Iterator

_OFF = ("0", "off", "no", "false")


def progress_wanted() -> bool:
    """A bar is shown in a terminal (stderr a TTY) or a notebook kernel, never when ``KIT_PROGRESS=off``
    (every bar of the kit asks this: :func:`progress`, the engine start-up bar of ``kit.server``)."""
    if os.environ.get("KIT_PROGRESS", "").strip().lower() in _OFF:
        return False
    try:
        if sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return "ipykernel" in sys.modules


class _Bar:
    """What the work reports its progress to (``update(n)``, ``total``, ``n``): counted here, and drawn by a
    tqdm bar made only once the work has lasted ``delay`` seconds (``show``), then kept ticking."""

    def __init__(self, desc: str, total: float | None, unit: str, show: bool, delay: float):
        self.desc, self.total, self.unit, self.n = desc, total, unit, 0
        self.postfix = ""
        self._lock = threading.Lock()
        self._bar: Any = None
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, args=(delay,), daemon=True, name="kit-progress") \
            if show else None
        if self._ticker:
            self._ticker.start()

    def update(self, n: float = 1) -> None:
        with self._lock:
            self.n += n
            if self._bar is not None:
                self._bar.update(n)

    def refresh(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.refresh()

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        """What the work is at now (a level, a file), shown after the bar; kept until a bar is drawn."""
        with self._lock:
            self.postfix = text
            if self._bar is not None:
                self._bar.set_postfix_str(text, refresh=refresh)

    def _tick(self, delay: float) -> None:
        if self._stop.wait(delay):
            return
        if "ipykernel" in sys.modules:   # tqdm.auto would pick this too, and import asyncio for its mix-in
            from tqdm.notebook import tqdm  # deferred: drawn bars only (see the module docstring)
        else:
            from tqdm.std import tqdm  # deferred: drawn bars only (see the module docstring)
        with self._lock:
            if self._stop.is_set():
                return
            byte = self.unit == "B"
            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, unit_scale=byte, leave=False,
                             unit_divisor=1024 if byte else 1000, initial=self.n)
            if self.postfix:
                self._bar.set_postfix_str(self.postfix, refresh=False)
        while not self._stop.wait(0.5):
            self.refresh()

    def close(self) -> None:
        self._stop.set()
        if self._ticker:
            self._ticker.join()
        if self._bar is not None:
            self._bar.close()


@contextlib.contextmanager
def progress(desc: str, total: float | None = None, *, unit: str = "B", show: bool | None = None,
             delay: float = 2.0) -> Iterator[Any]:
    """A progress bar for work that may take more than ``delay`` seconds (it appears only then), kept ticking
    (elapsed time) while the work runs; silent when not in a terminal or notebook, when ``show=False`` or
    ``KIT_PROGRESS=off``. Yields the bar (``bar.update(n)``, ``bar.total``)."""
    bar = _Bar(desc, total, unit, progress_wanted() if show is None else show, delay)
    try:
        yield bar
    finally:
        bar.close()
