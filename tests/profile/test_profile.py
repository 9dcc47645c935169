"""kit.profile on real traces: the project's own H200 decode traces and the real third-party set."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kit import profile
from kit.errors import ParseError
from tests.conftest import ROOT, SAMPLE

OWN = SAMPLE / "traces"
OWN_SCENARIOS = sorted(p.name for p in OWN.iterdir() if (p / "measured.json").is_file())
# every LLM-serving / LLM-inference trace in ../shared/data/traces (the others are ResNet, DLRM,
# diffusion and toy training traces)
LLM_TRACES = [
    "tracelens/b200/eager_trace.json.gz",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    "tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "tracelens/inference/vllm_decode_full/graph_execution.json.gz",
]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _measured(scenario: str) -> dict:
    return json.loads((OWN / scenario / "measured.json").read_text())["ranks"][0]


def _trace(scenario: str) -> list[Path]:
    return sorted((OWN / scenario).glob("rank*.trace.json.gz"))


# ---------------------------------------------------------------- the kit's own GPU traces

@pytest.mark.gpu_fixture
@pytest.mark.parametrize("scenario", OWN_SCENARIOS)
def test_own_trace_steps_match_cuda_event_times(scenario):
    """Parsed per-step GPU span vs the CUDA-event time the recorder measured around each step."""
    m = _measured(scenario)
    p = profile.load(_trace(scenario))
    st = p.steps[p.steps["rank"] == 0].sort_values("step")
    assert list(st["name"]) == m["annotations"]
    assert list(st["phase"]) == ["prefill"] + ["decode"] * m["decode_steps"]
    dec = st[st["phase"] == "decode"]
    parsed = dec["wall_us"].to_numpy() / 1000.0
    gap = dec["gap_before_us"].to_numpy() / 1000.0
    measured = np.array(m["profiled"]["decode_step_ms"])
    rel = np.abs(parsed - measured) / measured
    assert np.median(rel) < 0.05, (parsed, measured)
    # the event pair brackets the step's GPU span and may add part of the idle gap before it
    # (the GPU waiting for the step's first launch), never more
    assert (measured >= parsed * 0.995).all(), (parsed, measured)
    assert (measured <= (parsed + gap) * 1.005 + 0.005).all(), (parsed, gap, measured)
    # the parsed steps follow the measured ones (the same slow step is slow in both)
    if measured.max() > 1.2 * np.median(measured):
        assert int(np.argmax(parsed + gap)) == int(np.argmax(measured))


@pytest.mark.gpu_fixture
def test_graph_replay_step_time_matches_unprofiled_run():
    """CUDA-graph replay is not slowed by the profiler's CPU overhead: the parsed decode step must be
    within 5% of the step time measured in the unprofiled run."""
    m = _measured("tp1_graph")
    s = profile.load(_trace("tp1_graph")).summary("decode")
    per_step_ms = s.per_step["wall_us"].median() / 1000.0
    assert abs(per_step_ms - m["unprofiled"]["decode"]["median_ms"]) / m["unprofiled"]["decode"]["median_ms"] < 0.05
    # and eager mode is launch-bound: most of its decode wall time is GPU idle, unlike graph replay
    e = profile.load(_trace("tp1_eager")).summary("decode")
    assert e.share("idle", of="wall") > 0.5 > s.share("idle", of="wall")


@pytest.mark.gpu_fixture
def test_one_rank_nccl_allreduce_launches_no_kernel():
    """Observed on the H200 with torch 2.11 / NCCL 2.28: a 1-rank all_reduce is called (8 per decode
    step: 'nccl:all_reduce' ranges) but no all-reduce kernel reaches the GPU."""
    m = _measured("tp1_eager")
    p = profile.load(_trace("tp1_eager"))
    calls = p.annotations[(p.annotations["name"] == "nccl:all_reduce") & (p.annotations["side"] == "cpu")]
    decode_calls = calls["start_us"].between(p.steps["marker_start_us"].min(), p.steps["marker_end_us"].max()).sum()
    assert decode_calls >= m["allreduce_calls_per_decode_step"] * m["decode_steps"]
    assert p.summary("decode").share("allreduce") == 0.0
    assert p.meta["ranks"][0]["distributed"]["world_size"] == 1


@pytest.mark.gpu_fixture
def test_own_trace_summary_is_consistent():
    s = profile.load(_trace("tp1_graph")).summary("decode")
    cats = s.categories.set_index("category")
    kernel_rows = cats.drop(index="idle")
    assert kernel_rows["time_us"].sum() == pytest.approx(s.kernel_time_us)
    assert kernel_rows["share_of_kernel"].sum() == pytest.approx(1.0)
    # busy + idle = wall (one stream: no overlap)
    pr = s.per_rank.iloc[0]
    assert pr["busy_us"] + pr["idle_us"] == pytest.approx(pr["wall_us"])
    assert s.wall_time_us == pytest.approx(s.per_step["wall_us"].sum(), rel=1e-6)
    assert s.steps == 16
    assert {"gemm", "attention", "norm", "activation", "kv-cache write", "sampling"} <= set(cats.index)
    assert cats.loc["gemm", "share_of_kernel"] > 0.5   # batch-1 decode is weight-streaming GEMV


# ---------------------------------------------------------------- categories

def _other_share(path: Path) -> tuple[float, list]:
    s = profile.load(path).summary()
    top = s.top[s.top["category"] == "other"]
    return s.share("other"), list(top["name"])


@pytest.mark.shared_data
@pytest.mark.parametrize("rel", LLM_TRACES)
def test_other_under_5_percent_on_shared_llm_traces(shared_data, rel):
    share, names = _other_share(shared_data / "traces" / rel)
    assert share < 0.05, names


@pytest.mark.gpu_fixture
@pytest.mark.parametrize("scenario", OWN_SCENARIOS)
def test_other_under_5_percent_on_own_traces(scenario):
    for f in _trace(scenario):
        share, names = _other_share(f)
        assert share < 0.05, names


@pytest.mark.shared_data
def test_vllm_symmetric_memory_allreduce_is_seen_where_hta_rule_is_blind(shared_data):
    """TP=8 vLLM on B200: the all-reduce is multimem_all_reduce_kernel; HTA 0.5.0's ^nccl.*Kernel rule
    files it under computation. The kit's table must count it as allreduce."""
    p = profile.load(shared_data / "traces/tracelens/b200/eager_trace.json.gz")
    s = p.summary()
    k = p.kernels
    hta_comm = k[k["name"].astype(str).str.match(r"^nccl.*Kernel")]["dur_us"].sum() / k["dur_us"].sum()
    multimem = k[k["name"].astype(str).str.contains("multimem_all_reduce")]
    assert len(multimem) == s.per_rank["allreduce_calls"].iloc[0] > 0
    assert s.share("allreduce") == pytest.approx(multimem["dur_us"].sum() / k["dur_us"].sum())
    assert s.share("allreduce") > 0.10 > 0.01 > hta_comm
    allgather = k["name"].astype(str).str.startswith("ncclDevKernel_AllGather")
    assert set(k.loc[allgather, "category"]) == {"other-collectives"}


@pytest.mark.parametrize("name,category", [
    # 'flash' appears in every flashinfer namespace and in vLLM's cache write: not attention by itself
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>"
     "(__nv_bfloat16 const*)", "kv-cache write"),
    ("void vllm::reshape_and_cache_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>",
     "kv-cache write"),
    ("void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, "
     "__nv_bfloat16, 32, true>(int, __nv_bfloat16 const*, flashinfer::QuantizationSFLayout)", "quantization"),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "norm"),
    ("void flashinfer::norm::GemmaRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "norm"),
    ("gemma_fused_add_rmsnorm", "norm"),
    ("void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*)", "activation"),
    ("void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<false, 128u>(__nv_bfloat16*)", "rope"),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u>(float*)", "sampling"),
    ("_fwd_grouped_kernel_stage1", "attention"),  # SGLang triton decode attention
    ("_fwd_kernel_stage2", "attention"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<>", "attention"),
    ("void flashinfer::SinglePrefillWithKVCacheKernel<>", "attention"),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64>>", "attention"),
    ("cutlass::device_kernel<flash::FlashAttnFwdSm90<>>", "attention"),
    ("void flash_fwd_splitkv_combine_kernel<>", "attention"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128, (vllm::Fp8KVCacheDataType)0>", "attention"),
    ("void vllm::scaled_fp8_quant_kernel<__nv_bfloat16>", "quantization"),
])
def test_packaged_rules_on_llm_kernel_names(name, category):
    from kit.profile.attribution._categories import categorise

    assert categorise([name], profile.default_rules())[name] == category


@pytest.mark.gpu_fixture
def test_user_rules_take_precedence_and_toml_can_replace(tmp_path):
    f = _trace("tp1_graph")[0]
    p = profile.load(f, rules=[(r"nvjet_sm90_tst_128x8", "my-gemv")])
    cats = set(p.kernels["category"].astype(str))
    assert "my-gemv" in cats and "gemm" in cats
    toml = tmp_path / "rules.toml"
    toml.write_text('replace = true\n[[rule]]\ncategory = "everything"\npattern = "."\n')
    q = profile.load(f, rules=toml)
    assert set(q.kernels["category"].astype(str)) == {"everything"}
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\ncategory = "x"\npattern = "(unclosed"\n')
    with pytest.raises(ParseError, match="bad.toml: rule #1 pattern"):
        profile.load(f, rules=bad)


# ---------------------------------------------------------------- steps / phases from real serving traces

@pytest.mark.shared_data
@pytest.mark.parametrize("rel,name,phase,source,in_step", [
    ("tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz", "step[DECODE bs=32]", "decode",
     "annotation:sglang:cpu", 0.9),
    ("tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz", "step[EXTEND bs=15 toks=15360]",
     "prefill", "annotation:sglang:cpu", 0.9),
    ("tracelens/inference/vllm_decode_full/graph_execution.json.gz", None, "decode", "annotation:vllm:cpu", 0.9),
    ("tracelens/b200/eager_trace.json.gz", "execute_context_1(888_788544)_generation_0(0)", "prefill",
     "annotation:vllm:gpu", 0.9),
    # HF generate() trace: a third of its kernel time runs outside the one ProfilerStep
    ("tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "ProfilerStep#6", "unknown",
     "annotation:profiler-step:gpu", 0.6),
])
def test_steps_and_phases_from_serving_annotations(shared_data, rel, name, phase, source, in_step):
    p = profile.load(shared_data / "traces" / rel)
    assert len(p.steps) == 1
    row = p.steps.iloc[0]
    assert row["phase"] == phase and row["source"] == source
    if name:
        assert row["name"] == name
    # (nearly) all kernels of these one-step traces fall in the step
    k = p.kernels
    assert k.loc[k["step"] == 0, "dur_us"].sum() > in_step * k["dur_us"].sum()


@pytest.mark.shared_data
def test_phase_filter_warns_when_phase_absent(shared_data):
    p = profile.load(shared_data
                     / "traces/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz")
    s = p.summary("decode")
    assert s.phase == "all"
    assert any("no kernel is in a decode step" in w for w in s.warnings)


# ---------------------------------------------------------------- 8 ranks, real NCCL AllReduce

def _independent_rank_figures(path: Path) -> tuple[int, float, float, float]:
    """(rank, AllReduce us, comm union us, exposed comm us) straight from the JSON with a 1-us grid
    (this trace has integer microsecond timestamps)."""
    d = json.loads(gzip.open(path).read())
    ks = [e for e in d["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]
    t0 = min(e["ts"] for e in ks)
    t1 = max(e["ts"] + e["dur"] for e in ks)
    comm = np.zeros(t1 - t0 + 1, bool)
    comp = np.zeros_like(comm)
    ar = 0.0
    for e in ks:
        is_comm = e["name"].startswith("nccl")
        if "AllReduce" in e["name"]:
            ar += e["dur"]
        (comm if is_comm else comp)[e["ts"] - t0:e["ts"] - t0 + e["dur"]] = True
    return d["distributedInfo"]["rank"], ar, float(comm.sum()), float((comm & ~comp).sum())


@pytest.mark.shared_data
def test_dlrm_8_ranks_allreduce_spread_and_exposed_comm(shared_data):
    files = sorted((shared_data / "traces/param/dlrm_kineto").glob("*.json.gz"))
    assert len(files) == 8
    p = profile.load(files)
    s = p.summary()
    assert p.ranks == list(range(8))
    pr = s.per_rank.set_index("rank")
    expect = [_independent_rank_figures(f) for f in files]
    for rank, ar, comm, exposed in expect:
        assert pr.loc[rank, "allreduce_us"] == pytest.approx(ar)
        assert pr.loc[rank, "allreduce_calls"] == 3
        assert pr.loc[rank, "comm_us"] == pytest.approx(comm)
        assert pr.loc[rank, "exposed_comm_us"] == pytest.approx(exposed)
        assert pr.loc[rank, "exposed_comm_us"] <= pr.loc[rank, "comm_us"]
    ars = [e[1] for e in expect]
    sp = s.allreduce_spread
    assert sp["ranks"] == 8
    assert sp["min_us"] == min(ars) and sp["max_us"] == max(ars)
    assert sp["spread_us"] == pytest.approx(max(ars) - min(ars))
    assert [e[0] for e in expect if e[1] == max(ars)][0] == sp["max_rank"]
    assert any("AllReduce time differs" in w for w in s.warnings)
    # all ranks were recorded on one clock (absolute epoch us): no clock warning
    assert not any("clock" in w for w in s.warnings)
    # the stacked comparison across ranks carries every rank
    assert list(s.rank_categories.index) == list(range(8))


@pytest.mark.shared_data
def test_parallel_and_sequential_parse_agree(shared_data):
    from kit.profile._load import load_files

    files = sorted((shared_data / "traces/param/dlrm_kineto").glob("*.json.gz"))
    seq = load_files(files, cache=False, parallel=False)
    par = load_files(files, cache=False, parallel=True)
    for a, b in zip(seq, par):
        assert a["kernels"].equals(b["kernels"])
        assert a["meta"] == b["meta"]


# ---------------------------------------------------------------- cache, repr, JSON, CLI

@pytest.mark.gpu_fixture
def test_cache_hit_is_identical_and_file_change_misses(tmp_path):
    src = _trace("tp1_graph")[0]
    f = tmp_path / "r.json.gz"
    f.write_bytes(src.read_bytes())
    a = profile.load(f)
    b = profile.load(f)
    assert not a.meta["ranks"][0]["cached"] and b.meta["ranks"][0]["cached"]
    assert a.kernels.equals(b.kernels) and a.steps.equals(b.steps)
    assert repr(a.summary("decode")) == repr(b.summary("decode"))
    assert list((tmp_path / "cache" / "profile").iterdir())
    f.write_bytes(src.read_bytes())  # same bytes, new mtime: a different file identity
    c = profile.load(f)
    assert not c.meta["ranks"][0]["cached"]
    assert not profile.load(f, cache=False).meta["ranks"][0]["cached"]


def test_full_category_memo_is_restarted_without_losing_names():
    """Past 50,000 memoised names the memo starts afresh; names it already knew are still answered."""
    from kit.profile.attribution._categories import categorise, default_rules
    from kit.profile.reading._cache import category_map

    rules = default_rules()
    compute = lambda ns: categorise(ns, rules)  # noqa: E731
    category_map([f"q{i}" for i in range(50_001)], rules, compute)
    got = category_map(["q7", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"], rules, compute)
    assert got == {"q7": "other", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL": "allreduce"}


@pytest.mark.gpu_fixture
def test_summary_json_matches_issue_shape_and_repr_is_deterministic():
    f = _trace("tp1_eager")
    s = profile.load(f).summary("decode")
    d = s.to_dict()
    # the issue's keys first, in order; then how the categories were decided and the CPU-side collectives
    assert list(d)[:7] == ["files", "ranks", "kernel_time_us", "wall_time_us", "steps", "categories", "warnings"]
    assert set(list(d)[7:]) <= {"categories_unavailable", "decided_by", "collectives", "cpu", "undecided",
                                "undecided_by_category"} and "decided_by" in d
    assert all(set(c) == {"category", "time_us", "share_of_kernel", "share_of_wall"} for c in d["categories"])
    assert d["categories"][-1]["category"] == "idle" and d["categories"][-1]["share_of_kernel"] is None
    json.dumps(s.to_dict(full=True))
    assert repr(s) == repr(profile.load(f).summary("decode"))
    assert "<table>" in s._repr_html_() and "idle" in s._repr_html_()
    assert re.match(r"Profile\(files=1, ranks=\[0\], kernels=[\d,]+, steps=17 \(decode 16, prefill 1\)",
                    repr(profile.load(f)))


@pytest.mark.gpu_fixture
def test_cli_json_equals_library_and_errors_are_one_line(tmp_path):
    f = _trace("tp1_graph")[0]
    env = {"KIT_CACHE_DIR": str(tmp_path / "c"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "kit", "profile", "summary", str(f), "--json", "--phase", "decode"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(json.dumps(profile.load(f).summary("decode").to_dict()))
    bad = subprocess.run([sys.executable, "-m", "kit", "profile", "summary", str(tmp_path)], capture_output=True,
                         text=True, cwd=ROOT, env=env, timeout=120)
    assert bad.returncode == 1
    assert bad.stderr.strip().count("\n") == 0 and str(tmp_path) in bad.stderr and "directory" in bad.stderr


@pytest.mark.gpu_fixture
def test_prefetch_in_worker_processes_gives_the_same_profile(monkeypatch):
    """The CLI starts parsing in worker processes before importing pandas; the result must not change."""
    from kit.profile import _load as _trace_load

    monkeypatch.setattr(_trace_load, "PREFETCH_MIN_BYTES", 0)
    files = [str(f) for f in _trace("tp1_eager") + _trace("tp1_graph")]
    with profile.prefetch(files, cache=True) as pending:
        assert set(pending.futures) == set(files)
        a = profile.load(files, prefetched=pending)
    b = profile.load(files, cache=False)
    assert a.kernels.equals(b.kernels) and a.steps.equals(b.steps) and a.runtime.equals(b.runtime)
    # now cached: nothing left to prefetch
    assert profile.prefetch(files, cache=True).futures == {}


@pytest.mark.shared_data
def test_rccl_generic_kernel_categorised_by_its_collective_arg(shared_data):
    """RCCL's ncclDevKernel_Generic does not name its collective; newer ROCm PyTorch puts it in the
    kernel's 'Collective name' arg (allreduce / broadcast here)."""
    p = profile.load(shared_data / "traces/tracelens/mi300/resnet_act_checkpoint.json.gz")
    g = p.kernels[p.kernels["name"].astype(str).str.startswith("ncclDevKernel_Generic")]
    by = g.groupby("collective")["category"].agg(lambda c: set(c.astype(str)))
    assert by["allreduce"] == {"allreduce"} and by["broadcast"] == {"other-collectives"}
