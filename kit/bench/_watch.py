"""What is watched beside a load level: the client's own stalls, the server's ``/metrics``, the GPUs.

**Client stalls.** :class:`LagMonitor` is a thread that asks to sleep ``tick`` seconds again and
again and records how much later than asked it woke: the client process's scheduling lag (a GC
pause, the GIL held, the machine overloaded, the process stopped). A request in flight during a lag
of L ms has up to L ms added to the latencies the kit records, which the server never caused; a
level whose worst lag passes ``stall_ms`` is re-run or flagged by ``sweep``.

**Server metrics.** :class:`MetricsSampler` reads the server's Prometheus ``/metrics`` before,
during (every ``interval`` s) and after a level: counters as their increase over the level, gauges
as mean and max of the samples (vLLM's ``vllm:num_requests_running``, SGLang's ``sglang:...``).

**GPU.** :func:`gpu_summary` condenses ``kit.audit.ClockSampler`` samples (``nvidia-smi`` on the
engine's host, over the kit's connection) into the level's clocks, throttling and power.
"""
from __future__ import annotations

import math
import re
import threading
import time

from kit.audit import throttle
from kit.bench._client import get
from kit.bench._stats import percentile
from kit.errors import BenchError

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


class _Watcher:
    """A context manager whose daemon thread runs ``_run`` from ``_start`` until the context exits, then
    calls ``_joined``."""

    _name, _join_s = "kit-watcher", 5.0

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        raise NotImplementedError

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name=self._name)
        self._thread.start()

    def __enter__(self):
        self._start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._join_s)
            self._joined()

    def _joined(self) -> None:
        pass


class LagMonitor(_Watcher):
    """The client's own scheduling lag while a level runs (a context manager)."""

    _name = "kit-lag-monitor"

    def __init__(self, tick: float = 0.02) -> None:
        super().__init__()
        self.tick = tick
        self.lags: list[float] = []

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            time.sleep(self.tick)
            self.lags.append(max(0.0, time.perf_counter() - t - self.tick))

    def summary(self, stall_ms: float) -> dict:
        """Worst and p99 lag (ms), the time lost to lags over ``stall_ms`` and whether there was one."""
        ms = [x * 1e3 for x in self.lags]
        big = [x for x in ms if x > stall_ms]
        return {"client_lag_ms_max": max(ms, default=0.0), "client_lag_ms_p99": percentile(ms, 99) if ms else 0.0,
                "client_stall_ms_total": sum(big), "client_stalls": len(big), "client_stalled": bool(big),
                "client_lag_samples": len(ms)}


def parse_prometheus(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample line of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            try:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
            except ValueError:
                continue
    return out


def _kinds(text: str) -> dict[str, str]:
    return {p[2]: p[3] for p in (line.split() for line in text.splitlines() if line.startswith("# TYPE")) if len(p) > 3}


def scrape(url: str, timeout: float = 5.0) -> tuple[dict[str, float], dict[str, str]]:
    """(samples, metric kinds) from ``url``/metrics; BenchError naming the URL when unreachable."""
    body = get(url, "/metrics", timeout).decode("utf-8", "replace")
    return parse_prometheus(body), _kinds(body)


class MetricsSampler(_Watcher):
    """The server's ``/metrics`` before, during and after a level (a context manager). Memory stays
    bounded over a long level: the first and last samples are kept, gauges as running sums and maxima."""

    _name, _join_s = "kit-metrics", 10.0

    def __init__(self, url: str, interval: float = 0.5) -> None:
        super().__init__()
        self.url, self.interval = url, interval
        self.first: dict[str, float] | None = None
        self.last: dict[str, float] | None = None
        self.count = 0
        self.running: dict[str, list[float]] = {}  # key -> [sum, n, max]
        self.kinds: dict[str, str] = {}
        self.missing: str | None = None

    def _take(self) -> None:
        try:
            values, kinds = scrape(self.url)
        except BenchError as exc:
            self.missing = str(exc)
            return
        self.kinds.update(kinds)
        self.first = self.first if self.first is not None else values
        self.last = values
        self.count += 1
        for k, v in values.items():
            if math.isfinite(v):
                acc = self.running.setdefault(k, [0.0, 0, -math.inf])
                acc[0] += v
                acc[1] += 1
                acc[2] = max(acc[2], v)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._take()

    def __enter__(self) -> "MetricsSampler":
        self._take()
        if self.missing is None:
            self._start()
        return self

    def _joined(self) -> None:
        self._take()

    def _is_counter(self, key: str) -> bool:
        base = key.split("{")[0]
        kind = self.kinds.get(base) or self.kinds.get(re.sub(r"_(total|created|sum|count|bucket)$", "", base))
        return kind in ("counter", "histogram", "summary") or base.endswith("_total")

    def summary(self) -> dict:
        """Counters: increase over the level; gauges (and untyped): mean and max of the samples."""
        if self.count < 2 or self.first is None or self.last is None:
            return {"missing": self.missing or "fewer than two /metrics samples", "counters": {}, "gauges": {}}
        counters, gauges = {}, {}
        for key, v in self.last.items():
            if self._is_counter(key):
                if key in self.first:
                    counters[key] = v - self.first[key]
            elif key in self.running:
                total, n, top = self.running[key]
                gauges[key] = {"mean": total / n, "max": top}
        return {"missing": self.missing, "samples": self.count, "counters": counters, "gauges": gauges}


def gpu_summary(sampler) -> dict:
    """A level's GPU figures from a ``kit.audit.ClockSampler``: its throttle summary plus power."""
    d = throttle(sampler.samples)
    power = [s["power_w"] for s in sampler.samples if s.get("power_w") is not None]
    d["power_w_mean"] = sum(power) / len(power) if power else None
    d["power_w_max"] = max(power, default=None)
    d["source"] = "nvidia-smi sampled during the level" if sampler.samples else None
    d["missing"] = sampler.missing
    return d
