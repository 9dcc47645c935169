"""Running one load level: its requests (open loop on a schedule, closed loop, sessions, a replayed
trace), watched for client stalls, server ``/metrics`` and GPU clocks, re-run when the client stalled.

A request is a spec (``prompt``, ``max_tokens``, ``at`` for a schedule); what comes back per request
is :meth:`RequestTiming.to_dict` plus ``prompt_id``, ``prompt_hash`` (of the text really sent),
``max_tokens`` asked and, for sessions, ``session``/``turn``.
"""
from __future__ import annotations

import math
import random
import threading
import time
import warnings
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kit.audit import ClockSampler
from kit.bench._client import RequestTiming, stream_request
from kit.bench._prompts import prompt_hash
from kit.bench._watch import LagMonitor, MetricsSampler, gpu_summary


@dataclass
class Setup:
    """What every level of a sweep shares."""

    url: str
    model: str
    chat: bool
    timeout: float
    max_inflight: int = 512
    stall_ms: float = 50.0
    rerun_stalled: int = 0
    metrics: bool = False
    metrics_interval: float = 0.5
    gpu: Any = None  # None: not sampled; True: this machine; a kit Host: over its connection
    notes: list = field(default_factory=list)


def arrivals(n: int, rate: float, arrival: str, seed: int) -> list[float]:
    """Send times (s after the level's start) of ``n`` requests at ``rate`` per second."""
    if rate <= 0 or not math.isfinite(rate):
        return [0.0] * n
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate) if arrival == "poisson" else 1.0 / rate
    return out


def _send(st: Setup, spec: dict) -> RequestTiming:
    return stream_request(st.url, model=st.model, prompt=spec["prompt"], max_tokens=spec["max_tokens"],
                          chat=st.chat, timeout=st.timeout)


def run_open(st: Setup, specs: list[dict]) -> tuple[list, float, int]:
    """Send spec i at its ``at`` (one thread each, at most ``max_inflight`` at once); returns
    ((spec, timing) pairs, wall seconds, sends more than 10 ms late)."""
    results: list = [None] * len(specs)
    sem = threading.Semaphore(st.max_inflight)
    late = 0
    threads = []

    def one(i):
        try:
            results[i] = (specs[i], _send(st, specs[i]))
        finally:
            sem.release()

    t0 = time.perf_counter()
    for i, spec in enumerate(specs):
        left = t0 + spec["at"] - time.perf_counter()
        if left > 0:
            time.sleep(left)
        sem.acquire()
        if time.perf_counter() - (t0 + spec["at"]) > 0.010:
            late += 1
        th = threading.Thread(target=one, args=(i,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(st.timeout + 5)
    return [r for r in results if r is not None], time.perf_counter() - t0, late


def closed_loop(items: Sequence[Any], workers: int, do: Callable[[Any], None], join_s: float) -> float:
    """``do(item)`` for every item, by ``workers`` threads each taking the next item when its last one is
    done (a closed loop); the wall seconds. A thread still running after ``join_s`` is left behind."""
    todo = list(items)[::-1]
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                item = todo.pop()
            do(item)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_s)
    return time.perf_counter() - t0


def run_closed(st: Setup, specs: list[dict], conc: int) -> tuple[list, float, int]:
    """``len(specs)`` requests by ``conc`` workers, each one request at a time."""
    lock = threading.Lock()
    out: list = []

    def one(spec: dict) -> None:
        r = _send(st, spec)
        with lock:
            out.append((spec, r))

    return out, closed_loop(specs, conc, one, st.timeout * len(specs) + 5), 0


def run_users(st: Setup, plan: dict, users: int) -> tuple[list, float, int]:
    """A sessions level (``plan`` = {sessions, max_tokens, think_ms}) by ``users`` workers: each turn after the
    previous one's answer, sent with the whole conversation so far (a list of messages, or their texts joined
    for ``/v1/completions``)."""
    lock = threading.Lock()
    out: list = []
    sessions, max_tokens, think_ms = plan["sessions"], plan["max_tokens"], plan.get("think_ms", 0.0)
    n_turns = len(sessions[0]["turns"]) if sessions else 0

    def one_session(s: dict) -> None:
        history = [{"role": "system", "content": s["prefix"]}] if s["prefix"] else []
        for k, text in enumerate(s["turns"]):
            if k and think_ms > 0:
                time.sleep(think_ms / 1e3)
            history = history + [{"role": "user", "content": text}]
            mt = max_tokens[(s["session"] * n_turns + k) % len(max_tokens)]
            spec = {"session": s["session"], "turn": k, "max_tokens": mt,
                    "prompt": history if st.chat else "\n".join(m["content"] for m in history)}
            r = _send(st, spec)
            with lock:
                out.append((spec, r))
            if not r.ok:
                return  # the conversation cannot go on without its answer
            history = history + [{"role": "assistant", "content": r.text}]

    return out, closed_loop(sessions, users, one_session, st.timeout * max(1, n_turns) * max(1, len(sessions)) + 5), 0


def records(pairs: list, rep: int, first_id: int) -> list[dict]:
    """The per-request dicts of one run."""
    out = []
    for n, (spec, t) in enumerate(pairs):
        d = dict(t.to_dict(), repeat=rep, prompt_id=spec.get("id", first_id + n),
                 prompt_hash=prompt_hash(spec["prompt"]), max_tokens=spec["max_tokens"])
        for k in ("session", "turn", "conversation", "at", "input_length"):
            if k in spec:
                d[k] = spec[k]
        out.append(d)
    return out


def watched(st: Setup, run: Callable[[], tuple[list, float, int]]) -> dict:
    """One run of a level with its watchers: requests (pairs), wall, late sends, client lag,
    ``/metrics`` and GPU summaries."""
    with ExitStack() as stack:
        lag = stack.enter_context(LagMonitor())
        ms = stack.enter_context(MetricsSampler(st.url, st.metrics_interval)) if st.metrics else None
        gpu = None
        if st.gpu is not None:
            gpu = stack.enter_context(ClockSampler(host=None if st.gpu is True else st.gpu))
        pairs, wall, late = run()
    out = {"pairs": pairs, "wall": wall, "late": late, "client": lag.summary(st.stall_ms)}
    if ms is not None:
        out["server_metrics"] = ms.summary()
    if gpu is not None:
        out["gpu"] = gpu_summary(gpu)
    return out


def run_level(st: Setup, label: str, run: Callable[[int], tuple[list, float, int]]) -> dict:
    """A level's run, re-run (with fresh prompts: ``run(attempt)``) up to ``rerun_stalled`` times
    when the client itself stalled; the stalled attempts are kept as ``stalled_attempts``."""
    stalled = []
    for attempt in range(max(0, st.rerun_stalled) + 1):
        got = watched(st, lambda a=attempt: run(a))
        if not got["client"]["client_stalled"]:
            break
        stalled.append({"attempt": attempt, **got["client"]})
        if attempt == st.rerun_stalled:
            msg = (f"{label}: the client itself stalled ({got['client']['client_lag_ms_max']:.0f} ms at worst, "
                   f"{attempt + 1} attempt(s)): latencies of requests in flight then include up to that much "
                   "that the server did not cause (rerun_stalled=N re-runs a level that stalled)")
            warnings.warn(msg, stacklevel=4)
            st.notes.append(msg)
    got["stalled_attempts"] = stalled
    got["rerun"] = bool(stalled) and not got["client"]["client_stalled"]
    gpu = got.get("gpu") or {}
    if gpu.get("throttled"):
        why = ", ".join(gpu["reasons"]) or f"SM clock down to {gpu.get('min_sm_mhz')} MHz"
        st.notes.append(f"{label}: the GPU slowed itself down during the level ({why}): its figures are not "
                        "the hardware's best")
    return got
