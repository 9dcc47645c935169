"""The kit's own benchmark result files (``kit.bench`` results, ``kit bench run --out``) in one shape, the one
reader that ``kit audit``, ``kit bench parse``/``compare``, ``kit.bench`` and the MCP tools share: that of
``kit.bench.LoadResult`` (run settings, and ``levels`` each with ``mode``, ``target``, ``label``, ``summary`` and
``requests``). An older single-stream file (``repeats`` and a flat ``requests`` list) is regrouped into
concurrency levels with ``runs`` and no ``summary`` (the figures are ``kit.bench``'s to compute).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kit.errors import LogFormatError


def is_kit_result(data: Any) -> bool:
    """Whether a parsed JSON value is a kit bench result (either format)."""
    return isinstance(data, dict) and (isinstance(data.get("levels"), list) or (
        isinstance(data.get("repeats"), list) and isinstance(data.get("requests"), list)))


def read_kit_result(path: str | Path) -> dict | None:
    """The kit result at ``path`` in the one shape, or None when the file is not one (another tool's
    output, or not JSON). LogFormatError naming the file when it claims to be one and is broken."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(1)
            if head != "{":
                return None
            data = json.loads(head + f.read())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not is_kit_result(data):
        return None
    try:
        return normalise_kit_result(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LogFormatError(f"{path}: a kit bench result with a broken entry ({type(exc).__name__}: {exc})",
                             path=str(path)) from None


def normalise_kit_result(data: dict) -> dict:
    """A kit result in the one shape (a result already in it is returned as it is)."""
    if "levels" in data:
        for lv in data["levels"]:
            if not isinstance(lv, dict) or not isinstance(lv.get("requests", []), list):
                raise ValueError(f"level {lv!r:.60}: not a level with a requests list")
        return data
    out = {k: v for k, v in data.items() if k not in ("repeats", "requests")}
    out["repeats"] = max((int(r.get("repeat", 0)) + 1 for r in data["repeats"]), default=1)
    if "prompts" not in data and "prompt_words" in data and "seed" not in data:
        out["prompts"] = "same"  # the older single_stream sent one fixed text
    out["requests_per_level"] = data.get("requests_per_repeat")
    out["covers"] = "levels regrouped from a single_stream result of the older format (its repeats and requests)"
    out["preset"] = "single_stream"
    levels = []
    for c in dict.fromkeys(int(r["concurrency"]) for r in data["repeats"]):
        reps = [r for r in data["repeats"] if int(r["concurrency"]) == c]
        levels.append({"mode": "concurrency", "target": c, "label": f"c={c}",
                       "runs": [{"repeat": r.get("repeat", 0), "wall": float(r.get("wall_s") or math.nan)}
                                for r in reps],
                       "requests": [dict(q) for q in data["requests"] if q.get("concurrency") == c]})
    out["levels"] = levels
    return out


def kit_requests(data: dict) -> list[dict]:
    """Every request of a kit result (either format), level by level."""
    if isinstance(data.get("levels"), list):
        return [r for lv in data["levels"] if isinstance(lv, dict) for r in lv.get("requests") or []]
    return list(data.get("requests") or [])


# a level's summary figure -> the column other tools' output gives it (kit.logs.parse_bench's names)
_COLUMNS = {"requests_ok": "completed", "requests_failed": "failed", "duration_s": "duration_s",
            "output_tok_s": "output_throughput", "request_throughput": "request_throughput",
            "decode_tok_s": "decode_tok_s", "goodput": "request_goodput", "output_tokens": "total_output_tokens"}
_LATENCY = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2e_latency"}
_STATS = {"mean": "mean", "std": "std", "p50": "median", "p90": "p90", "p99": "p99"}


def kit_rows(data: dict, name: str) -> list[dict]:
    """One row per level of a kit result, in the columns of other tools' benchmark output
    (``completed``, ``output_throughput``, ``mean_ttft_ms``, ``median_tpot_ms``, ``p99_itl_ms``,
    ``std_*_ms``, ``max_concurrency`` or ``request_rate``). A level without figures
    (an older single-stream file, before ``kit.bench`` computed them) is a LogFormatError."""
    rows = []
    for i, lv in enumerate(data["levels"]):
        summ = lv.get("summary")
        if not isinstance(summ, dict):
            raise LogFormatError(f"{name}: an older kit single_stream result: its figures are computed by "
                                 "kit.bench (kit.bench.read_result, or 'kit bench parse')", path=name)
        row: dict[str, Any] = {"tool": "kit.bench", "engine": data.get("engine"), "line": i + 1,
                               "level": lv.get("label"), "mode": lv.get("mode"),
                               "model": data.get("model"), "url": data.get("url")}
        if lv.get("mode") == "concurrency":
            row["max_concurrency"] = lv.get("target")
        elif lv.get("mode") == "rate":
            row["request_rate"] = lv.get("target")
        for k, col in _COLUMNS.items():
            if summ.get(k) is not None:
                row[col] = summ[k]
        for m, col in _LATENCY.items():
            for s, pre in _STATS.items():
                if summ.get(f"{m}_{s}") is not None:
                    row[f"{pre}_{col}_ms"] = summ[f"{m}_{s}"]
        rows.append(row)
    return rows

