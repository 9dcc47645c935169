"""LoadResult, the one result type of every kit benchmark, the figures of a load level as ``vllm bench serve``,
SGLang ``bench_serving``, aiperf and guidellm compute them, and :func:`read_result`, the one reader of the kit's
own result files.

Per level: mean, p50, p90, p99 of TTFT, ITL, TPOT and E2E (ms), request and output-token throughput,
**goodput** (requests per second that met every SLO given, as vLLM's ``--goodput``), one stream's
speed (``user_tok_s``), ``distinct_prompts`` (different prompt texts sent, by hash: a dataset smaller
than the requests is cycled and counted as it is), prefix-cache hits from usage (``cached_tokens``,
``cache_hit_share`` over the requests whose server reported them), the mean HTTP phases, and the
steady state (warm-up excluded and said). Every request is kept (``requests``, saved as JSON).

What a level's figures cover: ``repeats`` runs of ``requests`` requests (default one); percentiles
are over requests (TTFT, TPOT, E2E) or over all token gaps (ITL), as in vLLM; with repeats the
headline figures also get a 95 % interval over the runs (``LoadResult.data["covers"]`` says so).
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from kit.bench._client import PHASES
from kit.bench._stats import TOO_FEW, finite, mean_ci, median, percentile
from kit.bench._steady import steady_state
from kit.errors import BenchError, LogFormatError
from kit.logs import kit_rows, normalise_kit_result, read_kit_result
from kit.stats import is_nan
from kit.util import call_settings, frame_figures, jsonable, write_atomic

DEFINITIONS = ("TTFT, ITL, TPOT as vLLM's `vllm bench serve` (and SGLang's bench_serving) define them: "
               "TTFT = first token chunk (answer text or reasoning) - send; ITL = gaps between token chunks; "
               "TPOT = (latency - TTFT) / (output tokens - 1); decode tok/s = median over requests of 1 / TPOT; "
               "output tok/s = output tokens / wall time of all requests of the level")

STATS = ("mean", "p50", "p90", "p99")
LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
# figures that get an interval over repeats
CI_KEYS = ("decode_tok_s", "request_throughput", "output_tok_s", "goodput", "ttft_ms_mean", "ttft_ms_p50",
           "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99", "tpot_ms_mean", "e2e_ms_p50", "e2e_ms_p99")
__all__ = ["DEFINITIONS", "LoadResult", "level_entry", "meets", "read_result", "summarize"]


def _dist(values: list[float]) -> dict[str, float]:
    xs = finite(values)
    if not xs:
        return {s: math.nan for s in (*STATS, "std")}
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else math.nan
    return {"mean": mean, "p50": percentile(xs, 50), "p90": percentile(xs, 90), "p99": percentile(xs, 99),
            "std": std}  # std: the spread a gate weighs a mean's change against (vllm bench serve saves it)


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
    out["user_tok_s"] = 1e3 / out["tpot_ms_mean"] if out["tpot_ms_mean"] > 0 else math.nan  # one stream's speed
    out["decode_tok_s"] = median([1e3 / x for x in series["tpot_ms"] if x > 0])  # the typical request's speed
    out_tok = sum(r["output_tokens"] for r in ok)
    out["output_tokens"] = out_tok
    out["reasoning_tokens"] = sum(r.get("reasoning_tokens", 0) for r in ok)
    out["answer_tokens"] = sum(r.get("answer_tokens", r["output_tokens"]) for r in ok)
    out["request_throughput"] = len(ok) / wall if wall > 0 else math.nan
    out["output_tok_s"] = out_tok / wall if wall > 0 else math.nan
    out["distinct_prompts"] = len({r.get("prompt_hash", r.get("prompt_id")) for r in requests})
    out.update(_cache_and_phases(ok))
    if slo:
        good = sum(1 for r in ok if meets(r, slo))
        out["goodput"] = good / wall if wall > 0 else math.nan
        out["slo_met_share"] = good / len(requests) if requests else math.nan
    return out


def _cache_and_phases(ok: list[dict]) -> dict[str, Any]:
    """Prefix-cache hits from usage (``cached_tokens`` over the prompt tokens of the requests whose
    server reported it; None where none did) and the mean HTTP phases (ms)."""
    told = [r for r in ok if r.get("cached_tokens") is not None]
    prompt = sum(r.get("prompt_tokens") or 0 for r in told)
    out: dict[str, Any] = {"cached_tokens": sum(r["cached_tokens"] for r in told) if told else None,
                           "cache_reported_requests": len(told),
                           "cache_hit_share": (sum(r["cached_tokens"] for r in told) / prompt) if prompt else None}
    for k in PHASES:
        xs = [r["phases"][k] for r in ok if (r.get("phases") or {}).get(k) is not None]
        out[f"http_{k}_mean"] = sum(xs) / len(xs) if xs else math.nan
    return out


def steady_summary(requests: list[dict], wall: float, slo: dict | None) -> dict[str, Any]:
    """The level's figures over its steady state (warm-up excluded), with what was excluded and why."""
    st = steady_state(requests)
    ok = [r for r in requests if r.get("ok")]
    if not st["excluded"] or not ok:
        return {"said": st["said"], "warmup_s": st["warmup_s"], "excluded": 0, "slices": st["slices"]}
    t_first = min(r["start"] for r in ok)
    keep = [r for r in requests if r["start"] - t_first >= st["warmup_s"]]
    span = max(r["start"] + (r["latency"] if math.isfinite(r["latency"]) else 0) for r in keep) - \
        min(r["start"] for r in keep) if keep else 0.0
    summ = summarize(keep, min(wall, span) if span > 0 else wall, slo)
    return {"said": st["said"], "warmup_s": st["warmup_s"], "excluded": st["excluded"], "slices": st["slices"],
            "figures": {k: summ[k] for k in ("requests_ok", "ttft_ms_p50", "ttft_ms_mean", "e2e_ms_p50",
                                             "tpot_ms_mean", "output_tok_s", "request_throughput")}}


def level_entry(mode: str, target, label: str, runs: list[dict], slo: dict | None) -> dict:
    """One level's entry: the summary over every repeat (95 % intervals of the headline figures over
    the repeats when there are several), each repeat's summary, the watchers', the requests. A run is
    ``{"requests", "wall"}`` plus, where the client was watched, ``late``, ``client``, ``stalled_attempts``."""
    reqs = [r for g in runs for r in g["requests"]]
    summ = summarize(reqs, sum(g["wall"] for g in runs), slo)
    summ["late_sends"] = sum(g.get("late", 0) for g in runs)
    summ["repeats"] = len(runs)
    watched = [g for g in runs if "client" in g]
    if watched:
        summ["client_lag_ms_max"] = max(g["client"]["client_lag_ms_max"] for g in watched)
        summ["client_stalled"] = any(g["client"]["client_stalled"] for g in watched)
        summ["reruns"] = (sum(len(g["stalled_attempts"]) for g in watched)
                          - sum(g["client"]["client_stalled"] for g in watched))
    per = [dict(summarize(g["requests"], g["wall"], slo), late_sends=g.get("late", 0)) for g in runs]
    if len(per) > 1:
        for key in CI_KEYS:
            if key in summ:
                _, summ[f"{key}_lo"], summ[f"{key}_hi"] = mean_ci([x[key] for x in per])
    steady = steady_summary(runs[0]["requests"], runs[0]["wall"], slo) if len(runs) == 1 else None
    out = {"mode": mode, "target": target, "label": label, "summary": summ, "per_repeat": per, "requests": reqs,
           "client": [dict(g["client"], stalled_attempts=g["stalled_attempts"]) for g in watched], "steady": steady}
    for key in ("server_metrics", "gpu"):
        if key in runs[0]:
            out[key] = [g[key] for g in runs]
    return out


def read_result(path: str | Path) -> "LoadResult | None":
    """The kit's result file at ``path`` (``single_stream``, ``load_test``, ``sweep``, the searches,
    ``kit bench run``; older single-stream files included), read by the one reader
    (:func:`kit.logs.read_kit_result`), as a :class:`LoadResult`; None when the file is not a kit
    result (another tool's output). BenchError naming the file when it cannot be read."""
    if not Path(path).is_file():
        raise BenchError(f"{path}: no such result file")
    try:
        data = read_kit_result(path)
    except LogFormatError as exc:
        raise BenchError(str(exc)) from None
    return None if data is None else LoadResult(data)


class LoadResult:
    """What any kit benchmark measured (:func:`single_stream`, :func:`load_test`, :func:`sweep`, the
    searches): ``levels`` (one dict per level with its ``summary`` and every request), ``table`` (one
    row per level), ``save``/``load`` as JSON (:func:`read_result` reads either format)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = normalise_kit_result(data)
        for lv in self.data["levels"]:
            if "summary" not in lv:  # regrouped from an older file: the figures from its requests and runs
                runs = [{"requests": [q for q in lv["requests"] if q.get("repeat") == g["repeat"]], "wall": g["wall"]}
                        for g in lv.pop("runs")]
                lv.update(level_entry(lv["mode"], lv["target"], lv["label"], runs, None))

    @property
    def url(self) -> str | None:
        return self.data.get("url")

    @property
    def tok_s(self) -> float:
        """Batch-1 decode tok/s (``decode_tok_s`` of the concurrency-1 level); NaN if it was not run."""
        row = next((r for r in self.summary() if r["mode"] == "concurrency" and r["target"] == 1), None)
        return row.get("decode_tok_s", math.nan) if row else math.nan

    @property
    def levels(self) -> list[dict]:
        return self.data["levels"]

    @property
    def requests(self) -> list[dict]:
        return [dict(r, level=lv["label"]) for lv in self.levels for r in lv["requests"]]

    def summary(self) -> list[dict]:
        """One row per level: its label, kind (``mode``), target (and ``concurrency`` for a closed-loop
        level) and figures."""
        return [dict(level=lv["label"], mode=lv["mode"], target=lv["target"],
                     **({"concurrency": lv["target"]} if lv["mode"] == "concurrency" else {}), **lv["summary"])
                for lv in self.levels]

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def rows(self):
        """One row per level in the columns of other tools' benchmark output (``kit.logs.parse_bench``'s:
        ``completed``, ``output_throughput``, ``mean_ttft_ms``, ``std_tpot_ms``, ``max_concurrency`` ...),
        so ``kit bench parse`` and the bench gate read the kit's results as they read vLLM's."""
        return pd.DataFrame(kit_rows(self.data, str(self.url)))

    @property
    def table(self):
        return pd.DataFrame(self.summary())

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(p, self.to_json() + "\n")
        return p

    def to_json(self) -> str:
        """The result as strict JSON (NaN, which JSON has not, as null): what ``save`` writes."""
        return json.dumps(jsonable(self.data), indent=1, default=str, allow_nan=False)

    @classmethod
    def load(cls, path: str | Path) -> "LoadResult":
        """The result saved at ``path`` (:func:`read_result`); BenchError if it is not a kit result."""
        res = read_result(path)
        if res is None:
            raise BenchError(f"{path}: not a kit bench result (no levels, nor repeats and requests)")
        return res

    def plot(self, metric: str = "e2e_ms", stat: str = "p50", **kw):
        """Throughput against latency, one point per level (:func:`kit.plots.throughput_latency`); for a
        ``single_stream`` run, decode and output tok/s against concurrency (:func:`kit.plots.concurrency_scaling`)."""
        from kit.plots import concurrency_scaling, throughput_latency  # deferred: matplotlib only when drawn

        if self.data.get("preset") == "single_stream":
            return concurrency_scaling(self, **kw)
        return throughput_latency(self, metric=metric, stat=stat, **kw)

    def plot_cdf(self, metric: str = "ttft_ms", **kw):
        """The latency CDF of each level (:func:`kit.plots.latency_cdf`)."""
        from kit.plots import latency_cdf  # deferred: matplotlib only when drawn

        return latency_cdf(self, metric=metric, **kw)

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this benchmark: the summary table and its figures per level."""
        table = self.table
        key = "level" if "level" in table.columns else "concurrency" if "concurrency" in table.columns else None
        url = args.get("url") or self.data.get("url")
        return {"inputs": [url] if url else [], "settings": call_settings(args), "figures": frame_figures(table, key),
                "tables": {"summary": table}}

    def __repr__(self) -> str:
        def f(v, nd: int) -> str:  # a figure saved as null (NaN in memory) shows as "-"
            return "-" if v is None or is_nan(v) else f"{v:.{nd}f}"

        parts = [f"{r['level']}: {f(r.get('output_tok_s'), 1)} tok/s, TTFT p50 {f(r.get('ttft_ms_p50'), 1)} ms, "
                 f"ITL p99 {f(r.get('itl_ms_p99'), 2)} ms" for r in self.summary()]
        flags = (self.data.get("validity") or {}).get("flags") or []
        tail = f"; NOT VALID: {'; '.join(flags)}" if flags else ""
        return f"LoadResult({self.data.get('url')!r}; " + "; ".join(parts) + tail + ")"

    def _repr_html_(self) -> str:
        rows = self.summary()
        cols = ["level", "requests_ok", "requests_failed", "distinct_prompts", "request_throughput", "output_tok_s",
                "decode_tok_s"] + \
            [f"{m}_{s}" for m in LATENCIES for s in ("mean", "p50", "p99")] + \
            (["goodput"] if self.data.get("slo") else []) + \
            (["cache_hit_share"] if any(r.get("cache_hit_share") is not None for r in rows) else []) + \
            (["client_stalled"] if any(r.get("client_stalled") for r in rows) else [])
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = ""
        for r in rows:
            body += "<tr>" + "".join(f"<td>{html.escape(_ci(r, c, 2)) if c in CI_KEYS else _fmt(r.get(c))}</td>"
                                     for c in cols) + "</tr>"
        said = [f"{lv['label']}: {lv['steady']['said']}" for lv in self.levels if lv.get("steady")]
        notes = "".join(f"<br>{html.escape(n)}" for n in list(self.data.get("notes", [])) + said)
        return (f"<div><b>load</b> <code>{html.escape(str(self.data.get('url')))}</code> "
                f"({html.escape(str(self.data.get('prompts')))} prompts, {self.data.get('max_tokens')} output tokens, "
                f"seed {self.data.get('seed')})<table><tr>{head}</tr>{body}</table>"
                f"<small>{html.escape(self.data.get('covers', ''))}{notes}<br>{html.escape(DEFINITIONS)}</small></div>")


def _ci(r: dict, m: str, nd: int) -> str:
    """A figure with its 95 % interval over the repeats, or why it has none (too few repeats)."""
    v, lo, hi = r.get(m), r.get(f"{m}_lo"), r.get(f"{m}_hi")
    if v is None or is_nan(v):
        return "n/a"
    if lo is None or hi is None or is_nan(lo):
        return f"{v:.{nd}f} ({TOO_FEW})" if f"{m}_lo" in r else f"{v:.{nd}f}"
    return f"{v:.{nd}f} [{lo:.{nd}f}, {hi:.{nd}f}]"


def _fmt(v) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.2f}"
    return html.escape(str(v))

