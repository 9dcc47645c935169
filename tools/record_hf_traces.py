#!/usr/bin/env python3
"""Record real decode traces of ``transformers`` models and CPU-side pairs (fixtures for attribution,
hybrid/SSM layers, the CPU side of a step, and trace health).

Every model is built from a small config with random weights (no hub access), bf16, batch 1, on one
GPU, and decoded greedily (one ``argmax`` per step) after a prompt of ``PROMPT`` tokens. Each
scenario writes ``OUT/<scenario>/trace.json.gz`` and ``measured.json`` (config, versions, CUDA-event
times of every decode step in the profiled run and in an identical unprofiled run, which code path
ran). Groups:

- ``hf``: ``hf_<model>_plain`` (CPU+CUDA activities only: what most people capture) and
  ``hf_<model>_stack`` (``with_stack=True, record_shapes=True``: nn.Module frames) of the same model
  object, eager with the model's own cache (``DynamicCache`` for the dense and MoE models), for
  Llama, Qwen3, Mixtral, Qwen2-MoE and DeepSeek-V3; ``hf_graph_replay``: the Llama decode step with a
  ``StaticCache`` captured in a ``torch.cuda.CUDAGraph`` and replayed; ``mixed_window``: one
  profile window holding the prefill and the decode steps (``record_shapes=True``).
- ``hybrid``: the same twins for Mamba-2 hybrids (NemotronH, GraniteMoeHybrid, Zamba2, Bamba,
  FalconH1, Jamba: whichever build here) and gated-DeltaNet (Qwen3-Next). The CUDA kernel packages
  (mamba_ssm, causal_conv1d, flash-linear-attention) are not installed, so the models' torch
  fallback paths run; ``measured.json`` says which path each model reported.
- ``cpu``: pairs whose cause is on the CPU side, on a small Llama-shaped decoder of this file:
  ``cpu_eager``/``cpu_graph`` (the same step launched eagerly vs captured in a CUDA graph),
  ``cpu_norm_fused``/``cpu_norm_manual`` (``with_stack``: RMSNorm as ``F.rms_norm`` in
  ``FusedRMSNorm`` vs a hand-written pow/mean/rsqrt/mul chain in ``ManualRMSNorm``),
  ``cpu_sync_none``/``cpu_sync_item`` (one ``.item()`` host sync per layer in B).

Usage (one GPU; outputs go into one tar per group because the device tool brings back few files)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 tools/record_hf_traces.py --out OUTDIR --groups hf,hybrid,cpu [--tar-dir TARDIR]

``--device cpu`` dry-runs the logic on a CPU (no CUDA events or graphs).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tarfile
import time
import traceback

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

DT = torch.bfloat16
PROMPT = 16


# ---------------------------------------------------------------- timing

class Timer:
    def __init__(self, dev) -> None:
        self.cuda = dev.type == "cuda"

    def event(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def ms(self, a, b) -> float:
        return a.elapsed_time(b) if self.cuda else (b - a) * 1000.0

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def stats(xs):
    return {"mean_ms": statistics.fmean(xs), "median_ms": statistics.median(xs), "min_ms": min(xs),
            "max_ms": max(xs), "n": len(xs)} if xs else {}


def timed_steps(step_fn, n, timer, annotate=False):
    ev = []
    for i in range(n):
        a = timer.event()
        if annotate:
            with record_function(f"decode_step_{i}"):
                step_fn()
        else:
            step_fn()
        ev.append((a, timer.event()))
    timer.sync()
    return [timer.ms(a, b) for a, b in ev]


def versions(dev) -> dict:
    out = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}
    try:
        import transformers
        out["transformers"] = transformers.__version__
    except ImportError:
        pass
    return out


def write_trace(prof, d) -> int:
    path = os.path.join(d, "trace.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    return os.path.getsize(path + ".gz")


def record(out, name, step_fn, timer, dev, steps, *, with_stack=False, record_shapes=False, warm=3,
           extra=None, reset=None):
    """Warm up, time ``steps`` unprofiled steps, then the same number profiled (each inside
    ``record_function('decode_step_N')``), and write the trace and measured.json."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    if reset:
        reset()
    for _ in range(warm):
        step_fn()
    timer.sync()
    un = timed_steps(step_fn, steps, timer)
    if reset:
        reset()
        for _ in range(warm):
            step_fn()
        timer.sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if timer.cuda else [])
    with profile(activities=acts, record_shapes=record_shapes, with_stack=with_stack) as prof:
        pr = timed_steps(step_fn, steps, timer, annotate=True)
    size = write_trace(prof, d)
    rec = {"scenario": name, "trace": "trace.json.gz", "decode_steps": steps,
           "annotations": [f"decode_step_{i}" for i in range(steps)],
           "with_stack": with_stack, "record_shapes": record_shapes,
           "profiled": {"decode_step_ms": pr, "decode": stats(pr)},
           "unprofiled": {"decode_step_ms": un, "decode": stats(un)},
           "step_method": "torch.cuda.Event pairs on the current stream around each decode step "
                          "(record_function('decode_step_N') inside them in the profiled run)",
           **versions(dev)}
    rec.update(extra or {})
    with open(os.path.join(d, "measured.json"), "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True, default=str)
    print(f"[{name}] unprofiled median {stats(un).get('median_ms', float('nan')):.3f} ms, profiled "
          f"{stats(pr).get('median_ms', float('nan')):.3f} ms, trace {size:,} B gz", flush=True)
    return rec


# ---------------------------------------------------------------- transformers models

SMALL = dict(vocab_size=4096, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
             num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
             pad_token_id=0, bos_token_id=1, eos_token_id=2)

MODELS = {
    "llama": ("LlamaConfig", {}),
    "qwen3": ("Qwen3Config", {"head_dim": 64}),
    "mixtral": ("MixtralConfig", {"num_local_experts": 8, "num_experts_per_tok": 2}),
    "qwen2moe": ("Qwen2MoeConfig", {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
                                    "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1}),
    "deepseekv3": ("DeepseekV3Config", {"n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
                                        "moe_intermediate_size": 256, "first_k_dense_replace": 1,
                                        "n_group": 1, "topk_group": 1, "kv_lora_rank": 128,
                                        "q_lora_rank": 192, "qk_rope_head_dim": 32, "qk_nope_head_dim": 32,
                                        "v_head_dim": 64, "num_key_value_heads": 8}),
    # hybrids: Mamba-2 mixers (+ attention, MLP/MoE) and gated DeltaNet
    "nemotronh": ("NemotronHConfig", {"layers_block_type": ["mamba", "moe", "attention", "mlp", "mamba", "moe"],
                                      "num_hidden_layers": 6, "mamba_num_heads": 16, "mamba_head_dim": 32,
                                      "n_groups": 2, "ssm_state_size": 64, "chunk_size": 64, "head_dim": 64,
                                      "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
                                      "moe_intermediate_size": 256, "moe_shared_expert_intermediate_size": 256,
                                      "n_group": 1, "topk_group": 1, "use_mamba_kernels": False}),
    "granitehybrid": ("GraniteMoeHybridConfig", {"layer_types": ["mamba", "mamba", "attention", "mamba"],
                                                 "mamba_n_heads": 32, "mamba_d_head": 32, "mamba_n_groups": 1,
                                                 "mamba_d_state": 64, "mamba_chunk_size": 64,
                                                 "num_local_experts": 8, "num_experts_per_tok": 2,
                                                 "shared_intermediate_size": 512}),
    "bamba": ("BambaConfig", {"attn_layer_indices": [2], "mamba_n_heads": 32, "mamba_d_head": 32,
                              "mamba_n_groups": 1, "mamba_d_state": 64, "mamba_chunk_size": 64}),
    "zamba2": ("Zamba2Config", {"layers_block_type": ["mamba", "mamba", "hybrid", "mamba"], "mamba_d_state": 64,
                                "n_mamba_heads": 16, "mamba_ngroups": 1, "chunk_size": 64, "num_mem_blocks": 1,
                                "use_mamba_kernels": False, "use_mem_eff_path": False}),
    "falconh1": ("FalconH1Config", {"mamba_n_heads": 16, "mamba_d_head": 32, "mamba_n_groups": 1,
                                    "mamba_d_state": 64, "mamba_chunk_size": 64, "mamba_d_ssm": 512}),
    "jamba": ("JambaConfig", {"attn_layer_period": 4, "attn_layer_offset": 2, "expert_layer_period": 2,
                              "expert_layer_offset": 1, "num_experts": 8, "num_experts_per_tok": 2,
                              "mamba_d_state": 16, "use_mamba_kernels": False}),
    "qwen3next": ("Qwen3NextConfig", {"layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                                      "full_attention"], "head_dim": 64,
                                      "linear_key_head_dim": 64, "linear_value_head_dim": 64,
                                      "linear_num_key_heads": 4, "linear_num_value_heads": 8,
                                      "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
                                      "shared_expert_intermediate_size": 256, "decoder_sparse_step": 1}),
}
GROUPS = {"hf": ["llama", "qwen3", "mixtral", "qwen2moe", "deepseekv3"],
          "hybrid": ["nemotronh", "granitehybrid", "bamba", "zamba2", "falconh1", "jamba", "qwen3next"]}


def build(key, dev):
    import transformers
    cls_name, kw = MODELS[key]
    conf = {**SMALL, **kw}
    cfg = getattr(transformers, cls_name)(**conf)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=DT, attn_implementation="sdpa")
    return cfg, model.to(dev).eval()


def code_paths(model) -> dict:
    """Which mixer path the model can take: the fast-kernel flags the transformers modules expose."""
    seen = {}
    for mod in model.modules():
        for attr in ("use_fast_kernels", "is_fast_path_available", "use_mamba_kernels", "causal_conv1d_fn",
                     "chunk_gated_delta_rule", "recurrent_gated_delta_rule"):
            if hasattr(mod, attr):
                v = getattr(mod, attr)
                seen[f"{type(mod).__name__}.{attr}"] = getattr(v, "__name__", None) or repr(v)[:80]
    import importlib.util as iu
    seen["packages"] = {p: iu.find_spec(p) is not None for p in ("mamba_ssm", "causal_conv1d", "fla")}
    return seen


def hf_decoder(model, cfg, dev):
    """(reset, step) closures: prefill a fresh cache, then one greedy token per step."""
    ids = torch.randint(3, cfg.vocab_size, (1, PROMPT), device=dev, generator=None)
    state = {}

    def reset():
        with torch.no_grad():
            o = model(input_ids=ids, use_cache=True)
        state.update(cache=o.past_key_values, tok=o.logits[:, -1:].argmax(-1), pos=PROMPT)

    def step():
        with torch.no_grad():
            o = model(input_ids=state["tok"], past_key_values=state["cache"], use_cache=True,
                      cache_position=torch.tensor([state["pos"]], device=dev))
            state["tok"] = o.logits[:, -1:].argmax(-1)
        state["pos"] += 1

    return reset, step, state


def sc_hf(key, dev, out, timer, steps):
    cfg, model = build(key, dev)
    reset, step, state = hf_decoder(model, cfg, dev)
    reset()
    extra = {"model_type": cfg.model_type, "architecture": type(model).__name__,
             "config": cfg.to_dict(), "code_paths": code_paths(model), "prompt_len": PROMPT,
             "cache": type(state["cache"]).__name__, "sampling": "greedy argmax per step",
             "classes": sorted({type(m).__name__ for m in model.modules()})}
    for twin, kw in (("plain", {}), ("stack", {"with_stack": True, "record_shapes": True})):
        rec = record(out, f"hf_{key}_{twin}", step, timer, dev, steps, reset=reset, extra=extra, **kw)
        rec["twin"] = twin
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def sc_mixed(dev, out, timer, steps):
    """One window with the prefill and the decode steps (what a profile started before a request holds)."""
    cfg, model = build("llama", dev)
    reset, step, _ = hf_decoder(model, cfg, dev)
    reset()
    for _ in range(3):
        step()
    d = os.path.join(out, "mixed_window")
    os.makedirs(d, exist_ok=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if timer.cuda else [])
    with profile(activities=acts, record_shapes=True) as prof:
        a = timer.event()
        with record_function("prefill"):
            reset()
        b = timer.event()
        dec = timed_steps(step, steps, timer, annotate=True)
    timer.sync()
    size = write_trace(prof, d)
    rec = {"scenario": "mixed_window", "trace": "trace.json.gz", "prompt_len": PROMPT, "decode_steps": steps,
           "annotations": ["prefill"] + [f"decode_step_{i}" for i in range(steps)],
           "profiled": {"prefill_ms": timer.ms(a, b), "decode_step_ms": dec}, "config": cfg.to_dict(),
           "what": "prefill of the prompt and greedy decode steps inside one profiler window", **versions(dev)}
    with open(os.path.join(d, "measured.json"), "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True, default=str)
    print(f"[mixed_window] prefill {rec['profiled']['prefill_ms']:.2f} ms, trace {size:,} B gz", flush=True)


def sc_graph_replay(dev, out, timer, steps):
    """The Llama decode step with a StaticCache captured in one CUDA graph, replayed per step."""
    import transformers
    cfg, model = build("llama", dev)
    cache = transformers.StaticCache(config=cfg, max_cache_len=256)
    ids = torch.randint(3, cfg.vocab_size, (1, PROMPT), device=dev)
    with torch.no_grad():
        o = model(input_ids=ids, past_key_values=cache, use_cache=True,
                  cache_position=torch.arange(PROMPT, device=dev))
    tok = o.logits[:, -1:].argmax(-1).clone()
    pos = torch.tensor([PROMPT], device=dev)
    nxt = tok.clone()

    def eager():
        with torch.no_grad():
            lo = model(input_ids=tok, past_key_values=cache, use_cache=True, cache_position=pos).logits
            nxt.copy_(lo[:, -1:].argmax(-1))

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eager()

    def step():
        g.replay()
        tok.copy_(nxt)
        pos.add_(1).remainder_(200)
        pos.clamp_(min=PROMPT)

    record(out, "hf_graph_replay", step, timer, dev, steps,
           extra={"config": cfg.to_dict(), "cache": "StaticCache(max_cache_len=256)",
                  "what": "LlamaForCausalLM decode step (StaticCache, greedy argmax) captured in one "
                          "torch.cuda.CUDAGraph; each step = g.replay() + two small eager copies"})


# ---------------------------------------------------------------- the CPU-side pairs

class FusedRMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)


class ManualRMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
        return (h * self.weight.float()).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, hidden, heads, max_len, dev):
        super().__init__()
        self.heads, self.hd = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.register_buffer("k", torch.zeros(1, heads, max_len, self.hd), persistent=False)
        self.register_buffer("v", torch.zeros(1, heads, max_len, self.hd), persistent=False)

    def forward(self, x, pos, mask):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 1, 3, self.heads, self.hd).unbind(2)
        self.k.index_copy_(2, pos, k.transpose(1, 2))
        self.v.index_copy_(2, pos, v.transpose(1, 2))
        a = F.scaled_dot_product_attention(q.transpose(1, 2), self.k, self.v, attn_mask=mask)
        return self.o(a.transpose(1, 2).reshape(b, 1, -1))


class MLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_up = nn.Linear(hidden, 2 * inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        g, u = self.gate_up(x).chunk(2, -1)
        return self.down(F.silu(g) * u)


class Layer(nn.Module):
    def __init__(self, hidden, heads, inter, max_len, norm, dev, sync):
        super().__init__()
        self.n1, self.n2 = norm(hidden), norm(hidden)
        self.attn, self.mlp = Attention(hidden, heads, max_len, dev), MLP(hidden, inter)
        self.sync = sync

    def forward(self, x, pos, mask):
        x = x + self.attn(self.n1(x), pos, mask)
        if self.sync:
            # a host sync per layer, as code that reads a flag or a length from the GPU does
            if x[0, 0, 0].item() != x[0, 0, 0].item():  # noqa: PLR0124 - NaN check that forces the sync
                raise FloatingPointError("NaN")
        return x + self.mlp(self.n2(x))


class SmallDecoder(nn.Module):
    def __init__(self, dev, norm=FusedRMSNorm, sync=False, layers=8, hidden=1024, heads=8, inter=2816,
                 vocab=32000, max_len=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Layer(hidden, heads, inter, max_len, norm, dev, sync) for _ in range(layers))
        self.norm = norm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.max_len = max_len
        self.shape = dict(layers=layers, hidden=hidden, heads=heads, inter=inter, vocab=vocab, max_len=max_len,
                          batch=1, norm=norm.__name__, sync_per_layer=sync)

    def forward(self, tok, pos):
        mask = (torch.arange(self.max_len, device=tok.device) <= pos).view(1, 1, 1, -1)
        x = self.emb(tok).view(1, 1, -1)
        for layer in self.layers:
            x = layer(x, pos, mask)
        return self.head(self.norm(x)).argmax(-1).view(1)


def small(dev, **kw):
    torch.manual_seed(0)
    m = SmallDecoder(dev, **kw).to(dev, DT).eval()
    tok = torch.randint(0, 32000, (1,), device=dev)
    pos = torch.full((1,), PROMPT, dtype=torch.long, device=dev)
    return m, tok, pos


def eager_step(m, tok, pos):
    def step():
        with torch.no_grad():
            tok.copy_(m(tok, pos))
        pos.add_(1).remainder_(m.max_len - 8)
    return step


def sc_cpu(dev, out, timer, steps):
    why = {"cpu_eager": "eager launches (one per kernel per step)",
           "cpu_graph": "the same step captured in one CUDA graph (one graph launch per step)",
           "cpu_norm_fused": "RMSNorm as F.rms_norm (FusedRMSNorm)",
           "cpu_norm_manual": "RMSNorm hand-written (ManualRMSNorm: float, pow, mean, add, rsqrt, mul, mul, to)",
           "cpu_sync_none": "the eager step",
           "cpu_sync_item": "the eager step with one .item() host sync per layer"}
    for name, kw, graph, stack in (("cpu_eager", {}, False, False), ("cpu_graph", {}, True, False),
                                   ("cpu_norm_fused", {}, False, True),
                                   ("cpu_norm_manual", {"norm": ManualRMSNorm}, False, True),
                                   ("cpu_sync_none", {}, False, False),
                                   ("cpu_sync_item", {"sync": True}, False, False)):
        m, tok, pos = small(dev, **kw)
        step = eager_step(m, tok, pos)
        if graph and timer.cuda:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step()
            step = g.replay
        record(out, name, step, timer, dev, steps, with_stack=stack, record_shapes=stack,
               extra={"model": m.shape, "pair_change": why[name], "graph": graph})
        del m
    if timer.cuda:
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- main

def tar_group(out, names, tar_path):
    with tarfile.open(tar_path, "w") as t:
        for n in names:
            p = os.path.join(out, n)
            if os.path.exists(p):
                t.add(p, arcname=n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--groups", default="hf,hybrid,cpu")
    ap.add_argument("--only", default="", help="comma-separated model keys / scenario names")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tar-dir", default="")
    args = ap.parse_args()
    dev = torch.device(args.device)
    timer = Timer(dev)
    only = {s for s in args.only.split(",") if s}
    status = {}
    for group in args.groups.split(","):
        jobs = [(k, (lambda k=k: sc_hf(k, dev, args.out, timer, args.steps))) for k in GROUPS.get(group, [])]
        if group == "hf":
            jobs += [("graph_replay", lambda: sc_graph_replay(dev, args.out, timer, args.steps)),
                     ("mixed_window", lambda: sc_mixed(dev, args.out, timer, args.steps))]
        if group == "cpu":
            jobs += [("cpu", lambda: sc_cpu(dev, args.out, timer, args.steps))]
        for key, fn in jobs:
            if only and key not in only:
                continue
            if key == "graph_replay" and not timer.cuda:
                continue
            t0 = time.perf_counter()
            try:
                fn()
                status[key] = f"ok {time.perf_counter() - t0:.1f}s"
            except Exception as exc:  # noqa: BLE001 - one model failing must not lose the others
                traceback.print_exc()
                status[key] = f"FAILED {type(exc).__name__}: {str(exc)[:300]}"
            print(f"== {key}: {status[key]}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({**versions(dev), "status": status,
                   "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "python": sys.version.split()[0]}, f, indent=1, sort_keys=True)
    if args.tar_dir:
        os.makedirs(args.tar_dir, exist_ok=True)
        names = sorted(os.listdir(args.out))
        for group, pref in (("hf", ("hf_", "mixed")), ("cpu", ("cpu_",))):
            tar_group(args.out, [n for n in names if n.startswith(pref) and not any(
                n.startswith(f"hf_{h}") for h in GROUPS["hybrid"])], os.path.join(args.tar_dir, f"{group}.tar"))
        tar_group(args.out, [n for n in names if any(n.startswith(f"hf_{h}_") for h in GROUPS["hybrid"])]
                  + ["versions.json"], os.path.join(args.tar_dir, "hybrid.tar"))
    print(json.dumps(status, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
