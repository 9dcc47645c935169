"""tinyserve's own step and request records, and the delays a latency reconciliation is tested with.

With ``TINYSERVE_STEP_RECORDS=1`` the scheduler logs one ``Step record: {json}`` line per scheduler
iteration that ran a decode forward, and each streaming request one ``Request record: {json}`` line
when it ends. Times are seconds on the engine's clock (``time.time()`` plus
``TINYSERVE_CLOCK_OFFSET_S``, a planted clock difference between the engine and its clients):

- step: ``step``, ``pf0``/``pf1`` (the prefill run in this iteration before the decode forward,
  co-scheduled with it; null when none), ``host`` (seconds the host work of this step took) and
  ``host_exposed`` (how much of it the forward waited for: all of it, or what the overlap did not hide),
  ``fwd0``/``fwd1`` (the decode forward), ``batch``, ``rids``;
- request: ``rid``, ``id`` (the response id the client sees), ``arrival``, and per token ``emit`` (the
  scheduler hands it over), ``got`` (the output path takes it) and ``sent`` (its write to the socket
  starts, after detokenising).

Delays (milliseconds, each alone or together): ``TINYSERVE_DETOK_MS`` (the output path detokenises each
token this long, in the request's own thread, as a detokenizer process does), ``TINYSERVE_HOST_COPY_MS``
(a blocking host-device copy before each decode forward), ``TINYSERVE_OVERLAP=1`` (the host work of the
next step runs during the current forward, as an overlapping scheduler does).

Original code written for decode-kit; nothing here is copied from any engine.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time

logger = logging.getLogger("tinyserve")


def _ms(name: str) -> float:
    try:
        return max(0.0, float(os.environ.get(name, "0") or 0)) / 1000.0
    except ValueError:
        return 0.0


ON = os.environ.get("TINYSERVE_STEP_RECORDS") == "1"
OFFSET = float(os.environ.get("TINYSERVE_CLOCK_OFFSET_S", "0") or 0)
DETOK_S = _ms("TINYSERVE_DETOK_MS")
HOST_COPY_S = _ms("TINYSERVE_HOST_COPY_MS")
OVERLAP = os.environ.get("TINYSERVE_OVERLAP") == "1"


def clock() -> float:
    """The engine's clock: wall time plus the planted offset."""
    return time.time() + OFFSET


def _sleep_until(deadline: float) -> None:
    while (left := deadline - time.perf_counter()) > 0:
        time.sleep(left)


class HostWork:
    """The host side of a decode step (a blocking copy of ``TINYSERVE_HOST_COPY_MS``). In order, the
    forward waits for all of it; with ``TINYSERVE_OVERLAP=1`` the next step's work starts when the
    current forward starts and the next forward waits only for what is left."""

    def __init__(self) -> None:
        self._ready: threading.Event | None = None
        self._took = 0.0

    def _work(self, done: threading.Event) -> None:
        t0 = time.perf_counter()
        _sleep_until(t0 + HOST_COPY_S)
        self._took = time.perf_counter() - t0
        done.set()

    def before_forward(self) -> tuple[float, float]:
        """Run (or wait for) this step's host work: (seconds it took, seconds the forward waited)."""
        if not HOST_COPY_S:
            return 0.0, 0.0
        t0 = time.perf_counter()
        if OVERLAP and self._ready is not None:
            self._ready.wait()
        else:
            done = threading.Event()
            self._work(done)
        return self._took, time.perf_counter() - t0

    def during_forward(self) -> None:
        """With overlap: start the next step's host work now, beside the forward."""
        if OVERLAP and HOST_COPY_S:
            self._ready = threading.Event()
            threading.Thread(target=self._work, args=(self._ready,), daemon=True).start()


def detokenize() -> None:
    """The output path's per-token work (``TINYSERVE_DETOK_MS``)."""
    if DETOK_S:
        _sleep_until(time.perf_counter() + DETOK_S)


def log_step(**fields) -> None:
    if ON:
        logger.info("Step record: " + json.dumps(fields, separators=(",", ":")))


def log_request(**fields) -> None:
    if ON:
        logger.info("Request record: " + json.dumps(fields, separators=(",", ":")))
