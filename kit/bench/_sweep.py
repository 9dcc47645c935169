"""load_test and sweep: the levels of a load benchmark, each of one load kind, and what is recorded.

Load kinds (``LoadResult`` rows carry it as ``mode``; plots draw one line per kind):

- ``rate``: open loop, ``rates=`` requests per second (``arrival`` poisson or constant);
- ``concurrency``: closed loop, ``concurrencies=`` workers, one request each at a time;
- ``users``: multi-turn sessions, ``users=`` concurrent users, ``turns`` turns each, every turn sent
  with the conversation so far (agentic with ``shared_prefix_tokens``/``think_ms``);
- ``trace``: a replayed trace file (``trace=``: arrival times and lengths from the file; one level per
  ``time_scales`` entry, 0.5 = twice as fast; ``requests`` does not apply).

Prompt and answer lengths: ``prompt_tokens``/``max_tokens``, or distributions
``input_lengths``/``output_lengths`` (:func:`kit.bench._prompts.sample_lengths`). ``seed`` None (the
default) draws a new seed per call, recorded in the result, so a second call sends new prompts.
Per level: the client's own lag (a lag over ``stall_ms`` flags the level, ``client_stalled``, with a warning;
``rerun_stalled=N`` re-runs it first, up to N times, with fresh prompts),
the steady state (warm-up excluded and said), ``/metrics`` with ``metrics=True``, GPU clocks and
power with ``gpu=`` (True: this machine; a ``kit`` Host: over its connection).
"""
from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path
from typing import Any, Sequence

from kit.audit import ClockSampler, check_run
from kit.bench._client import list_models, stream_request
from kit.bench._prompts import PromptPool, new_seed, sample_lengths
from kit.bench._result import LoadResult, level_entry, meets
from kit.bench._run import Setup, arrivals, records, run_closed, run_level, run_open, run_users
from kit.bench._workloads import read_trace, session_plan
from kit.errors import BenchError
from kit.util import progress, recorded

ARRIVALS = ("poisson", "constant")


def _served_model(url: str) -> str:
    models = list_models(url)
    if not models:
        raise BenchError(f"{url}/v1/models: no model listed")
    return models[0]


def _label(mode: str, target, opts: dict) -> str:
    return {"rate": lambda: f"{target:g} req/s", "concurrency": lambda: f"c={target}",
            "users": lambda: f"u={target} x{opts['turns']} turns", "trace": lambda: f"trace x{target:g}"}[mode]()


def _specs(mode: str, target, opts: dict, pool: PromptPool, seed: int) -> Any:
    """What one run of a level sends: a list of specs, or a session plan for ``users``."""
    rng = random.Random(seed)
    n = opts["requests"]
    if mode == "trace":
        return [dict(s, id=i) for i, s in enumerate(read_trace(opts["trace"], fmt=opts["trace_format"],
                                                             time_scale=target, seed=seed))]
    out_len = sample_lengths(opts["output_lengths"] or opts["max_tokens"], n, rng, "output_lengths")
    if mode == "users":
        plan = session_plan(-(-n // opts["turns"]), opts["turns"], opts["turn_tokens"], opts["shared_prefix_tokens"],
                            seed)
        return {"sessions": plan, "max_tokens": out_len, "think_ms": opts["think_ms"]}
    lens = sample_lengths(opts["input_lengths"], n, rng, "input_lengths") if opts["input_lengths"] else None
    at = arrivals(n, target, opts["arrival"], seed) if mode == "rate" else [0.0] * n
    first = pool.next
    return [{"id": first + i, "prompt": p, "max_tokens": m, "at": a}
            for i, (p, m, a) in enumerate(zip(pool.take(n, lens), out_len, at))]


def _runner(st: Setup, mode: str, target, opts: dict, pool: PromptPool, seed: int, rep: int, k: int):
    def run(attempt: int):
        specs = _specs(mode, target, opts, pool, seed + 7919 * (k + 1) + 104729 * rep + 15485863 * attempt)
        if mode == "users":
            return run_users(st, specs, int(target))
        if mode == "concurrency":
            return run_closed(st, specs, int(target))
        return run_open(st, specs)
    return run


def _check(arrival: str, levels: list, slo: dict | None, seed) -> int:
    if arrival not in ARRIVALS:
        raise BenchError(f"arrival must be 'poisson' or 'constant', not {arrival!r}")
    if not levels:
        raise BenchError("load: give rate(s) (requests per second), concurrency level(s), users or a trace")
    if slo:
        meets({"ok": True, "ttft": 0, "tpot": 0, "latency": 0, "itl": []}, slo)  # unknown names fail now
    return new_seed() if seed is None else int(seed)


@recorded("bench")
def sweep(url: str, *, rates: Sequence[float] | None = None, concurrencies: Sequence[int] | None = None,
          users: Sequence[int] | None = None, trace: str | Path | None = None, time_scales: Sequence[float] = (1.0,),
          arrival: str = "poisson", requests: int = 100, model: str | None = None, chat: bool = False,
          prompts="random", prompt_tokens: int = 128, max_tokens: int = 128, input_lengths=None,
          output_lengths=None, turns: int = 4, turn_tokens: int = 64, shared_prefix_tokens: int = 0,
          think_ms: float = 0.0, trace_format: str = "auto", warmup: int = 2, slo: dict | None = None,
          seed: int | None = None, timeout: float = 300.0, max_inflight: int = 512, save: str | Path | None = None,
          repeats: int = 1, stall_ms: float = 50.0, rerun_stalled: int = 0, metrics: bool = False,
          gpu=None) -> LoadResult:
    """Several load levels (see the module docstring for the kinds), each with its own fresh prompts;
    the result's ``plot()`` is the throughput-latency curve, one line per load kind. With ``repeats``
    > 1 every level runs that many times, in rounds, and the headline figures get 95 % Student-t
    intervals over the repeats (``<figure>_lo``/``_hi``)."""
    levels = ([("rate", float(r)) for r in (rates or [])] + [("concurrency", int(c)) for c in (concurrencies or [])]
              + [("users", int(u)) for u in (users or [])]
              + ([("trace", float(s)) for s in time_scales] if trace else []))
    seed_given = seed is not None
    seed = _check(arrival, levels, slo, seed)
    model = model or _served_model(url)
    notes: list[str] = []
    st = Setup(url, model, chat, timeout, max_inflight, stall_ms, rerun_stalled, metrics, gpu=gpu, notes=notes)
    pool = PromptPool(prompts, prompt_tokens, seed, notes)
    for p in pool.take(max(0, warmup)):
        stream_request(url, model=model, prompt=p, max_tokens=max_tokens, chat=chat, timeout=timeout)
    opts = dict(requests=requests, max_tokens=max_tokens, input_lengths=input_lengths, output_lengths=output_lengths,
                turns=turns, turn_tokens=turn_tokens, shared_prefix_tokens=shared_prefix_tokens, think_ms=think_ms,
                arrival=arrival, trace=trace, trace_format=trace_format)
    out: dict[str, Any] = {"url": url, "model": model, "endpoint": "chat" if chat else "completions",
                           "arrival": arrival, "prompts": prompts if isinstance(prompts, str) else "given list",
                           "prompt_tokens": prompt_tokens, "max_tokens": max_tokens, "requests_per_level": requests,
                           "input_lengths": input_lengths, "output_lengths": output_lengths, "trace": str(trace or ""),
                           "warmup": warmup, "slo": slo or {}, "seed": seed, "seed_given": seed_given,
                           "started": time.time(), "repeats": max(1, repeats), "stall_ms": stall_ms,
                           "covers": _covers(repeats), "levels": [], "notes": notes}
    runs: dict[int, list[dict]] = {k: [] for k in range(len(levels))}
    with progress(f"bench {url}", len(levels) * max(1, repeats), unit="level") as bar:
        for rep in range(max(1, repeats)):  # rounds: every level once per round, so drift falls on all alike
            for k, (mode, target) in enumerate(levels):
                bar.set_postfix_str(_label(mode, target, opts), refresh=False)
                got = run_level(st, _label(mode, target, opts), _runner(st, mode, target, opts, pool, seed, rep, k))
                got["requests"] = records(got.pop("pairs"), rep, 0)
                runs[k].append(got)
                bar.update(1)
    pool.close()
    out["levels"] = [level_entry(m, t, _label(m, t, opts), runs[k], slo) for k, (m, t) in enumerate(levels)]
    if not any(lv["summary"]["requests_ok"] for lv in out["levels"]):
        errors = {r["error"] for lv in out["levels"] for r in lv["requests"] if r["error"]}
        raise BenchError(f"{url}: every request failed ({'; '.join(sorted(errors))[:300]})")
    res = LoadResult(out)
    if save is not None:
        res.save(save)
    return res


def _covers(repeats: int) -> str:
    return ("percentiles over requests (TTFT, TPOT, E2E) or over all token gaps (ITL) "
            + ("of one run per level; no repeat-to-repeat interval" if repeats <= 1 else
               f"of {repeats} runs per level, run in rounds; *_lo/*_hi: 95 % interval of "
               "the figure over those runs (run-to-run noise and drift during the sweep)"))


@recorded("bench")
def load_test(url: str, *, rate: float | None = None, concurrency: int | None = None, users: int | None = None,
              trace: str | Path | None = None, **kw) -> LoadResult:
    """One load level against ``url``: ``rate`` req/s (open loop), ``concurrency`` workers, ``users``
    multi-turn users or a replayed ``trace``; every other keyword as :func:`sweep`."""
    return sweep(url, rates=[rate] if rate is not None else None,
                 concurrencies=[concurrency] if concurrency is not None else None,
                 users=[users] if users is not None else None, trace=trace, **kw)


@recorded("bench")
def single_stream(url: str, *, model: str | None = None, chat: bool = False, prompt_tokens: int = 32,
                  max_tokens: int = 64, requests: int = 8, warmup: int = 2, repeats: int = 3,
                  concurrency: Sequence[int] = (1, 2, 4), timeout: float = 120.0,
                  save: str | Path | None = None, prompts="random", seed: int = 0, clocks=None) -> LoadResult:
    """Batch-1 decode speed of a live OpenAI-compatible server at ``url``, and a small concurrency
    sweep: the preset of :func:`sweep` with ``concurrencies=concurrency``, ``repeats`` runs of
    ``requests`` requests per level (run in rounds) and a fixed ``seed``, so variants see the same
    prompts. ``result.tok_s`` is the batch-1 decode tok/s (median over requests of 1 / TPOT, the
    definitions of :data:`DEFINITIONS`); the table has a 95 % interval over the repeats.

    ``chat`` selects ``/v1/chat/completions``; ``prompt_tokens`` words are sent (the server's tokeniser
    decides the real count, recorded from ``usage``); ``max_tokens`` are generated with ``ignore_eos``.
    ``prompts``: ``"random"`` (every request its own prompt, so a prefix cache cannot flatter TTFT),
    ``"same"`` (one fixed text for all) or any source of :func:`kit.bench.make_prompts`.
    ``clocks``: ``"local"`` or a Host to sample GPU clocks and throttle reasons on (``nvidia-smi``)
    during the measured requests. The record's ``validity`` says whether the run can be trusted
    (``kit.audit.check_run``: failed requests, short outputs, warm-up, seeded prompts, clocks).
    Raises BenchError naming the URL if the server does not answer or every request fails."""

    sampler = ClockSampler(host=None if clocks == "local" else clocks) if clocks is not None else None
    with sampler if sampler is not None else contextlib.nullcontext():
        res = sweep(url, concurrencies=[int(c) for c in concurrency], requests=requests, repeats=repeats,
                    warmup=warmup, model=model, chat=chat, prompts=prompts, prompt_tokens=prompt_tokens,
                    max_tokens=max_tokens, seed=seed, timeout=timeout)
    res.data["preset"] = "single_stream"
    if sampler is not None:
        res.data["clocks"] = sampler.summary()
    res.data["validity"] = check_run(res.data, run=url).to_dict()
    if save is not None:
        res.save(save)
    return res
