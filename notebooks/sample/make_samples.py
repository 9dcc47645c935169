"""Write the SAMPLE logs, benchmark results and server captures of the bundled session.

These files are samples, not measurements: they are written in the exact formats documented in
``../shared/reference/serving-formats.md`` (SGLang 0.5.9 scheduler lines, vLLM V1 lines, NCCL_DEBUG=INFO,
bench_one_batch_server JSONL, ``vllm bench serve`` JSON, nvidia-smi CSV and topo) with values chosen
to be realistic for an 8x RTX PRO 6000 (PCIe-only, compute capability 12.0) server running a hybrid
Mamba/MoE model at batch size 1, in line with the published reports cited in that file (section 6).
Every text file starts with a ``# SAMPLE`` line; the JSON files carry ``"sample": true``.

Deterministic (seeded); re-run from the repository root to regenerate:
    .venv/bin/python notebooks/sample/make_samples.py
"""
from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = "/models/nemotron-h-sample-fp4"
HEADER = ("# SAMPLE written by decode-kit notebooks/sample/make_samples.py in the documented {fmt} format; "
          "values are realistic, not measured. Scenario: {scenario}\n")


def _ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def server_args(extra: dict) -> str:
    """A ServerArgs(...) repr as SGLang 0.5.9 logs it after __post_init__ (resolved values)."""
    args = {
        "model_path": MODEL, "tokenizer_path": MODEL, "tokenizer_mode": "auto", "trust_remote_code": True,
        "context_length": None, "dtype": "auto", "quantization": "modelopt_fp4", "kv_cache_dtype": "auto",
        "host": "0.0.0.0", "port": 30000, "api_key": None, "mem_fraction_static": 0.85,
        "max_running_requests": None, "chunked_prefill_size": 8192, "page_size": 1,
        "num_continuous_decode_steps": 1, "disable_overlap_schedule": True, "disable_radix_cache": False,
        "tp_size": 8, "pp_size": 1, "dp_size": 1, "ep_size": 1, "attention_backend": "flashinfer",
        "decode_attention_backend": None, "prefill_attention_backend": None, "sampling_backend": "flashinfer",
        "moe_runner_backend": "flashinfer_cutlass", "speculative_algorithm": None,
        "speculative_draft_model_path": None, "speculative_num_steps": None, "speculative_eagle_topk": None,
        "speculative_num_draft_tokens": None, "mamba_ssm_dtype": "float32", "disable_custom_all_reduce": False,
        "enable_symm_mem": False, "disable_cuda_graph": False, "cuda_graph_max_bs": 8,
        "decode_log_interval": 40, "random_seed": 42,
    }
    args.update(extra)
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def sglang_log(path: Path, scenario: str, *, tok_s: float, extra_args: dict, spec: tuple[float, int] | None,
               start: dt.datetime, windows: int, rng: random.Random, nccl_env: dict | None = None) -> None:
    lines = [HEADER.format(fmt="SGLang 0.5.9 scheduler log", scenario=scenario)]
    t = start
    if nccl_env:
        for k, v in nccl_env.items():
            lines.append(f"# launched with {k}={v}\n")
    lines.append(f"[{_ts(t)}] server_args={server_args(extra_args)}\n")
    t += dt.timedelta(seconds=2)
    if extra_args.get("speculative_algorithm"):
        lines.append(f"[{_ts(t)}] Disabling radix cache: speculative decoding on NemotronHForCausalLM needs the mamba extra buffer\n")
    lines.append(f"[{_ts(t)}] Attention backend not specified. Use flashinfer backend by default.\n")
    lines.append(f"[{_ts(t)}] Use flashinfer_cutlass as MoE runner backend for NemotronHForCausalLM (modelopt_fp4)\n")
    t += dt.timedelta(seconds=41)
    lines.append(f"[{_ts(t)} TP0] Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
                 "To silence this warning, specify disable_custom_all_reduce=True explicitly.\n")
    t += dt.timedelta(seconds=95)
    lines.append(f"[{_ts(t)}] The server is fired up and ready to roll!\n")
    for req in range(3):  # three single-stream requests, idle in between
        t += dt.timedelta(seconds=30)
        lines.append(f"[{_ts(t)} TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, "
                     f"full token usage: 0.00, mamba usage: 0.00, #running-req: 0, #queue-req: 0, "
                     f"input throughput (token/s): {rng.uniform(2.0, 9.0):.2f}, cuda graph: False\n")
        ntok = 1024
        for w in range(windows):
            first = w == 0
            if spec:
                al, n_draft = spec
                accept_len = max(1.0, rng.gauss(al, 0.07))
                gen_tok = 40 * accept_len
            else:
                accept_len, gen_tok = None, 40
            thr = rng.gauss(tok_s, tok_s * 0.012)
            if first:
                thr_print = rng.uniform(0.2, 1.8)  # first window after idle: tokens / (idle + window)
            else:
                thr_print = thr
            t += dt.timedelta(seconds=gen_tok / thr)
            ntok += int(round(gen_tok))
            spec_part = ""
            if spec:
                spec_part = f"accept len: {accept_len:.2f}, accept rate: {accept_len / spec[1]:.2f}, "
            lines.append(
                f"[{_ts(t)} TP0] Decode batch, #running-req: 1, #full token: {ntok}, full token usage: {ntok / 2_400_000:.2f}, "
                f"mamba num: 1, mamba usage: 0.01, {spec_part}cuda graph: True, gen throughput (token/s): {thr_print:.2f}, "
                "#queue-req: 0\n")
        lines.append(f"[{_ts(t)}] INFO:     127.0.0.1:{40000 + req} - \"POST /generate HTTP/1.1\" 200 OK\n")
    path.write_text("".join(lines))


def vllm_log(path: Path, scenario: str, *, tok_s: float, spec: dict | None, start: dt.datetime,
             windows: int, rng: random.Random) -> None:
    lines = [HEADER.format(fmt="vLLM 0.11.0 V1", scenario=scenario)]
    t = start
    pre = "(APIServer pid=1) "
    ts = lambda: t.strftime("%m-%d %H:%M:%S")  # noqa: E731
    lines.append(f"{pre}INFO {ts()} [api_server.py:1896] vLLM API server version 0.11.0\n")
    spec_cfg = (", speculative_config=SpeculativeConfig(method='mtp', model='" + MODEL + "', num_spec_tokens="
                + str(spec["k"]) + ")") if spec else ", speculative_config=None"
    lines.append(f"(EngineCore_DP0 pid=291) INFO {ts()} [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: "
                 f"model='{MODEL}', dtype=torch.bfloat16, tensor_parallel_size=8, quantization=modelopt_fp4{spec_cfg}\n")
    lines.append(f"(Worker_TP0 pid=355) INFO {ts()} [cuda.py:403] Using Flash Attention backend on V1 engine.\n")
    lines.append(f"(Worker_TP0 pid=355) INFO {ts()} [custom_all_reduce.py:271] Custom allreduce is disabled because "
                 "it's not supported on more than two PCIe-only GPUs. To silence this warning, specify "
                 "disable_custom_all_reduce=True explicitly.\n")
    for w in range(windows):
        t += dt.timedelta(seconds=10)
        gen = rng.gauss(tok_s, tok_s * 0.01) if w > 0 else rng.uniform(tok_s * 0.3, tok_s * 0.6)
        prompt = 102.4 if w == 0 else 0.0
        lines.append(f"{pre}INFO {ts()} [loggers.py:123] Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, "
                     f"Avg generation throughput: {gen:.1f} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
                     f"GPU KV cache usage: 0.{w % 10}%, Prefix cache hit rate: 0.0%\n")
        if spec:
            k = spec["k"]
            pos = [max(0.0, min(1.0, rng.gauss(p, 0.02))) for p in spec["per_position"]]
            drafts = int(gen * 10 / (1 + sum(pos)))
            accepted = int(round(drafts * sum(pos)))
            drafted = drafts * k
            al = 1 + accepted / drafts
            lines.append(
                f"{pre}INFO {ts()} [metrics.py:96] SpecDecoding metrics: Draft acceptance rate: {100 * accepted / drafted:.1f}%, "
                f"Mean acceptance length: {al:.2f}, Accepted throughput: {accepted / 10:.2f} tokens/s, "
                f"Drafted throughput: {drafted / 10:.2f} tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
                f"Per-position acceptance rate: {', '.join(f'{p:.3f}' for p in pos)}\n")
    path.write_text("".join(lines))


def nccl_log(path: Path, scenario: str, env: dict) -> None:
    lines = [HEADER.format(fmt="NCCL_DEBUG=INFO (NCCL 2.27.3)", scenario=scenario)]
    host = "pcie8"
    for rank in range(8):
        pid = 4100 + rank
        p = f"{host}:{pid}:{pid + 40} [{rank}] NCCL INFO "
        if rank == 0:
            lines.append(p + "NCCL version 2.27.3+cuda12.9\n")
        for k, v in env.items():
            lines.append(p + f"{k} set by environment to {v}\n")
    p0 = f"{host}:4100:4140 [0] NCCL INFO "
    nch = int(env.get("NCCL_MIN_NCHANNELS", 2))
    for c in range(nch):
        lines.append(p0 + f"Channel {c:02d}/{nch:02d} :    0   1   2   3   4   5   6   7\n")
    for c in range(min(nch, 2)):
        for src in range(8):
            dst = (src + 1) % 8
            same_socket = (src < 4) == (dst < 4)
            via = "P2P/CUMEM/read" if same_socket else "SHM/direct/direct"
            lines.append(f"{host}:{4100 + src}:{4140 + src} [{src}] NCCL INFO Channel {c:02d}/0 : {src}[{src}] -> {dst}[{dst}] via {via}\n")
    lines.append(p0 + f"{nch} coll channels, {nch} collnet channels, 0 nvls channels, {nch} p2p channels, 2 p2p channels per peer\n")
    for rank in range(8):
        lines.append(f"{host}:{4100 + rank}:{4140 + rank} [{rank}] NCCL INFO comm 0x55d0c{rank}a0 rank {rank} nranks 8 "
                     f"cudaDev {rank} busId {0x18 + 0x10 * rank:x}000 - Init COMPLETE\n")
    path.write_text("".join(lines))


def bench_one_batch_server(path: Path, run_name: str, tok_s: float, ttft_s: float, acc: float | None) -> None:
    out_len, in_len = 512, 1024
    decode_s = out_len / tok_s
    latency = ttft_s + decode_s
    row = {"run_name": run_name, "batch_size": 1, "input_len": in_len, "output_len": out_len,
           "latency": round(latency, 4), "input_throughput": round(in_len / ttft_s, 2),
           "output_throughput": round(out_len / latency, 2), "overall_throughput": round((in_len + out_len) / latency, 2),
           "last_ttft": round(ttft_s, 4), "last_gen_throughput": round(tok_s, 2),
           "acc_length": round(acc, 2) if acc else -1, "cache_hit_rate": 0.0, "profile_link": None, "sample": True}
    path.write_text(json.dumps(row) + "\n")


def vllm_bench_serve(path: Path, label: str, tok_s: float, ttft_ms: float, rng: random.Random, spec: dict | None) -> None:
    n, out_len, in_len = 16, 512, 1024
    tpot = 1000.0 / tok_s
    e2e = ttft_ms + tpot * (out_len - 1)
    obj = {"date": "20261120-101500", "endpoint_type": "vllm", "backend": "vllm", "label": label,
           "model_id": MODEL, "tokenizer_id": MODEL, "num_prompts": n, "request_rate": "inf", "burstiness": 1.0,
           "max_concurrency": 1, "duration": round(n * e2e / 1000, 3), "completed": n, "failed": 0,
           "total_input_tokens": n * in_len, "total_output_tokens": n * out_len,
           "request_throughput": round(1000 / e2e, 4), "request_goodput": None,
           "output_throughput": round(out_len * 1000 / e2e, 2), "total_token_throughput": round((in_len + out_len) * 1000 / e2e, 2),
           "mean_ttft_ms": round(ttft_ms, 2), "median_ttft_ms": round(ttft_ms * 0.99, 2), "std_ttft_ms": 2.1,
           "p99_ttft_ms": round(ttft_ms * 1.08, 2), "mean_tpot_ms": round(tpot, 3), "median_tpot_ms": round(tpot * 0.998, 3),
           "std_tpot_ms": 0.05, "p99_tpot_ms": round(tpot * 1.03, 3), "mean_itl_ms": round(tpot, 3),
           "median_itl_ms": round(tpot * 0.995, 3), "std_itl_ms": 0.4, "p99_itl_ms": round(tpot * 1.2, 3),
           "max_output_tokens_per_s": round(tok_s * 1.04, 1), "max_concurrent_requests": 1, "sample": True}
    if spec:
        obj["spec_decode_acceptance_rate"] = spec["rate_pct"]
        obj["spec_decode_acceptance_length"] = spec["al"]
    path.write_text(json.dumps(obj, indent=4) + "\n")


def captures(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    head = HEADER.format(fmt="nvidia-smi", scenario="the 8-GPU PCIe server under investigation")
    rows = [f"{i}, NVIDIA RTX PRO 6000 Blackwell Server Edition, 97887 MiB, 12.0, 580.126.20" for i in range(8)]
    (d / "nvidia-smi-query-gpu.csv").write_text(
        head + "index, name, memory.total [MiB], compute_cap, driver_version\n" + "\n".join(rows) + "\n")
    cols = [f"GPU{i}" for i in range(8)]
    out = [head, "\t" + "\t".join(cols + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\n"]
    for i in range(8):
        cells = []
        for j in range(8):
            if i == j:
                cells.append(" X ")
            elif (i < 4) == (j < 4):
                cells.append("PIX" if i // 2 == j // 2 else "NODE")
            else:
                cells.append("SYS")
        aff, numa = ("0-47,96-143", "0") if i < 4 else ("48-95,144-191", "1")
        out.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{aff}\t{numa}\t\tN/A\n")
    out.append("\nLegend:\n\n  X    = Self\n"
               "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
               "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
               "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
               "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
               "  PIX  = Connection traversing at most a single PCIe bridge\n"
               "  NV#  = Connection traversing a bonded set of # NVLinks\n")
    (d / "nvidia-smi-topo.txt").write_text("".join(out))


def model_config(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    cfg = {"_comment": "SAMPLE: a model config.json shaped like a hybrid Mamba/MoE checkpoint (no weights)",
           "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4096,
           "num_hidden_layers": 52, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 128, "intermediate_size": 1536, "n_routed_experts": 128, "num_experts_per_tok": 6,
           "moe_intermediate_size": 1536, "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 3072,
           "vocab_size": 131072,
           # 52 layers (one block each, transformers' NemotronHConfig letters): M Mamba-2, E MoE, * attention
           "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
           "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
           "mamba_ssm_cache_dtype": "float32", "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def main() -> None:
    rng = random.Random(20261120)
    logs, bench = HERE / "logs", HERE / "bench"
    logs.mkdir(exist_ok=True)
    bench.mkdir(exist_ok=True)
    day = dt.datetime(2026, 11, 20, 9, 0, 0)
    ll_env = {"NCCL_PROTO": "LL", "NCCL_MIN_NCHANNELS": "8", "NCCL_P2P_LEVEL": "SYS"}
    sglang_log(logs / "sglang_0.5.9_tp8_default.log", "SGLang 0.5.9, TP=8 over PCIe, defaults",
               tok_s=63.6, extra_args={}, spec=None, start=day, windows=12, rng=rng)
    sglang_log(logs / "sglang_0.5.9_tp8_nccl_ll.log", "SGLang 0.5.9, TP=8, NCCL_PROTO=LL NCCL_MIN_NCHANNELS=8 NCCL_P2P_LEVEL=SYS",
               tok_s=71.4, extra_args={}, spec=None, start=day + dt.timedelta(hours=1), windows=12, rng=rng,
               nccl_env=ll_env)
    sglang_log(logs / "sglang_0.5.9_tp8_eagle3.log", "SGLang 0.5.9, TP=8, EAGLE3 steps 3 topk 1 draft 4",
               tok_s=61.8, extra_args={"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "/models/eagle3-draft-sample",
                                       "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                                       "speculative_num_draft_tokens": 4, "disable_radix_cache": True},
               spec=(1.68, 4), start=day + dt.timedelta(hours=2), windows=12, rng=rng)
    vllm_log(logs / "vllm_0.11.0_tp8_default.log", "vLLM 0.11.0, TP=8 over PCIe, defaults",
             tok_s=82.5, spec=None, start=day + dt.timedelta(hours=3), windows=10, rng=rng)
    vllm_log(logs / "vllm_0.11.0_tp8_mtp.log", "vLLM 0.11.0, TP=8, MTP k=3",
             tok_s=118.0, spec={"k": 3, "per_position": [0.71, 0.58, 0.33]},
             start=day + dt.timedelta(hours=4), windows=10, rng=rng)
    nccl_log(logs / "nccl_info_tp8_ll.log", "SGLang 0.5.9 TP=8 ranks with NCCL_DEBUG=INFO and the LL settings", ll_env)
    nccl_log(logs / "nccl_info_tp8_default.log", "SGLang 0.5.9 TP=8 ranks with NCCL_DEBUG=INFO, default settings", {})
    bench_one_batch_server(bench / "sglang_tp8_default.jsonl", "sglang-tp8-default", 63.6, 0.182, None)
    bench_one_batch_server(bench / "sglang_tp8_nccl_ll.jsonl", "sglang-tp8-nccl-ll", 71.4, 0.171, None)
    bench_one_batch_server(bench / "sglang_tp8_eagle3.jsonl", "sglang-tp8-eagle3", 61.8, 0.190, 1.68)
    vllm_bench_serve(bench / "vllm_tp8_default.json", "vllm-tp8-default", 82.5, 168.0, rng, None)
    vllm_bench_serve(bench / "vllm_tp8_mtp.json", "vllm-tp8-mtp", 118.0, 175.0, rng, {"rate_pct": 54.0, "al": 2.62})
    captures(HERE / "server")
    model_config(HERE / "model")


if __name__ == "__main__":
    main()
