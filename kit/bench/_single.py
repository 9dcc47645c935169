"""single_stream: batch-1 decode speed of a live server, plus a small concurrency sweep.

For each concurrency level ``c`` and each of ``repeats`` repeats, ``requests`` streamed requests
are sent by ``c`` workers (each worker one request at a time) after ``warmup`` unmeasured ones. A
repeat yields: the median per-request decode tok/s (``1 / TPOT``), the median TTFT and ITL, and the
aggregate output throughput (output tokens of the repeat / its wall time). The table gives, per
level, the mean of the repeats with a 95 % Student-t interval, so run-to-run noise shows.
"""
from __future__ import annotations

import contextlib
import html
import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

from kit.bench._client import RequestTiming, closed_loop, get_json, stream_request
from kit.bench._stats import TOO_FEW, mean_ci, median
from kit.errors import BenchError
from kit.util import recorded

DEFINITIONS = ("TTFT, ITL, TPOT as vLLM's `vllm bench serve` (and SGLang's bench_serving) define them: "
               "TTFT = first token chunk (answer text or reasoning) - send; ITL = gaps between token chunks; "
               "TPOT = (latency - TTFT) / (output tokens - 1); decode tok/s = 1 / TPOT per request; "
               "output tok/s = output tokens / wall time of all requests at that concurrency")
METRICS = ("decode_tok_s", "ttft_ms", "itl_ms", "tpot_ms", "output_tok_s")


def _prompt(n: int) -> str:
    return " ".join(f"w{i % 97}" for i in range(max(1, n)))


def _repeat_row(timings: list[RequestTiming], wall: float) -> dict[str, float]:
    ok = [t for t in timings if t.ok]
    itls = [x for t in ok for x in t.itl]
    return {"decode_tok_s": median([t.decode_tok_s for t in ok]),
            "ttft_ms": median([t.ttft * 1e3 for t in ok]),
            "itl_ms": median([x * 1e3 for x in itls]),
            "tpot_ms": median([t.tpot * 1e3 for t in ok]),
            "output_tok_s": sum(t.output_tokens for t in ok) / wall if wall > 0 else math.nan,
            "reasoning_tokens": median([t.reasoning_tokens for t in ok]),
            "answer_tokens": median([t.answer_tokens for t in ok]),
            "ok": len(ok), "failed": len(timings) - len(ok)}


class BenchResult:
    """What :func:`single_stream` measured: every request (``requests``), one row per repeat
    (``repeats``) and the table of means with 95 % intervals per concurrency (``table``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def url(self) -> str:
        return self.data["url"]

    @property
    def repeats(self) -> list[dict]:
        return self.data["repeats"]

    @property
    def requests(self) -> list[dict]:
        return self.data["requests"]

    def summary(self) -> list[dict]:
        """Per concurrency: mean, CI low/high of each metric over the repeats."""
        rows = []
        for c in sorted({r["concurrency"] for r in self.repeats}):
            reps = [r for r in self.repeats if r["concurrency"] == c]
            row: dict[str, Any] = {"concurrency": c, "repeats": len(reps),
                                   "requests_ok": sum(r["ok"] for r in reps),
                                   "requests_failed": sum(r["failed"] for r in reps)}
            for k in ("reasoning_tokens", "answer_tokens"):
                row[k] = median([r.get(k, math.nan) for r in reps])
            for m in METRICS:
                mean, lo, hi = mean_ci([r[m] for r in reps])
                row[m], row[f"{m}_lo"], row[f"{m}_hi"] = mean, lo, hi
            rows.append(row)
        return rows

    @property
    def table(self):
        """The summary as a pandas DataFrame (one row per concurrency)."""
        import pandas as pd

        return pd.DataFrame(self.summary())

    @property
    def tok_s(self) -> float:
        """Batch-1 decode tok/s (mean over repeats); NaN if concurrency 1 was not run."""
        row = next((r for r in self.summary() if r["concurrency"] == 1), None)
        return row["decode_tok_s"] if row else math.nan

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.data, indent=1, default=_json_default) + "\n", encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> "BenchResult":
        try:
            return cls(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError) as exc:
            raise BenchError(f"{path}: unreadable bench result ({exc})") from None

    def plot(self, *, title: str | None = None):
        """Decode tok/s per request and aggregate output tok/s against concurrency, with 95 % intervals."""
        import matplotlib.pyplot as plt

        rows = self.summary()
        cs = [r["concurrency"] for r in rows]
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
        for ax, m, label in ((axes[0], "decode_tok_s", "decode tok/s per request"),
                             (axes[1], "output_tok_s", "output tok/s (all requests)")):
            ys = [r[m] for r in rows]
            err = [[max(0.0, r[m] - r[f"{m}_lo"]) if not math.isnan(r[f"{m}_lo"]) else 0 for r in rows],
                   [max(0.0, r[f"{m}_hi"] - r[m]) if not math.isnan(r[f"{m}_hi"]) else 0 for r in rows]]
            ax.errorbar(cs, ys, yerr=err, marker="o", capsize=4)
            ax.set_xlabel("concurrency")
            ax.set_ylabel(label)
            ax.set_xticks(cs)
            ax.grid(alpha=0.3)
        fig.suptitle(title or f"single_stream {self.data.get('model', '')} ({self.data.get('where', 'measured')})",
                     fontsize=10)
        return fig

    def __repr__(self) -> str:
        rows = self.summary()
        parts = [f"c={r['concurrency']}: {r['decode_tok_s']:.1f} tok/s, TTFT {r['ttft_ms']:.1f} ms, "
                 f"ITL {r['itl_ms']:.2f} ms" for r in rows]
        flags = (self.data.get("validity") or {}).get("flags") or []
        tail = f"; NOT VALID: {'; '.join(flags)}" if flags else ""
        return f"BenchResult({self.url!r}, model={self.data.get('model')!r}; " + "; ".join(parts) + tail + ")"

    def _repr_html_(self) -> str:
        rows = self.summary()
        reasoning = any((r.get("reasoning_tokens") or 0) > 0 for r in rows)
        head = "".join(f"<th>{h}</th>" for h in ("concurrency", "decode tok/s (95% CI)", "TTFT ms",
                                                   "ITL ms", "output tok/s", "requests ok/failed")
                       + (("reasoning / answer tokens",) if reasoning else ()))
        body = ""
        for r in rows:
            body += (f"<tr><td>{r['concurrency']}</td><td>{_ci(r, 'decode_tok_s', 1)}</td>"
                     f"<td>{_ci(r, 'ttft_ms', 1)}</td><td>{_ci(r, 'itl_ms', 2)}</td>"
                     f"<td>{_ci(r, 'output_tok_s', 1)}</td><td>{r['requests_ok']}/{r['requests_failed']}</td>"
                     + (f"<td>{r['reasoning_tokens']:.0f} / {r['answer_tokens']:.0f}</td>" if reasoning else "")
                     + "</tr>")
        return (f"<div><b>single_stream</b> <code>{html.escape(self.url)}</code> model "
                f"<code>{html.escape(str(self.data.get('model')))}</code><table><tr>{head}</tr>{body}</table>"
                f"<small>{html.escape(DEFINITIONS)}</small></div>")


def _ci(r: dict, m: str, nd: int) -> str:
    lo, hi = r[f"{m}_lo"], r[f"{m}_hi"]
    if math.isnan(lo):
        return f"{r[m]:.{nd}f} ({TOO_FEW})" if r[m] == r[m] else "n/a"
    return f"{r[m]:.{nd}f} [{lo:.{nd}f}, {hi:.{nd}f}]"


def _json_default(o):
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)


@recorded("bench")
def single_stream(url: str, *, model: str | None = None, chat: bool = False, prompt_tokens: int = 32,
                  max_tokens: int = 64, requests: int = 8, warmup: int = 2, repeats: int = 3,
                  concurrency: Sequence[int] = (1, 2, 4), timeout: float = 120.0,
                  save: str | Path | None = None, prompts="random", seed: int = 0, clocks=None) -> BenchResult:
    """Measure TTFT, ITL and decode tok/s of a live OpenAI-compatible server at ``url``.

    ``chat`` selects ``/v1/chat/completions`` instead of ``/v1/completions``. ``prompt_tokens``
    words are sent as the prompt (the server's tokeniser decides the real count, recorded from
    ``usage``); ``max_tokens`` are generated with ``ignore_eos``. Batch 1 is ``concurrency`` 1.
    ``prompts``: ``"random"`` (default: every request its own prompt, so a prefix cache cannot
    flatter TTFT; the same set for the same ``seed``, so variants see the same prompts),
    ``"same"`` (one prompt for all, the old behaviour), or any source of
    :func:`kit.bench.make_prompts` (``"random-ids"``, a dataset file, a list).
    ``clocks``: ``"local"`` or a Host to sample GPU clocks and throttle reasons on (``nvidia-smi``)
    during the measured requests. The record's ``validity`` says whether the run can be trusted
    (``kit.audit.check_run``: failed requests, short outputs, warm-up, seeded prompts, clocks).
    Raises BenchError naming the URL if the server does not answer or every request fails.
    """
    from kit.audit import ClockSampler, check_run

    if model is None:
        models = get_json(url, "/v1/models")
        try:
            model = models["data"][0]["id"]
        except (KeyError, IndexError, TypeError):
            raise BenchError(f"{url}/v1/models: no model listed ({str(models)[:120]})") from None
    from kit.bench._load import make_prompts

    levels = [int(c) for c in concurrency]
    total = max(0, warmup) + len(levels) * repeats * requests
    pool = ([_prompt(prompt_tokens)] * total if prompts == "same" else
            make_prompts(total, source=prompts, prompt_tokens=prompt_tokens, seed=seed))
    for p in pool[:max(0, warmup)]:
        stream_request(url, model=model, prompt=p, max_tokens=max_tokens, chat=chat, timeout=timeout)
    nxt = max(0, warmup)
    data: dict[str, Any] = {"url": url, "model": model, "endpoint": "chat" if chat else "completions",
                            "prompt_words": prompt_tokens, "prompts": prompts if isinstance(prompts, str) else "list",
                            "max_tokens": max_tokens, "requests_per_repeat": requests,
                            "warmup": warmup, "definitions": DEFINITIONS, "started": time.time(),
                            "seed": seed if prompts != "same" else None, "repeats": [], "requests": []}
    sampler = ClockSampler(host=None if clocks == "local" else clocks) if clocks is not None else None
    with sampler if sampler is not None else contextlib.nullcontext():
        for c in levels:
            for rep in range(repeats):
                timings, wall = closed_loop(url, model, c, requests, pool[nxt:nxt + requests], max_tokens, chat,
                                           timeout)
                nxt += requests
                row = _repeat_row(timings, wall)
                row.update(concurrency=c, repeat=rep, wall_s=wall)
                data["repeats"].append(row)
                data["requests"].extend(dict(t.to_dict(), concurrency=c, repeat=rep) for t in timings)
    if sampler is not None:
        data["clocks"] = sampler.summary()
    if not any(r["ok"] for r in data["repeats"]):
        errors = {r["error"] for r in data["requests"] if r["error"]}
        raise BenchError(f"{url}: every request failed ({'; '.join(sorted(errors))[:300]})")
    data["validity"] = check_run(data, run=url).to_dict()
    result = BenchResult(data)
    if save is not None:
        result.save(save)
    return result
