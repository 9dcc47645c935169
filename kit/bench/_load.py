"""load_test and sweep: serving load as ``vllm bench serve``, SGLang ``bench_serving``, aiperf and
guidellm measure it, with the kit's statistics and provenance.

A level is either **open loop** (``rate=`` requests per second, arrivals ``"poisson"`` or
``"constant"``, sent on schedule whatever the server does: the way to find where latency breaks)
or **closed loop** (``concurrency=`` workers, each one request at a time). Every request gets its
own prompt (:func:`make_prompts`: random words or random token ids with a distinct start, or a
dataset file), so a prefix cache cannot flatter TTFT. Per level: mean, p50, p90, p99 of TTFT, ITL,
TPOT and E2E (ms), request and output-token throughput, and **goodput** (requests per second that
met every SLO given, as vLLM's ``--goodput``). Every request is kept (``requests``, saved as JSON).
``sweep`` runs several levels and gives the throughput-latency curve (``kit.plots.throughput_latency``,
``kit.plots.latency_cdf``).

What a level's figures cover: ``repeats`` runs of ``requests`` requests (default one); percentiles
are over requests (TTFT, TPOT, E2E) or over all token gaps (ITL), as in vLLM; with repeats the
headline figures also get a 95 % interval over the runs (``LoadResult.data["covers"]`` says so).
"""
from __future__ import annotations

import html
import json
import math
import random
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from kit.bench._client import RequestTiming, closed_loop, get_json, stream_request
from kit.bench._stats import mean_ci, percentile
from kit.errors import BenchError
from kit.runs import recorded

STATS = ("mean", "p50", "p90", "p99")
LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
# figures that get an interval over repeats
CI_KEYS = ("request_throughput", "output_tok_s", "goodput", "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p99",
           "itl_ms_p50", "itl_ms_p99", "tpot_ms_mean", "e2e_ms_p50", "e2e_ms_p99")
_WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
          "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basil cedar dune ember fjord "
          "garnet harbor iris jade kelp lotus maple nectar opal pine quartz reef sage thyme umber violet "
          "willow").split()


def make_prompts(n: int, *, source: str | Sequence = "random", prompt_tokens: int = 128, seed: int = 0) -> list:
    """``n`` prompts, distinct from each other from their first token on.

    ``source``: ``"random"`` (random words, about one token each, led by a unique one),
    ``"random-ids"`` (lists of random token ids for ``/v1/completions``), a path to a dataset file
    (``.jsonl`` with ``prompt``/``text``/ShareGPT ``conversations``, or plain text, one prompt a
    line; used in order, cycled if shorter), or a list of prompts."""
    rng = random.Random(seed)
    if isinstance(source, (list, tuple)):
        items = list(source)
    elif source == "random":
        return [" ".join([f"q{seed}x{i}"] + [rng.choice(_WORDS) for _ in range(max(0, prompt_tokens - 1))])
                for i in range(n)]
    elif source == "random-ids":
        return [[1000 + (i * 7919 + seed) % 30000]
                + [rng.randrange(1000, 31000) for _ in range(max(0, prompt_tokens - 1))]
                for i in range(n)]
    else:
        items = _read_dataset(Path(source))
    if not items:
        raise BenchError(f"{source}: no prompts")
    return [items[i % len(items)] for i in range(n)]


def _read_dataset(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"{path}: cannot read the prompt file ({exc.strerror or exc})") from None
    out, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if path.suffix in (".jsonl", ".json"):
            try:
                obj = json.loads(line)
            except ValueError:
                bad += 1
                continue
            p = obj.get("prompt") or obj.get("text") if isinstance(obj, dict) else None
            if p is None and isinstance(obj, dict) and obj.get("conversations"):
                p = obj["conversations"][0].get("value")
            if p:
                out.append(p)
            else:
                bad += 1
        else:
            out.append(line)
    if bad and not out:
        raise BenchError(f"{path}: no line has a prompt (expected JSON lines with 'prompt', 'text' or 'conversations')")
    return out


def _arrivals(n: int, rate: float, arrival: str, seed: int) -> list[float]:
    if rate <= 0 or not math.isfinite(rate):
        return [0.0] * n
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate) if arrival == "poisson" else 1.0 / rate
    return out


def _run_open(url, model, prompts, rate, arrival, seed, max_tokens, chat, timeout, max_inflight):
    """Send request i at its scheduled time (one thread each); returns timings, wall, late sends."""
    times = _arrivals(len(prompts), rate, arrival, seed)
    results: list[RequestTiming | None] = [None] * len(prompts)
    sem = threading.Semaphore(max_inflight)
    late = 0
    threads = []

    def one(i):
        try:
            r = stream_request(url, model=model, prompt=prompts[i], max_tokens=max_tokens, chat=chat, timeout=timeout)
            r.prompt_id = i
            results[i] = r
        finally:
            sem.release()

    t0 = time.perf_counter()
    for i, due in enumerate(times):
        left = t0 + due - time.perf_counter()
        if left > 0:
            time.sleep(left)
        sem.acquire()
        if time.perf_counter() - (t0 + due) > 0.010:
            late += 1
        th = threading.Thread(target=one, args=(i,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(timeout + 5)
    wall = time.perf_counter() - t0
    return [r for r in results if r is not None], wall, late


def _run_closed(url, model, prompts, conc, max_tokens, chat, timeout):
    """One closed-loop level: ``len(prompts)`` requests by ``conc`` workers (``single_stream``'s pool)."""
    return closed_loop(url, model, conc, len(prompts), list(prompts), max_tokens, chat, timeout)


def _dist(values: list[float]) -> dict[str, float]:
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return {s: math.nan for s in STATS}
    return {"mean": sum(xs) / len(xs), "p50": percentile(xs, 50), "p90": percentile(xs, 90), "p99": percentile(xs, 99)}


def meets(r: dict, slo: dict) -> bool:
    """Whether one request (a dict of :meth:`RequestTiming.to_dict`) met every SLO in ``slo``
    (``ttft_ms``, ``tpot_ms``, ``e2e_ms``, ``itl_ms`` = its worst gap)."""
    if not r.get("ok"):
        return False
    got = {"ttft_ms": r["ttft"] * 1e3,
           "tpot_ms": (r["tpot"] or math.nan) * 1e3 if r.get("tpot") is not None else math.nan,
           "e2e_ms": r["latency"] * 1e3, "itl_ms": max(r["itl"]) * 1e3 if r["itl"] else 0.0}
    for k, limit in slo.items():
        v = got.get(k)
        if v is None:
            raise BenchError(f"slo: unknown metric {k!r} (use {', '.join(got)})")
        if math.isnan(v) and k == "tpot_ms":
            continue
        if not v <= limit:
            return False
    return True


def summarize(requests: list[dict], wall: float, slo: dict | None = None) -> dict[str, Any]:
    """The figures of one level from its requests (dicts) and its wall time."""
    ok = [r for r in requests if r["ok"]]
    out: dict[str, Any] = {"requests_ok": len(ok), "requests_failed": len(requests) - len(ok), "duration_s": wall}
    series = {"ttft_ms": [r["ttft"] * 1e3 for r in ok],
              "itl_ms": [x * 1e3 for r in ok for x in r["itl"]],
              "tpot_ms": [r["tpot"] * 1e3 for r in ok if r.get("tpot") is not None and math.isfinite(r["tpot"])],
              "e2e_ms": [r["latency"] * 1e3 for r in ok]}
    for m, xs in series.items():
        for s, v in _dist(xs).items():
            out[f"{m}_{s}"] = v
    out_tok = sum(r["output_tokens"] for r in ok)
    out["output_tokens"] = out_tok
    out["reasoning_tokens"] = sum(r.get("reasoning_tokens", 0) for r in ok)
    out["answer_tokens"] = sum(r.get("answer_tokens", r["output_tokens"]) for r in ok)
    out["request_throughput"] = len(ok) / wall if wall > 0 else math.nan
    out["output_tok_s"] = out_tok / wall if wall > 0 else math.nan
    out["distinct_prompts"] = len({r.get("prompt_id") for r in requests})
    if slo:
        good = sum(1 for r in ok if meets(r, slo))
        out["goodput"] = good / wall if wall > 0 else math.nan
        out["slo_met_share"] = good / len(requests) if requests else math.nan
    return out


class LoadResult:
    """What :func:`load_test` / :func:`sweep` measured: ``levels`` (one dict per level with its
    ``summary`` and every request), ``table`` (one row per level), ``save``/``load`` as JSON."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def levels(self) -> list[dict]:
        return self.data["levels"]

    @property
    def requests(self) -> list[dict]:
        return [dict(r, level=lv["label"]) for lv in self.levels for r in lv["requests"]]

    def summary(self) -> list[dict]:
        return [dict(level=lv["label"], mode=lv["mode"], target=lv["target"], **lv["summary"]) for lv in self.levels]

    @property
    def table(self):
        import pandas as pd

        return pd.DataFrame(self.summary())

    def save(self, path: str | Path) -> Path:
        from kit.util import write_atomic

        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(p, json.dumps(self.data, indent=1, default=_nan_none) + "\n")
        return p

    @classmethod
    def load(cls, path: str | Path) -> "LoadResult":
        try:
            return cls(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise BenchError(f"{path}: unreadable load result ({exc})") from None

    def plot(self, metric: str = "e2e_ms", stat: str = "p50", **kw):
        """Throughput against latency, one point per level (:func:`kit.plots.throughput_latency`)."""
        from kit.plots import throughput_latency

        return throughput_latency(self, metric=metric, stat=stat, **kw)

    def plot_cdf(self, metric: str = "ttft_ms", **kw):
        """The latency CDF of each level (:func:`kit.plots.latency_cdf`)."""
        from kit.plots import latency_cdf

        return latency_cdf(self, metric=metric, **kw)

    def __repr__(self) -> str:
        parts = [f"{r['level']}: {r['output_tok_s']:.1f} tok/s, TTFT p50 {r['ttft_ms_p50']:.1f} ms, "
                 f"ITL p99 {r['itl_ms_p99']:.2f} ms" for r in self.summary()]
        return f"LoadResult({self.data.get('url')!r}; " + "; ".join(parts) + ")"

    def _repr_html_(self) -> str:
        cols = ["level", "requests_ok", "requests_failed", "request_throughput", "output_tok_s"] + \
            [f"{m}_{s}" for m in LATENCIES for s in ("mean", "p50", "p99")] + \
            (["goodput"] if self.data.get("slo") else [])
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = ""
        for r in self.summary():
            body += "<tr>" + "".join(f"<td>{_fmt(r.get(c))}</td>" for c in cols) + "</tr>"
        return (f"<div><b>load</b> <code>{html.escape(str(self.data.get('url')))}</code> "
                f"({html.escape(str(self.data.get('prompts')))} prompts, {self.data.get('max_tokens')} output tokens)"
                f"<table><tr>{head}</tr>{body}</table><small>{html.escape(self.data.get('covers', ''))}</small></div>")


def _fmt(v) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.2f}"
    return html.escape(str(v))


def _nan_none(o):
    return None if isinstance(o, float) and math.isnan(o) else str(o)


@recorded("bench")
def load_test(url: str, *, rate: float | None = None, concurrency: int | None = None, arrival: str = "poisson",
              requests: int = 100, model: str | None = None, chat: bool = False, prompts="random",
              prompt_tokens: int = 128, max_tokens: int = 128, warmup: int = 2, slo: dict | None = None,
              seed: int = 0, timeout: float = 300.0, max_inflight: int = 512,
              save: str | Path | None = None, repeats: int = 1) -> LoadResult:
    """One load level against ``url``: ``rate`` req/s (open loop) or ``concurrency`` workers."""
    return sweep(url, rates=[rate] if rate is not None else None,
                 concurrencies=[concurrency] if concurrency is not None else None, arrival=arrival,
                 requests=requests, model=model, chat=chat, prompts=prompts, prompt_tokens=prompt_tokens,
                 max_tokens=max_tokens, warmup=warmup, slo=slo, seed=seed, timeout=timeout,
                 max_inflight=max_inflight, save=save, repeats=repeats)


def _served_model(url: str) -> str:
    """The first model the server lists at ``/v1/models``."""
    data = get_json(url, "/v1/models")
    try:
        return data["data"][0]["id"]
    except (KeyError, IndexError, TypeError):
        raise BenchError(f"{url}/v1/models: no model listed ({str(data)[:120]})") from None


def _level(mode: str, target, runs: list[tuple[list[dict], float, int]], slo: dict | None) -> dict:
    """One load level's entry: its summary over every repeat's requests (with 95 % intervals of the
    headline figures over the repeats when there are several), each repeat's summary, the requests."""
    reqs = [r for rr, _, _ in runs for r in rr]
    summ = summarize(reqs, sum(w for _, w, _ in runs), slo)
    summ["late_sends"] = sum(x for _, _, x in runs)
    summ["repeats"] = len(runs)
    per = [dict(summarize(rr, w, slo), late_sends=x) for rr, w, x in runs]
    if len(per) > 1:
        for key in CI_KEYS:
            if key in summ:
                _, summ[f"{key}_lo"], summ[f"{key}_hi"] = mean_ci([x[key] for x in per])
    label = f"{target:g} req/s" if mode == "rate" else f"c={target}"
    return {"mode": mode, "target": target, "label": label, "summary": summ, "per_repeat": per, "requests": reqs}


@recorded("bench")
def sweep(url: str, *, rates: Sequence[float] | None = None, concurrencies: Sequence[int] | None = None,
          arrival: str = "poisson", requests: int = 100, model: str | None = None, chat: bool = False,
          prompts="random", prompt_tokens: int = 128, max_tokens: int = 128, warmup: int = 2,
          slo: dict | None = None, seed: int = 0, timeout: float = 300.0, max_inflight: int = 512,
          save: str | Path | None = None, repeats: int = 1) -> LoadResult:
    """Several load levels (``rates`` in req/s, open loop, and/or ``concurrencies``), each with its
    own fresh prompts; the result's ``plot()`` is the throughput-latency curve. With ``repeats`` > 1
    every level runs that many times, in rounds (each round every level once), and the headline
    figures get 95 % Student-t intervals over the repeats (``<figure>_lo``/``_hi``); percentiles in
    the summary are over the requests of all repeats."""
    if arrival not in ("poisson", "constant"):
        raise BenchError(f"arrival must be 'poisson' or 'constant', not {arrival!r}")
    if not rates and not concurrencies:
        raise BenchError("load: give rate(s) (requests per second) or concurrency level(s)")
    if slo:
        meets({"ok": True, "ttft": 0, "tpot": 0, "latency": 0, "itl": []}, slo)  # unknown names fail now
    if model is None:
        model = _served_model(url)
    levels = [("rate", float(r)) for r in (rates or [])] + [("concurrency", int(c)) for c in (concurrencies or [])]
    all_prompts = make_prompts(requests * len(levels) * max(1, repeats) + max(0, warmup), source=prompts,
                               prompt_tokens=prompt_tokens, seed=seed)
    for p in all_prompts[:max(0, warmup)]:
        stream_request(url, model=model, prompt=p, max_tokens=max_tokens, chat=chat, timeout=timeout)
    out: dict[str, Any] = {"url": url, "model": model, "endpoint": "chat" if chat else "completions",
                           "arrival": arrival, "prompts": prompts if isinstance(prompts, str) else "given list",
                           "prompt_tokens": prompt_tokens, "max_tokens": max_tokens, "requests_per_level": requests,
                           "warmup": warmup, "slo": slo or {}, "seed": seed, "started": time.time(),
                           "repeats": max(1, repeats),
                           "covers": ("percentiles over requests (TTFT, TPOT, E2E) or over all token gaps (ITL) "
                                      + ("of one run per level; no repeat-to-repeat interval" if repeats <= 1 else
                                         f"of {repeats} runs per level, run in rounds; *_lo/*_hi: 95 % interval of "
                                         "the figure over those runs (run-to-run noise and drift during the sweep)")),
                           "levels": []}
    base = max(0, warmup)
    runs: dict[int, list[tuple[list[dict], float, int]]] = {k: [] for k in range(len(levels))}
    nxt = base
    for rep in range(max(1, repeats)):  # rounds: every level once per round, so drift falls on all alike
        for k, (mode, target) in enumerate(levels):
            first = nxt  # prompt_id: the prompt's index in the sweep's prompt set (distinct prompts count)
            ps = all_prompts[nxt: nxt + requests]
            nxt += requests
            late = 0
            if mode == "rate":
                timings, wall, late = _run_open(url, model, ps, target, arrival, seed + k + 1000 * rep, max_tokens,
                                                chat, timeout, max_inflight)
            else:
                timings, wall = _run_closed(url, model, ps, target, max_tokens, chat, timeout)
            runs[k].append(([dict(t.to_dict(), repeat=rep, prompt_id=first + (t.prompt_id or 0)) for t in timings],
                            wall, late))
    for k, (mode, target) in enumerate(levels):
        out["levels"].append(_level(mode, target, runs[k], slo))
    if not any(lv["summary"]["requests_ok"] for lv in out["levels"]):
        errors = {r["error"] for lv in out["levels"] for r in lv["requests"] if r["error"]}
        raise BenchError(f"{url}: every request failed ({'; '.join(sorted(errors))[:300]})")
    res = LoadResult(out)
    if save is not None:
        res.save(save)
    return res
