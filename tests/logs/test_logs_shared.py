"""kit.logs on every real log excerpt in ../shared/data/logs (third-party data, never copied).

Expected values were read by hand from the lines of each file.
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

import kit.logs as L
from kit.errors import LogFormatError

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def logs_dir(shared_data):
    return shared_data / "logs"


def test_every_shared_file_is_covered(logs_dir):
    covered = {
        "nccl_info_2x2080Ti_shm_socket_issue1190.log", "nccl_info_p2p_ipc_read_and_net_socket_issue952.log",
        "nvidia_smi_topo_8x_H100_NV18_ml-engineering.log", "nvidia_smi_topo_8x_RTX4090_pcie_nccl-tests307.log",
        "sglang_0.4.1_prefill_cachehit_issue2777.log", "sglang_0.4.6_prefill_uvicorn_issue6291.log",
        "sglang_0.4.7_server_args_dump_issue7227.log", "sglang_0.5.3post3_eagle3_decode_issue11948.log",
        "sglang_bench_one_batch_pr30147.log", "sglang_bench_serving_result_bs1_pr8552.log",
        "sglang_new_server_args_dict_sm120_club3090_1261.log", "sglang_recent_npu_hybrid_mamba_spec_pr30047.log",
        "vllm_0.6.3_v0_speculative_metrics_issue9539.log", "vllm_bench_serve_result_issue18136.log",
        "vllm_nccl_interleaved_p2p_cumem_pr27521.log", "vllm_v1_specdecoding_format_change_pr15902.log",
        "vllm_v1_specdecoding_intermediate_format_pr24127.log",
    }
    assert {p.name for p in logs_dir.glob("*.log")} == covered


def test_sglang_eagle3_decode_0_5_3(logs_dir):
    d = L.read(logs_dir / "sglang_0.5.3post3_eagle3_decode_issue11948.log")
    assert d.engine == "sglang" and d.version == "unknown"
    assert (d.lines, len(d.decode), len(d.prefill), d.unknown_lines, d.torn_lines) == (7, 5, 1, 1, 0)
    dec = d.decode
    assert list(dec["accept_len"]) == [2.17, 1.95, 1.80, 2.05, 1.80]
    assert list(dec["accept_rate"]) == [0.54, 0.49, 0.45, 0.51, 0.45]
    assert list(dec["gen_throughput"]) == [0.39, 178.86, 165.41, 188.68, 165.59]
    assert list(dec["token"]) == [108, 186, 258, 340, 412]
    assert set(dec["ranks"]) == {"TP0"} and set(dec["graph_kind"]) == {"cuda"} and dec["graph"].all()
    assert set(dec["format"]) == {"dot"}
    assert list(dec["after_idle"]) == [True, False, False, False, False]  # 0.39 tok/s first window
    assert dec["time"].iloc[0] == pd.Timestamp("2025-10-22 10:27:57")
    pre = d.prefill.iloc[0]
    assert (pre["new_seq"], pre["new_token"], pre["cached_token"], pre["queue_req"]) == (1, 28, 0, 0)
    # 0.5.3 accept rate = accept len / N: every pair fits N = 4 (2.17/4 = 0.5425 -> 0.54), so k = 3
    assert d.k == 3
    assert any("inferred k=3" in w for w in d.warnings)
    spec = d.spec
    assert list(spec["k"]) == [3] * 5
    assert spec["draft_acceptance_rate"].tolist() == pytest.approx([1.17 / 3, 0.95 / 3, 0.8 / 3, 1.05 / 3, 0.8 / 3])
    s = L.spec_summary(d)
    assert s.windows == 4 and s.excluded_windows == 1
    assert s.mean_acceptance_length == pytest.approx((1.95 + 1.80 + 2.05 + 1.80) / 4)
    assert s.draft_acceptance_rate == pytest.approx(0.30)
    assert repr(s) == ("SpecSummary(sglang unknown, k=3: mean acceptance length 1.90 (incl. bonus), "
                       "draft acceptance 30.0% over 4 windows, 1 after-idle excluded)")


def test_sglang_explicit_version_and_k_agree(logs_dir):
    d = L.read(logs_dir / "sglang_0.5.3post3_eagle3_decode_issue11948.log", version="0.5.3.post3", k=3,
               engine="sglang")
    assert d.version == "0.5.3.post3"
    assert not any("inferred" in w or "inconsistent" in w for w in d.warnings)
    assert set(d.spec["definition"]) == {"sglang<=0.5.10: accept rate = accept len / N"}


def test_sglang_npu_hybrid_mamba_new_accept_rate(logs_dir):
    d = L.read(logs_dir / "sglang_recent_npu_hybrid_mamba_spec_pr30047.log")
    assert (len(d.prefill), len(d.decode)) == (4, 1)
    pre = d.prefill
    assert list(pre["new_token"]) == [128, 8064, 9088, 1792]
    assert list(pre["cached_token"]) == [70016, 553600, 1114624, 980864]
    assert list(pre["input_throughput"]) == [16.23, 1292.14, 2114.79, 21186.13]
    assert list(pre["mamba_usage"]) == [0.20, 0.52, 0.80, 0.80]
    assert set(pre["graph_kind"]) == {"npu"} and not pre["graph"].any()
    dec = d.decode.iloc[0]
    assert (dec["running_req"], dec["full_token"], dec["mamba_num"]) == (40, 350592, 160)
    assert (dec["full_token_usage"], dec["mamba_usage"], dec["graph_kind"]) == (0.74, 0.80, "npu")
    # (3.13 - 1) / (4 - 1) = 0.71 fits only the >= 0.5.11 definition: k = 3
    sp = d.spec.iloc[0]
    assert sp["k"] == 3 and sp["definition"].startswith("sglang>=0.5.11")
    assert sp["draft_acceptance_rate"] == pytest.approx(2.13 / 3)


def test_sglang_prefill_0_4_1_cache_hit_rate(logs_dir):
    d = L.read(logs_dir / "sglang_0.4.1_prefill_cachehit_issue2777.log")
    assert len(d.prefill) == 7 and len(d.decode) == 0 and len(d.spec) == 0
    assert list(d.prefill["new_token"]) == [48, 75, 80, 70, 60, 48, 55]
    assert list(d.prefill["queue_req"]) == [0, 62, 61, 60, 59, 58, 57]
    assert list(d.prefill["cache_hit_rate"]) == [0.0] * 7
    assert d.unknown_lines == 2  # the source comment and one uvicorn access line


def test_sglang_prefill_0_4_6_no_rank_tag(logs_dir):
    d = L.read(logs_dir / "sglang_0.4.6_prefill_uvicorn_issue6291.log")
    assert (len(d.prefill), d.unknown_lines) == (3, 11)
    assert list(d.prefill["cached_token"]) == [8027, 16030, 20050]
    assert list(d.prefill["running_req"]) == [28, 30, 34]
    assert d.prefill["ranks"].isna().all()
    assert list(d.prefill["line"]) == [2, 8, 12]


def test_sglang_server_args_repr_truncated(logs_dir):
    d = L.read(logs_dir / "sglang_0.4.7_server_args_dump_issue7227.log")
    a = d.server_args
    assert a["model_path"] == "/mnt/llms/models/Qwen/Qwen3-8B-FP8/"
    assert a["context_length"] == 8000 and a["port"] == 5001 and a["quantization"] is None
    assert a["trust_remote_code"] is False and a["host"] == "0.0.0.0"
    assert "mem_fr" not in a and "mem_fraction_static" not in a  # cut mid-key by the paste
    assert len(a) == 21
    assert any("truncated" in w for w in d.warnings)


def test_sglang_server_args_dict_truncated(logs_dir):
    d = L.read(logs_dir / "sglang_new_server_args_dict_sm120_club3090_1261.log")
    a = d.server_args
    assert a["model_path"] == "/models/qwen3.8-27b-nvfp4"
    assert a["tokenizer_worker_num"] == 1 and a["skip_tokenizer_init"] is False and a["load_format"] == "auto"
    assert len(a) == 8


def test_sglang_bench_one_batch(logs_dir):
    b = L.parse_bench(logs_dir / "sglang_bench_one_batch_pr30147.log")
    assert list(b["phase"]) == ["warmup", "benchmark"]
    assert list(b["prefill_latency_s"]) == [0.02265, 0.01014]
    assert list(b["output_throughput"]) == [170.84, 174.85]  # "Decode.  median throughput"
    assert list(b["median_tpot_ms"]) == pytest.approx([5.85, 5.72])
    assert list(b["overall_throughput"]) == [923.17, 1122.76]
    assert set(b["batch_size"]) == {1} and set(b["tool"]) == {"sglang.bench_one_batch"}


def test_sglang_bench_serving_truncated_block(logs_dir):
    b = L.parse_bench(logs_dir / "sglang_bench_serving_result_bs1_pr8552.log")
    assert len(b) == 1
    r = b.iloc[0]
    assert (r["tool"], r["engine"], r["backend"]) == ("sglang.bench_serving", "sglang", "sglang-oai")
    assert (r["completed"], r["max_concurrency"], r["total_output_tokens_retokenized"]) == (5, 1, 4997)
    assert math.isinf(r["request_rate"])
    assert (r["duration_s"], r["output_throughput"], r["total_throughput"]) == (44.20, 113.12, 226.24)
    assert (r["mean_ttft_ms"], r["median_ttft_ms"], r["p99_ttft_ms"]) == (363.58, 125.85, 1063.32)
    assert (r["mean_itl_ms"], r["median_itl_ms"], r["p95_itl_ms"]) == (8.49, 8.47, 8.66)
    assert (r["mean_e2e_latency_ms"], r["median_e2e_latency_ms"]) == (8837.28, 8599.33)
    assert bool(r["truncated"]) is True  # the paste stops before the closing ===== line


def test_vllm_bench_serve_truncated_block(logs_dir):
    b = L.parse_bench(logs_dir / "vllm_bench_serve_result_issue18136.log")
    r = b.iloc[0]
    assert (r["tool"], r["engine"]) == ("vllm bench serve", "vllm")  # "Total Token throughput" (capital T)
    assert (r["completed"], r["total_input_tokens"], r["total_output_tokens"]) == (50, 1250000, 51200)
    assert (r["duration_s"], r["output_throughput"], r["total_throughput"]) == (7303.93, 7.01, 178.15)
    assert (r["mean_ttft_ms"], r["median_ttft_ms"]) == (2945424.93, 3210790.97)  # wider than the 10-char field


def test_vllm_v0_speculative_metrics(logs_dir):
    d = L.read(logs_dir / "vllm_0.6.3_v0_speculative_metrics_issue9539.log")
    assert d.engine == "vllm" and len(d.spec) == 1
    r = d.spec.iloc[0]
    assert (r["k"], r["accepted_tokens"], r["draft_tokens"], r["emitted_tokens"]) == (3, 8547, 13311, 10616)
    assert r["draft_acceptance_rate"] == 0.642
    # emitted / drafts = 10616 / (13311 / 3) = 2.3926; = system efficiency 0.598 x (k + 1)
    assert r["mean_acceptance_length"] == pytest.approx(10616 * 3 / 13311)
    assert r["mean_acceptance_length"] == pytest.approx(0.598 * 4, abs=0.003)
    assert r["time"] == pd.Timestamp("1900-10-16 19:05:47")  # vLLM prints no year


def test_vllm_v1_format_change_needs_k(logs_dir):
    d = L.read(logs_dir / "vllm_v1_specdecoding_format_change_pr15902.log")
    assert len(d.spec) == 2 and len(d.throughput) == 1
    assert list(d.spec["draft_acceptance_rate"]) == [1.0, 1.0]  # "1.000" (fraction) and "100.0%"
    assert d.spec["mean_acceptance_length"].isna().all()
    assert any("k unknown" in w for w in d.warnings)
    t = d.throughput.iloc[0]
    assert (t["engine_index"], t["prompt_throughput"], t["generation_throughput"], t["running"]) == (0, 1.1, 10.0, 0)
    d3 = L.read(logs_dir / "vllm_v1_specdecoding_format_change_pr15902.log", k=3)
    assert list(d3.spec["mean_acceptance_length"]) == [4.0, 4.0]  # 1 + 66 / (66 / 3)


def test_vllm_v1_intermediate_format(logs_dir):
    d = L.read(logs_dir / "vllm_v1_specdecoding_intermediate_format_pr24127.log")
    r = d.spec.iloc[0]
    assert r["per_position"] == (0.983, 0.949, 0.915, 0.881, 0.712)
    assert (r["k"], r["accepted_tokens"], r["draft_tokens"]) == (5, 262, 295)
    # printed 5.44 = 1 + sum(per-position) -> already includes the bonus token
    assert r["mean_acceptance_length"] == 5.44 and r["draft_acceptance_rate"] == 0.888
    s = L.spec_summary(d)
    assert s.mean_acceptance_length == pytest.approx(1 + 262 / 59)
    assert s.draft_acceptance_rate == pytest.approx(262 / 295)


def test_vllm_nccl_interleaved_torn_line(logs_dir):
    d = L.read(logs_dir / "vllm_nccl_interleaved_p2p_cumem_pr27521.log")
    assert d.engine == "vllm"
    assert d.torn_lines == 1 and any("first at line 6" in w for w in d.warnings)
    assert list(d.nccl["channel"]) == [3, 4, 5, 6]
    assert set(d.nccl["transport"]) == {"P2P/CUMEM/read"}
    assert list(d.nccl["pid"]) == [5016] * 4 and list(d.nccl["dev"]) == [1] * 4
    assert d.nccl_info["transports"] == {"P2P/CUMEM/read": 4}


def test_nccl_shm_socket_no_prefix(logs_dir):
    n = L.parse_nccl(logs_dir / "nccl_info_2x2080Ti_shm_socket_issue1190.log")
    info = L.nccl_summary(n)
    assert info["network"] == "Socket"
    assert info["channels"] == 2 and info["rings"] == ["0 1"]
    assert info["transports"] == {"direct shared memory": 2}
    assert info["nranks"] == 2
    assert info["warnings"] == ["Failed to open libibverbs.so[.1]"]
    assert set(n.loc[n["kind"] == "connection", "transport_family"]) == {"SHM"}


def test_nccl_p2p_ipc_and_net_socket(logs_dir):
    d = L.read(logs_dir / "nccl_info_p2p_ipc_read_and_net_socket_issue952.log")
    n = d.nccl
    assert len(n) == 16 and set(n["kind"]) == {"connection"}
    assert d.nccl_info["transports"] == {"NET/Socket/3": 2, "P2P/IPC/read": 14}
    net = n[n["transport"] == "NET/Socket/3"]
    assert list(net["src"]) == [15, 15] and list(net["dst"]) == [6, 6]
    assert set(net["transport_family"]) == {"NET/Socket"}
    assert set(n["host"]) == {"<cluster_name>"}


@pytest.mark.parametrize("name", ["nvidia_smi_topo_8x_H100_NV18_ml-engineering.log",
                                  "nvidia_smi_topo_8x_RTX4090_pcie_nccl-tests307.log"])
def test_topology_tables_are_not_serving_logs(logs_dir, name):
    with pytest.raises(LogFormatError) as exc:
        L.read(logs_dir / name)
    msg = str(exc.value)
    assert "\n" not in msg and name in msg and "not a serving log" in msg


def test_decode_tok_s_from_logs_and_benchmarks(logs_dir):
    # Decode lines (running-req 1): 0.39 (first window after idle, excluded), 178.86, 165.41, 188.68,
    # 165.59 -> median of the last four = (165.59 + 178.86) / 2.
    log = L.read(logs_dir / "sglang_0.5.3post3_eagle3_decode_issue11948.log")
    assert log.decode_tok_s() == pytest.approx((165.59 + 178.86) / 2)
    assert log.decode_tok_s(include_after_idle=True) == pytest.approx(165.59)
    assert math.isnan(log.decode_tok_s(running=4))
    # bench_one_batch at batch 1: median decode latency 0.00585 s / 0.00572 s per token.
    bench = L.parse_bench(logs_dir / "sglang_bench_one_batch_pr30147.log")
    assert list(bench["decode_tok_s"].round(2)) == [round(1 / 0.00585, 2), round(1 / 0.00572, 2)]


def test_engine_from_format_alone_is_marked_inferred(logs_dir):
    """A log with no version banner, server_args or Backend line says its engine was guessed (issue 16)."""
    guessed = L.read(logs_dir / "sglang_0.4.1_prefill_cachehit_issue2777.log")
    assert guessed.engine == "sglang" and guessed.engine_inferred
    assert any("inferred from the line format alone" in w for w in guessed.warnings)
    told = L.read(logs_dir / "sglang_0.4.1_prefill_cachehit_issue2777.log", engine="sglang")
    assert not told.engine_inferred and not any("line format alone" in w for w in told.warnings)
    dumped = L.read(logs_dir / "sglang_0.4.7_server_args_dump_issue7227.log")
    assert dumped.engine == "sglang" and not dumped.engine_inferred
    bench = L.read(logs_dir / "vllm_bench_serve_result_issue18136.log")
    assert bench.engine_inferred  # a result block without a Backend line


def test_vllm_v0_acceptance_is_flagged_not_comparable(logs_dir):
    """vLLM V0 counts drafts accepted after a rejection: its rate is flagged, never silently put beside V1
    or SGLang figures (issue 16)."""
    v0 = L.read(logs_dir / "vllm_0.6.3_v0_speculative_metrics_issue9539.log", k=5).spec_summary()
    assert v0.comparable is False and v0.to_dict()["comparable"] is False
    assert any("not comparable with vLLM V1 or SGLang" in w for w in v0.warnings)
    assert "NOT comparable" in v0._repr_html_()
    v1 = L.read(logs_dir / "vllm_v1_specdecoding_intermediate_format_pr24127.log").spec_summary()
    assert v1.comparable is True
