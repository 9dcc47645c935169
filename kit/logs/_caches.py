"""Cache usage that engines print, side by side (private to ``kit.logs``): SGLang's ``token usage`` (dense),
``full``/``swa token usage`` (sliding-window hybrids) or ``mamba usage`` (Mamba / linear-attention hybrids, one
state per running request, not per token) per Decode/Prefill line; vLLM's ``GPU KV cache usage: x%``.
"""
from __future__ import annotations

import pandas as pd

# (cache, usage column, count column, count unit, table)
_FIELDS = (
    ("KV (full attention)", "token_usage", "num_used_tokens", "tokens", "decode"),
    ("KV (full attention)", "full_token_usage", "full_token", "tokens", "decode"),
    ("SWA (sliding window)", "swa_token_usage", "swa_token", "tokens", "decode"),
    ("Mamba state", "mamba_usage", "mamba_num", "states", "decode"),
    ("KV (full attention)", "gpu_kv_cache_usage", None, "", "throughput"),
)
COLUMNS = ("cache", "source", "lines", "usage_mean", "usage_max", "usage_last", "count_max", "count_unit",
           "dropped")


def cache_usage(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per cache the log reports (KV, SWA, Mamba state): usage mean / max / last (fraction
    0-1) and the largest count, from the decode lines (SGLang; prefill lines when no decode line
    has the field) or the throughput lines (vLLM, whose percentage is turned into a fraction).
    Values that are not numbers or lie outside 0-100% are left out and counted in ``dropped``."""
    rows = []
    for cache, col, cnt, unit, table in _FIELDS:
        t = tables.get(table)
        src = f"{table} lines"
        if (t is None or col not in t or not t[col].notna().any()) and table == "decode":
            t, src = tables.get("prefill"), "prefill lines"
        if t is None or col not in t:
            continue
        raw = t[col].dropna()
        u = pd.to_numeric(raw, errors="coerce").dropna()
        u = u[(u >= 0) & (u <= (100 if col == "gpu_kv_cache_usage" else 1.0))]  # a usage outside 0-100%: dropped
        if not len(u):
            continue
        if col == "gpu_kv_cache_usage":
            u = u / 100.0
        c = pd.to_numeric(t[cnt], errors="coerce").dropna() if cnt and cnt in t else pd.Series(dtype=float)
        rows.append({"cache": cache, "source": f"{src}: {col.replace('_', ' ')}", "lines": int(len(u)),
                     "usage_mean": float(u.mean()), "usage_max": float(u.max()), "usage_last": float(u.iloc[-1]),
                     "count_max": float(c.max()) if len(c) else float("nan"), "count_unit": unit,
                     "dropped": int(len(raw) - len(u))})
    return pd.DataFrame(rows, columns=list(COLUMNS))
