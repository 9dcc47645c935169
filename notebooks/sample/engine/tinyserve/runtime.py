"""tinyserve's serving runtime: a continuous-batching scheduler, a CPU runner with known latencies,
and the profiler behind ``/start_profile``.

The CPU runner does no arithmetic worth measuring: each decode step *sleeps* for a per-token time
computed from the server's flags and environment by :func:`step_seconds`. That is the point: the
latency effect of every knob is known exactly (:data:`TRUTH`), so an experiment run by decode-kit
against this engine can be checked against the truth. With torch and a GPU the runner in
``torch_runner.py`` replaces it and the numbers are whatever the hardware does.

Original code written for decode-kit; nothing here is copied from any engine.
"""
from __future__ import annotations

import gzip
import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field

from tinyserve import records

logger = logging.getLogger("tinyserve")

# The truth the CPU runner obeys: multipliers of the per-token (decode step) time.
# Environment variables (name -> value -> factor) and server flags (dest -> value -> factor).
# Knobs or values not listed have no effect (factor 1.0).
TRUTH: dict[str, dict[str, dict[str, float]]] = {
    "env": {
        "NCCL_PROTO": {"LL": 0.70, "LL128": 0.85, "Simple": 1.00},
        "NCCL_ALGO": {"Ring": 1.00, "Tree": 1.00},            # no effect at one rank
        "TINYSERVE_SLOW_ALLREDUCE": {"1": 1.40},
    },
    "flags": {
        "attention_backend": {"flashinfer": 1.00, "triton": 1.25, "torch_native": 1.60, "sdpa": 1.00},
        "disable_cuda_graph": {"True": 1.50},
        "enable_torch_compile": {"True": 0.90},
        "disable_custom_all_reduce": {"True": 1.15},   # effective value: NCCL instead of the custom kernel
    },
}
EAGER_FACTOR = 1.50  # a decode batch above the largest captured graph runs eager, as disable_cuda_graph
BATCH_COST = 0.05  # each extra running request adds 5 % to the step time


def factor(flags: dict, env: dict) -> float:
    """The product of the :data:`TRUTH` multipliers that apply to these flags and environment."""
    f = 1.0
    for name, table in TRUTH["env"].items():
        f *= table.get(str(env.get(name, "")), 1.0)
    for dest, table in TRUTH["flags"].items():
        f *= table.get(str(flags.get(dest)), 1.0)
    return f


def drift(env: dict, now: float | None = None) -> float:
    """Machine drift, for tests of how experiments cope with it: ``TINYSERVE_DRIFT="T0:SLOPE"`` makes
    every step ``1 + SLOPE * (now - T0)`` times longer (``now``, ``T0``: epoch seconds), the same for
    every engine started with it, as a machine that slowly heats up. 1.0 when unset."""
    spec = str(env.get("TINYSERVE_DRIFT", "") or "")
    if ":" not in spec:
        return 1.0
    t0, slope = (float(x) for x in spec.split(":", 1))
    return max(0.05, 1.0 + slope * ((time.time() if now is None else now) - t0))


def step_seconds(token_ms: float, flags: dict, env: dict, batch: int) -> float:
    """Decode step time of the CPU runner: ``token_ms * factor * (1 + BATCH_COST * (batch - 1))``
    (times :func:`drift` when ``TINYSERVE_DRIFT`` is set)."""
    return token_ms / 1000.0 * factor(flags, env) * (1.0 + BATCH_COST * max(0, batch - 1)) * drift(env)


class CpuRunner:
    """Sleeps for the known step time; emits token ids that count up."""

    cuda_graph = False

    def __init__(self, token_ms: float, prefill_ms_per_token: float, flags: dict, env: dict) -> None:
        self.token_ms = token_ms
        self.prefill_ms = prefill_ms_per_token
        self.flags = flags
        self.env = env
        self.cuda_graph = not flags.get("disable_cuda_graph", False)
        self.graph_bs = sorted(int(x) for x in str(flags.get("cuda_graph_bs") or "1,2,4,8").split(",") if x.strip())
        self._next: float | None = None

    def uses_graph(self, batch: int) -> bool:
        """A decode batch runs a captured graph only up to the largest captured batch size."""
        return self.cuda_graph and batch <= max(self.graph_bs, default=0)

    def prefill(self, slot: int, prompt_ids: list[int]) -> int:
        with self._op("tinyserve::prefill"):
            time.sleep(self.prefill_ms / 1000.0 * len(prompt_ids))
        return (prompt_ids[-1] + 1) % 32000 if prompt_ids else 1

    def decode(self, tokens: list[int], positions: list[int], slots: list[int]) -> list[int]:
        # A metronome: steps end on a fixed grid (previous deadline + dt), so a late wake-up on a
        # busy machine is made up by the next step and the mean step time stays the configured one.
        # After an idle gap (or a stall of more than 3 steps) the grid restarts from now.
        dt = step_seconds(self.token_ms, self.flags, self.env, len(tokens))
        if self.cuda_graph and not self.uses_graph(len(tokens)):
            dt *= EAGER_FACTOR
        now = time.perf_counter()
        if self._next is None or now - self._next > 3 * dt:
            self._next = now
        self._next += dt
        with self._op("tinyserve::decode_forward"):
            while True:
                left = self._next - time.perf_counter()
                if left <= 0:
                    break
                time.sleep(left)
        return [(t + 1) % 32000 for t in tokens]

    def shift(self, seconds: float) -> None:
        """Host work between two forwards (a co-scheduled prefill, a blocking copy) moves the grid: the
        next forward still takes its full step time after it."""
        if self._next is not None and seconds > 0:
            self._next += seconds

    profiler = None  # set by the Profiler while it records

    def _op(self, name: str):
        return self.profiler.op(name) if self.profiler is not None else _Null()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@dataclass
class Request:
    rid: int
    prompt_ids: list[int]
    max_tokens: int
    out: "queue.Queue[int | None]" = field(default_factory=queue.Queue)
    slot: int = -1
    pos: int = 0
    last: int = 0
    generated: int = 0
    t_arrive: float = field(default_factory=time.perf_counter)
    emitted: list[float] = field(default_factory=list)  # engine clock when each token was handed over


class Profiler:
    """What ``/start_profile`` starts: SGLang's request body (``output_dir``, ``num_steps``,
    ``activities``, ``profile_prefix``); files named ``{profile_id}-TP-0.trace.json.gz`` like SGLang.

    With torch, a ``torch.profiler`` session; without, a Kineto-format chrome trace written from
    this process's own timed work (``ProfilerStep#N`` annotations and ``cpu_op`` events).
    """

    def __init__(self, runner, use_torch: bool) -> None:
        self.runner = runner
        self.use_torch = use_torch
        self.active = False
        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.steps_left: int | None = None
        self.step_no = 0
        self.path = ""
        self._torch_prof = None
        self._step_t0 = 0.0
        self._pending: dict | None = None

    def request(self, body: dict) -> str:
        """Arm a profile (started by the scheduler thread at its next step). Returns the trace dir."""
        out = os.path.expanduser(body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp"))
        os.makedirs(out, exist_ok=True)
        pid = f"{body.get('profile_prefix') or ''}{time.time()}"
        with self.lock:
            if self.active or self._pending is not None:
                raise RuntimeError("Profiling is already in progress. Call /stop_profile first.")
            self._pending = {"dir": out, "id": pid, "num_steps": body.get("num_steps"),
                             "activities": body.get("activities") or ["CPU", "GPU"]}
        logger.info(f"Profiling starts. Traces will be saved to: {out} (with profile id: {pid})")
        return out

    def stop_request(self) -> None:
        with self.lock:
            if not self.active and self._pending is None:
                raise RuntimeError("Profiling is not in progress. Call /start_profile first.")
            if self._pending is not None:
                self._pending["num_steps"] = 0
            self.steps_left = 0

    # -- called by the scheduler thread only --------------------------------------------------
    def begin_step(self) -> None:
        with self.lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self.path = os.path.join(pending["dir"], f"{pending['id']}-TP-0.trace.json.gz")
            self.steps_left = pending["num_steps"]
            self.step_no = 0
            self.events = []
            self.active = True
            if self.use_torch:
                import torch

                acts = [torch.profiler.ProfilerActivity.CPU]
                if "GPU" in pending["activities"] and torch.cuda.is_available():
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                self._torch_prof = torch.profiler.profile(activities=acts)
                self._torch_prof.start()
            else:
                self.runner.profiler = self
        if self.active:
            self._step_t0 = time.time()

    def end_step(self, ran: bool = True) -> None:
        """Close a scheduler iteration; only iterations that ran a forward count as profiled steps."""
        if not self.active:
            return
        if ran:
            if self._torch_prof is not None:
                self._torch_prof.step()
            else:
                self.events.append(_event("user_annotation", f"ProfilerStep#{self.step_no}", self._step_t0, time.time()))
            self.step_no += 1
        with self.lock:
            if ran and self.steps_left is not None:
                self.steps_left -= 1
            done = self.steps_left is not None and self.steps_left <= 0
        if done:
            self._finish()

    def op(self, name: str):
        prof = self

        class _Op:
            def __enter__(self):
                self.t0 = time.time()
                return self

            def __exit__(self, *exc):
                prof.events.append(_event("cpu_op", name, self.t0, time.time()))
                return False

        return _Op()

    def _finish(self) -> None:
        path = self.path
        if self._torch_prof is not None:
            self._torch_prof.stop()
            self._torch_prof.export_chrome_trace(path)  # torch writes gzip when the name ends .gz
            self._torch_prof = None
        else:
            self.runner.profiler = None
            trace = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms",
                     "traceName": path, "traceEvents": self.events + [
                         {"ph": "M", "name": "process_name", "pid": os.getpid(), "tid": 0,
                          "args": {"name": "tinyserve (CPU runner, no GPU)"}}]}
            with gzip.open(path, "wt", encoding="utf-8") as f:
                json.dump(trace, f)
        with self.lock:
            self.active = False
            self.steps_left = None
        logger.info(f"Profiling done. Traces are saved to: {os.path.dirname(path)}")


def _event(cat: str, name: str, t0: float, t1: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": os.getpid(), "tid": threading.get_native_id(),
            "ts": round(t0 * 1e6, 3), "dur": round((t1 - t0) * 1e6, 3)}


class Scheduler:
    """One thread: admits requests (prefill), then decodes every running request one token per step,
    and logs SGLang-format ``Prefill batch`` / ``Decode batch`` lines."""

    def __init__(self, runner, *, max_running: int, max_total_tokens: int, decode_log_interval: int,
                 profiler: Profiler, crash_after: int | None = None) -> None:
        self.runner = runner
        self.max_running = max_running
        self.max_total_tokens = max_total_tokens
        self.decode_log_interval = decode_log_interval
        self.profiler = profiler
        self.crash_after = crash_after
        self.waiting: "queue.Queue[Request]" = queue.Queue()
        self.running: list[Request] = []
        self.free_slots = list(range(max_running))
        self.forward_ct = 0
        self.tokens_since_log = 0
        self.t_last_log = time.perf_counter()
        self.served = 0
        self.stopped = threading.Event()
        self.host = records.HostWork()
        self.thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submit(self, req: Request) -> Request:
        self.waiting.put(req)
        return req

    def _admit(self) -> bool:
        new = []
        while self.free_slots:
            try:
                req = self.waiting.get(block=not self.running and not new, timeout=0.05)
            except queue.Empty:
                break
            req.slot = self.free_slots.pop(0)
            new.append(req)
            if self.waiting.empty():
                break
        if not new:
            return False
        n_tok = sum(len(r.prompt_ids) for r in new)
        t0 = time.perf_counter()
        self.prefill_at = records.clock()
        for req in new:
            req.last = self.runner.prefill(req.slot, req.prompt_ids)
            req.pos = len(req.prompt_ids)
            req.generated = 1
            req.emitted.append(records.clock())
            req.out.put(req.last)
        dt = max(time.perf_counter() - t0, 1e-9)
        self.prefill_s = dt
        self.prefill_end = records.clock()
        logger.info(f"Prefill batch, #new-seq: {len(new)}, #new-token: {n_tok}, #cached-token: 0, "
                    f"token usage: {self._usage():.2f}, #running-req: {len(self.running)}, "
                    f"#queue-req: {self.waiting.qsize()}, input throughput (token/s): {n_tok / dt:.2f}, "
                    f"cuda graph: False")
        for req in new:
            if req.generated >= req.max_tokens:
                self._finish(req)
            else:
                self.running.append(req)
        return True

    def _graph(self, batch: int) -> bool:
        uses = getattr(self.runner, "uses_graph", None)
        return uses(batch) if uses is not None else self.runner.cuda_graph

    def _usage(self) -> float:
        return sum(r.pos for r in self.running) / self.max_total_tokens

    def _finish(self, req: Request) -> None:
        req.out.put(None)
        self.free_slots.append(req.slot)
        self.served += 1
        if self.crash_after is not None and self.served >= self.crash_after:
            logger.error("Scheduler hit an exception: RuntimeError: crash mode (TINYSERVE_CRASH=after:"
                         f"{self.crash_after}) after {self.served} requests")
            logging.shutdown()
            os._exit(1)

    def _loop(self) -> None:
        try:
            self._run()
        except BaseException:  # like an engine's scheduler: an exception kills the server, loudly
            import traceback

            logger.error("Scheduler hit an exception: " + traceback.format_exc().rstrip().replace("\n", "\n    "))
            logging.shutdown()
            os._exit(1)

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.profiler.begin_step()
            self.prefill_s, self.prefill_at, self.prefill_end = 0.0, None, None
            ran = self._admit()
            prefill = self.prefill_s
            if self.running:
                ran = True
                batch = list(self.running)
                host, exposed = self.host.before_forward()
                shift = getattr(self.runner, "shift", None)
                if shift is not None:
                    shift(prefill + exposed)
                fwd0 = records.clock()
                self.host.during_forward()
                new = self.runner.decode([r.last for r in batch], [r.pos for r in batch], [r.slot for r in batch])
                fwd1 = records.clock()
                self.forward_ct += 1
                self.tokens_since_log += len(batch)
                records.log_step(step=self.forward_ct, pf0=self.prefill_at, pf1=self.prefill_end, host=round(host, 6),
                                 host_exposed=round(exposed, 6), fwd0=fwd0, fwd1=fwd1, batch=len(batch),
                                 rids=[r.rid for r in batch])
                for req, tok in zip(batch, new):
                    req.last = tok
                    req.pos += 1
                    req.generated += 1
                    req.emitted.append(fwd1)
                    req.out.put(tok)
                    if req.generated >= req.max_tokens:
                        self.running.remove(req)
                        self._finish(req)
                if self.forward_ct % self.decode_log_interval == 0:
                    now = time.perf_counter()
                    gen = self.tokens_since_log / max(now - self.t_last_log, 1e-9)
                    logger.info(f"Decode batch, #running-req: {len(self.running)}, "
                                f"#token: {sum(r.pos for r in self.running)}, token usage: {self._usage():.2f}, "
                                f"cuda graph: {self._graph(len(batch))}, gen throughput (token/s): {gen:.2f}, "
                                f"#queue-req: {self.waiting.qsize()}")
                    self.tokens_since_log = 0
                    self.t_last_log = now
            self.profiler.end_step(ran)
            if not self.running and self.waiting.empty():
                self.t_last_log = time.perf_counter()
                self.tokens_since_log = 0
