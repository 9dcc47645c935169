"""kit.logs on the project-written samples in tests/data/logs (one per documented version variant).

The samples are written to the formats in ../shared/reference/serving-formats.md; each expected
number below follows from the sample's lines by the documented definitions.
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

import kit.logs
import kit.logs as L
from tests.conftest import SAMPLE, TEST_DATA

DATA = TEST_DATA / "logs"


def read(name, **kw):
    return L.read(DATA / name, **kw)


def test_samples_say_they_are_project_written():
    for p in DATA.iterdir():
        if p.suffix in (".log", ".txt"):
            assert p.read_text().startswith("# project-written sample"), p.name
    assert "written by the decode-kit project" in (DATA / "README.md").read_text()


def test_sglang_0_4_6_no_graph_no_trailing_comma_needs_k():
    d = read("sglang_0.4.6_decode.log")
    assert list(d.decode["accept_len"]) == [2.50, 2.50, 2.00]
    assert "graph" not in d.decode or d.decode["graph"].isna().all()
    assert d.decode["ranks"].isna().all() and set(d.decode["format"]) == {"dot"}
    assert list(d.decode["after_idle"]) == [True, False, False]  # 1.63 tok/s < 10% of the median
    assert d.spec["draft_acceptance_rate"].isna().all() and any("pass k=" in w for w in d.warnings)
    d3 = read("sglang_0.4.6_decode.log", k=3, version="0.4.6")
    assert d3.spec["draft_acceptance_rate"].tolist() == pytest.approx([0.5, 0.5, 1 / 3])
    s = L.spec_summary(d3)
    assert (s.windows, s.excluded_windows, s.k) == (2, 1, 3)
    assert s.mean_acceptance_length == pytest.approx(2.25)


def test_sglang_0_4_10_trailing_comma_and_graph_flag():
    d = read("sglang_0.4.10_decode.log")
    assert set(d.decode["format"]) == {"dot"} and set(d.prefill["format"]) == {"dot"}  # "batch. " + trailing ", "
    assert list(d.decode["graph"]) == [True, False]
    assert list(d.decode["gen_throughput"]) == [150.25, 149.75]
    assert list(d.decode["running_req"]) == [2, 2]
    assert (d.prefill["cached_token"].iloc[0], d.prefill["queue_req"].iloc[0]) == (100, 1)
    assert len(d.spec) == 0


def test_sglang_0_5_4_bracket_iteration_and_cpu_graph():
    d = read("sglang_0.5.4_bracket.log")
    assert list(d.decode["iter"]) == [80, 120] and list(d.prefill["iter"]) == [41]
    assert set(d.decode["graph_kind"]) == {"cpu"} and set(d.decode["format"]) == {"bracket"}
    # bracket format => sglang <= 0.5.8 => accept rate = AL / N; 2.00/0.50 = 3.00/0.75 = 4 => k = 3
    assert list(d.spec["k"]) == [3, 3]
    assert d.spec["draft_acceptance_rate"].tolist() == pytest.approx([1 / 3, 2 / 3])


def test_sglang_0_5_9_server_args_ms_timestamps_dp_tags_idle():
    d = read("sglang_0.5.9_eagle.log")
    a = d.server_args
    assert (a["tp_size"], a["dp_size"], a["speculative_num_steps"], a["speculative_eagle_topk"]) == (8, 2, 3, 1)
    assert a["speculative_algorithm"] == "EAGLE3" and a["attention_backend"] is None
    assert a["cuda_graph_bs"] == [1, 2, 4, 8] and a["json_model_override_args"] == "{}"
    assert a["disable_custom_all_reduce"] is True
    dec = d.decode
    assert set(dec["ranks"]) == {"DP1 TP3"}
    assert dec["time"].iloc[0] == pd.Timestamp("2026-03-14 10:00:11.500")
    assert list(dec["elapsed_s"]) == [0.0, 1.0, 2.0, 3.0]
    pre = d.prefill.iloc[0]
    assert (pre["input_throughput"], bool(pre["graph"]), pre["new_token"]) == (3.20, False, 1024)
    # N = steps + 1 = 4 from server_args; 1.68 / 4 = 0.42 => the <= 0.5.10 definition
    assert set(d.spec["definition"]) == {"sglang<=0.5.10: accept rate = accept len / N"}
    assert d.spec["draft_acceptance_rate"].tolist() == pytest.approx([0.68 / 3, 0.68 / 3, 0.0, 1 / 3])
    assert list(d.spec["after_idle"]) == [True, False, False, False]
    s = L.spec_summary(d)
    # windows weighted by #running-req (1, 1, 3): (1.68 + 1.00 + 3 * 2.00) / 5
    assert s.mean_acceptance_length == pytest.approx(1.736)
    assert s.draft_acceptance_rate == pytest.approx(0.736 / 3)


def test_sglang_0_5_12_swa_pd_musa_new_definition():
    d = read("sglang_0.5.12_swa_pd.log")
    r = d.decode.iloc[0]
    assert (r["full_token"], r["swa_token"], r["swa_token_usage"]) == (8000, 2000, 0.05)
    assert (r["pre_allocated_usage"], r["transfer_req"], r["retracted_req"]) == (0.01, 1, 0)
    assert r["graph_kind"] == "musa" and r["est_decode_tflops_s_per_gpu"] == 12.50
    # (2.5 - 1)/(4 - 1) = 0.50 and (3 - 1)/3 = 0.67: only the >= 0.5.11 definition fits (N = 4)
    assert list(d.spec["k"]) == [3, 3]
    assert d.spec["draft_acceptance_rate"].tolist() == pytest.approx([0.5, 2 / 3])
    d2 = read("sglang_0.5.12_swa_pd.log", version="0.5.12", k=3)
    assert not any("inconsistent" in w for w in d2.warnings)
    d_wrong = read("sglang_0.5.12_swa_pd.log", version="0.5.9", k=3)  # wrong version: flagged
    assert any("not consistent" in w for w in d_wrong.warnings)


def test_sglang_0_5_23_dict_args_hisparse():
    d = read("sglang_0.5.23_dict_args.log")
    assert d.server_args["speculative_num_draft_tokens"] == 6 and d.server_args["enable_metrics"] is True
    r = d.decode.iloc[0]
    assert (r["gpu_token"], r["cpu_token"], r["cap_len"], r["block_accept_len"]) == (900, 100, 6.0, 3.4)
    sp = d.spec.iloc[0]
    assert sp["k"] == 5 and sp["draft_acceptance_rate"] == pytest.approx(0.5)  # (3.5 - 1) / 5


def test_vllm_0_8_5_v0_lines():
    d = read("vllm_0.8.5_v0.log")
    assert d.version == "0.8.5"
    t = d.throughput.iloc[0]
    assert (t["generation_throughput"], t["swapped"], t["pending"]) == (81.2, 0, 0)
    assert t["gpu_kv_cache_usage"] == pytest.approx(0.004) and t["cpu_kv_cache_usage"] == 0.0
    sp = d.spec.iloc[0]
    assert (sp["k"], sp["draft_acceptance_rate"]) == (4, 0.5)
    assert sp["mean_acceptance_length"] == pytest.approx(2.0)  # 400 emitted / (800 / 4) drafts


def test_vllm_0_8_5_v1_mean_length_excludes_bonus():
    d = read("vllm_0.8.5_v1.log")
    sp = d.spec.iloc[0]
    assert sp["per_position"] == (0.7, 0.5, 0.3) and sp["k"] == 3
    assert sp["printed_accept_len"] == 1.5
    assert sp["mean_acceptance_length"] == pytest.approx(2.5)  # 1.50 printed = sum(per-position): +1
    assert sp["draft_acceptance_rate"] == 0.5


def test_vllm_0_10_ansi_idle_window_and_pooling():
    d = read("vllm_0.10.1.1_ansi.log")
    assert d.version == "0.10.1.1" and len(d.throughput) == 3 and len(d.spec) == 3
    assert list(d.throughput["generation_throughput"]) == [0.3, 90.0, 100.0]
    assert list(d.throughput["after_idle"]) == [True, False, False]
    sp = d.spec
    assert list(sp["after_idle"]) == [True, False, False]
    assert math.isnan(sp["draft_acceptance_rate"].iloc[0])  # "nan%" when nothing was drafted
    assert sp["mean_acceptance_length"].tolist()[1:] == [2.2, 1.8]
    assert list(sp["gen_throughput"]) == [0.3, 90.0, 100.0]
    s = L.spec_summary(d)
    assert (s.windows, s.excluded_windows, s.k) == (2, 1, 2)
    assert s.draft_acceptance_rate == pytest.approx(320 / 600)
    assert s.mean_acceptance_length == pytest.approx(1 + 320 / 300)
    assert s.per_position == pytest.approx((0.8 * 2 / 3 + 0.6 / 3, 0.4 * 2 / 3 + 0.2 / 3))


def test_vllm_0_34_current_aggregated_and_torn():
    d = read("vllm_0.34_current.log")
    assert d.version == "0.34.0" and d.torn_lines == 1
    t = d.throughput.iloc[0]
    assert (t["engines_aggregated"], t["waiting"], t["deferred"], t["preemptions"], t["kv_fetch"]) == (2, 1, 0, 3, 0)
    assert t["prefix_cache_hit_rate"] == 0.25 and t["process"] == "APIServer"
    sp = d.spec
    assert list(sp["k"]) == [3, 3] and list(sp["mean_acceptance_length"]) == [2.62, 3.0]
    assert sp["draft_acceptance_rate"].tolist() == [0.542, 0.667]
    assert sp["gen_throughput"].iloc[0] == 64.0 and math.isnan(sp["gen_throughput"].iloc[1])
    s = L.spec_summary(d)
    assert s.draft_acceptance_rate == pytest.approx(99 / 162)
    assert s.mean_acceptance_length == pytest.approx(1 + 99 / 54)


def test_nccl_env_rings_transports():
    info = read("nccl_env.log").nccl_info
    assert info == {
        "version": "2.21.5+cuda12.4",
        "env": {"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS", "NCCL_BUFFSIZE": "16777216"},
        "channels": 4, "rings": ["0 1 2 3", "0 3 2 1"],
        "transports": {"NET/IB/0": 1, "P2P/CUMEM": 1, "SHM/direct/direct": 1},
        "network": "IB", "nranks": 4, "warnings": ["Cuda failure 2 'out of memory'"],
    }


def test_nccl_version_line_cut_before_the_number_is_not_a_traceback():
    d = L.parse_nccl("h:1:2 [0] NCCL INFO NCCL version\nh:1:2 [0] NCCL INFO NCCL version 2.21.5\n")
    assert d["value"].tolist() == ["2.21.5"]


def test_bench_serving_text_blocks():
    s = L.parse_bench(DATA / "sglang_bench_serving_0.5.9.txt").iloc[0]
    assert (s["tool"], s["accept_length"], s["peak_output_throughput"], s["peak_concurrent_requests"]) == \
        ("sglang.bench_serving", 1.68, 70.0, 1)
    assert (s["mean_tpot_ms"], s["median_tpot_ms"], s["p99_tpot_ms"]) == (14.96, 15.72, 16.5)
    assert (s["p90_e2e_latency_ms"], s["max_itl_ms"]) == (2100.0, 30.0)
    assert "truncated" not in s.index or pd.isna(s["truncated"])
    v = L.parse_bench(DATA / "vllm_bench_serve_0.34.txt").iloc[0]
    assert (v["tool"], v["failed"], v["max_concurrency"], v["total_throughput"]) == ("vllm bench serve", 0, 1, 743.23)
    assert (v["spec_acceptance_rate"], v["spec_acceptance_length"], v["spec_drafts"]) == (0.542, 2.62, 488)
    assert v["spec_per_position"] == pytest.approx((0.708, 0.583, 0.333))
    assert (v["median_tpot_ms"], v["p99_itl_ms"]) == (12.12, 40.0)


def test_bench_one_batch_server_and_latency_text():
    s = L.parse_bench(DATA / "bench_one_batch_server.txt").iloc[0]
    assert (s["batch_size"], s["input_len"], s["latency_s"], s["output_throughput"], s["accept_length"]) == \
        (1, 1024, 4.2, 63.6, 1.68)
    lat = L.parse_bench(DATA / "vllm_bench_latency.txt").iloc[0]
    assert (lat["avg_latency_s"], lat["p50_latency_s"], lat["p99_latency_s"]) == (2.5, 2.5, 2.7000000000000002)


def test_bench_json_results():
    s = L.parse_bench(DATA / "sglang_bench_serving.jsonl")
    assert list(s["tool"]) == ["sglang.bench_serving"] * 2
    assert list(s["max_concurrency"]) == [1, 4] and list(s["output_throughput"]) == [64.0, 128.0]
    assert list(s["median_tpot_ms"]) == [15.72, 28.0] and list(s["peak_output_throughput"]) == [70.0, 140.0]
    assert "ttfts" not in s.columns and "server_info" not in s.columns
    v = L.parse_bench(DATA / "vllm_bench_serve.json").iloc[0]
    assert (v["tool"], v["model"], v["total_throughput"], v["mean_e2e_latency_ms"]) == \
        ("vllm bench serve", "nvidia/nemotron-h", 743.23, 1550.0)
    assert v["spec_acceptance_rate"] == pytest.approx(0.542)
    assert v["spec_per_position"] == pytest.approx((0.708, 0.583, 0.333))
    b = L.parse_bench(DATA / "bench_one_batch.jsonl").iloc[0]
    assert ((b["tool"], b["output_throughput"], b["median_decode_latency_s"])
            == ("sglang.bench_one_batch", 174.85, 0.00572))
    lat = L.parse_bench(DATA / "vllm_bench_latency.json").iloc[0]
    assert (lat["tool"], lat["avg_latency_s"], lat["p90_latency_s"]) == ("vllm bench latency", 2.5, 2.6)


def test_same_text_from_lines_and_path_agree():
    text = (DATA / "sglang_0.5.9_eagle.log").read_text()
    a = L.parse_sglang(text)
    b = L.parse_sglang(DATA / "sglang_0.5.9_eagle.log")
    pd.testing.assert_frame_equal(a.spec, b.spec)
    assert repr(a).startswith("LogData('<text>', engine='sglang'")


def test_repr_is_deterministic():
    d = read("vllm_0.34_current.log")
    assert repr(d) == ("LogData('" + str(DATA / "vllm_0.34_current.log") + "', engine='vllm', version='0.34.0', "
                       "lines=7: throughput=1, spec=2; unknown=2, torn=1; 1 warning)")
    assert repr(d) == repr(read("vllm_0.34_current.log"))
    assert "<table>" in d._repr_html_()


def test_parse_server_args_forms_and_error():
    from kit.errors import LogFormatError

    a = L.parse_server_args("server_args=ServerArgs(tp_size=4, lora_paths={'a': [1, (2, 3)]}, "
                            "name='x, y', obj=<Foo at 0x1>, flag=False)")
    assert a == {"tp_size": 4, "lora_paths": {"a": [1, (2, 3)]}, "name": "x, y", "obj": "<Foo at 0x1>",
                 "flag": False}
    assert L.parse_server_args("{'tp_size': 2, 'quantization': None}") == {"tp_size": 2, "quantization": None}
    assert L.parse_server_args("server_args={'tp_size': 2, 'attention_ba") == {"tp_size": 2, "__truncated__": True}
    with pytest.raises(LogFormatError, match="no ServerArgs"):
        L.parse_server_args("nothing here")


def test_vllm_config_line_gives_tp_size_and_k_and_custom_allreduce_warning_is_surfaced():
    """vLLM prints TP size and num_speculative_tokens only in its engine-config line; SGLang/vLLM say
    when custom all-reduce is off on more than two PCIe GPUs (issue 16)."""
    from kit.logs._vllm import parse_config

    d = kit.logs.read(SAMPLE / "logs" / "vllm_0.11.0_tp8_mtp.log")
    assert d.server_args["tp_size"] == 8 and d.server_args["num_speculative_tokens"] == 3
    assert d.server_args["speculative_algorithm"] == "mtp" and d.k == 3
    assert any("disabled its custom all-reduce" in w for w in d.warnings)
    assert parse_config("non-default args: {'model': 'x', 'tensor_parallel_size': 4, 'speculative_config': "
                        "{'method': 'eagle3', 'num_speculative_tokens': 5}}") == {
        "tp_size": 4, "num_speculative_tokens": 5, "speculative_algorithm": "eagle3", "model": "x"}
