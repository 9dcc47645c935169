"""Cache usage beside the KV cache: SGLang's SWA and Mamba fields, vLLM's KV percentage."""
from __future__ import annotations

from pathlib import Path

import kit.logs

ROOT = Path(__file__).resolve().parents[2]


def test_mamba_cache_beside_kv_on_a_real_hybrid_log(shared_data):
    log = kit.logs.read(shared_data / "logs" / "sglang_recent_npu_hybrid_mamba_spec_pr30047.log")
    c = log.caches.set_index("cache")
    assert c.loc["Mamba state", "usage_last"] == 0.80 and c.loc["Mamba state", "count_max"] == 160
    assert c.loc["KV (full attention)", "usage_last"] == 0.74
    assert log.to_dict(tables=False)["caches"][1]["cache"] == "Mamba state"


def test_swa_and_vllm_kv():
    swa = kit.logs.read(ROOT / "tests/data/logs/sglang_0.5.12_swa_pd.log").caches.set_index("cache")
    assert set(swa.index) == {"KV (full attention)", "SWA (sliding window)"}
    vl = kit.logs.read(ROOT / "tests/data/logs/vllm_0.8.5_v1.log").caches
    assert list(vl["cache"]) == ["KV (full attention)"] and vl["usage_max"].max() <= 1.0


def test_impossible_usage_is_dropped_and_counted():
    lines = [f"[2026-01-01 00:00:0{i}] Decode batch, #running-req: 1, #full token: 10, full token usage: {u}, "
             f"mamba num: 1, mamba usage: 0.01, cuda graph: True, gen throughput (token/s): 50.0, #queue-req: 0\n"
             for i, u in enumerate(["0.10", "1.70", "0.20"])]
    c = kit.logs.read_lines(lines, engine="sglang").caches.set_index("cache")
    assert c.loc["KV (full attention)", "dropped"] == 1
    assert c.loc["KV (full attention)", "usage_max"] == 0.20
