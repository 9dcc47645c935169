#!/usr/bin/env python3
"""Record real torch-profiler traces for kernel attribution (op tree, modules, compiled kernels, MoE, graphs).

Scenarios (each writes ``OUT/<scenario>/trace.json.gz`` and ``measured.json``):

- ``compiled_decode``: a small Llama-shaped decoder (nn.Modules: RMSNorm written as pow/mean/rsqrt,
  rotary cos/sin/cat, a static KV cache written with ``index_copy_``, SDPA, SiLU-gated MLP) whose
  decode step is ``torch.compile``'d in the default mode (Triton kernels launched eagerly);
- ``compiled_graph``: the same compiled step captured in a ``torch.cuda.CUDAGraph`` and replayed;
- ``hf_generate_static``: transformers' ``generate()`` with ``cache_implementation="static"`` on a
  tiny ``LlamaForCausalLM`` built from a ``LlamaConfig`` with random weights (no hub access);
- ``hf_eager_stack``: the same HF model, an eager decode loop recorded with ``record_shapes=True,
  with_stack=True`` (nn.Module frames in the trace);
- ``moe_decode``: the decoder with MoE blocks (a top-k router: softmax, topk, sort; experts through
  ``torch._grouped_mm``), eager, ``with_stack=True``, plus a world-size-1 NCCL all-reduce per block
  (CPU-side ``c10d::allreduce_`` / ``record_param_comms``, no kernel);
- ``sdpa_<backend>``: the dense decoder eager with ``with_stack=True`` and SDPA forced to one backend
  (flash, cudnn, efficient, math) through ``torch.nn.attention.sdpa_kernel``.

Truth recorded outside the profiler (``measured.json``): CUDA-event times of every decode step in
the profiled run and in an identical unprofiled run; and, for eager scenarios, the GPU time of each
module class per decode step, measured in an unprofiled step with CUDA events recorded by forward
hooks while the GPU is held by ``torch.cuda._sleep`` until the whole step is queued (so the events
time GPU execution, not launch gaps). ``step_gpu_us`` is the same measurement around the whole step.

Usage::

    python3 tools/record_attribution_traces.py --out OUTDIR [--only a,b] [--device cpu]

``--device cpu`` dry-runs the logic on a CPU (no CUDA events, compile and graphs skipped).
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import statistics
import sys
import time
import traceback

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

DT = torch.bfloat16


# ---------------------------------------------------------------- the model

class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
        return (h * self.weight.float()).to(x.dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)),
                             persistent=False)

    def forward(self, pos):
        f = pos.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((f, f), dim=-1)
        return emb.cos().to(DT), emb.sin().to(DT)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rotary(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Attention(nn.Module):
    def __init__(self, c) -> None:
        super().__init__()
        self.c = c
        self.qkv_proj = nn.Linear(c.hidden, 3 * c.heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)
        self.register_buffer("k_cache", torch.zeros(c.batch, c.heads, c.max_len, c.head_dim), persistent=False)
        self.register_buffer("v_cache", torch.zeros(c.batch, c.heads, c.max_len, c.head_dim), persistent=False)

    def forward(self, x, cos, sin, pos, mask, pos_int):
        c = self.c
        B = x.shape[0]
        q, k, v = self.qkv_proj(x).view(B, 1, 3, c.heads, c.head_dim).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))       # [B, H, 1, D]
        q, k = apply_rotary(q, k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        if pos_int is None:   # static shapes (compile / graphs): the whole cache, masked
            a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        else:                 # eager: the filled part of the cache, no mask (every backend can run it)
            a = F.scaled_dot_product_attention(q, self.k_cache[:, :, :pos_int + 1], self.v_cache[:, :, :pos_int + 1])
        return self.o_proj(a.transpose(1, 2).reshape(B, c.heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, c) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(c.hidden, 2 * c.inter, bias=False)
        self.down_proj = nn.Linear(c.inter, c.hidden, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        g, u = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(self.act(g) * u)


class Router(nn.Module):
    def __init__(self, c) -> None:
        super().__init__()
        self.gate = nn.Linear(c.hidden, c.experts, bias=False)
        self.top_k = c.top_k

    def forward(self, x):
        probs = F.softmax(self.gate(x).float(), dim=-1)
        w, idx = torch.topk(probs, self.top_k, dim=-1)
        return (w / w.sum(-1, keepdim=True)).to(x.dtype), idx


class Experts(nn.Module):
    """Expert MLPs through ``torch._grouped_mm`` (tokens sorted by expert, offsets per expert)."""

    def __init__(self, c) -> None:
        super().__init__()
        self.E, self.inter = c.experts, c.expert_inter
        # stored [E, N, K] and used transposed (the column-major layout grouped GEMMs want)
        self.w1 = nn.Parameter(torch.randn(c.experts, 2 * c.expert_inter, c.hidden) * 0.02)
        self.w2 = nn.Parameter(torch.randn(c.experts, c.hidden, c.expert_inter) * 0.02)
        self.grouped = True

    def _mm(self, a, w, offs):
        if self.grouped:
            try:
                return torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
            except Exception as exc:  # noqa: BLE001 - record and fall back
                self.grouped = False
                self.grouped_error = f"{type(exc).__name__}: {exc}"[:300]
        outs, start = [], 0
        for e, end in enumerate(offs.tolist()):
            outs.append(a[start:end] @ w[e].t())
            start = end
        return torch.cat(outs)

    def forward(self, x, w, idx):
        T, K = idx.shape
        flat = idx.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        tok = order // K
        # counts without a host sync (bincount reads the max back): the step stays graph-capturable
        counts = torch.zeros(self.E, dtype=torch.int32, device=x.device).scatter_add_(
            0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        xs = x[tok]
        h = self._mm(xs, self.w1, offs)
        g, u = h.chunk(2, dim=-1)
        y = self._mm((F.silu(g) * u).contiguous(), self.w2, offs)
        y = y * w.reshape(-1)[order].unsqueeze(-1)
        out = torch.zeros_like(x)
        out.index_add_(0, tok, y)
        return out


class MoE(nn.Module):
    def __init__(self, c) -> None:
        super().__init__()
        self.router = Router(c)
        self.experts = Experts(c)

    def forward(self, x):
        w, idx = self.router(x)
        return self.experts(x, w, idx)


class DecoderLayer(nn.Module):
    def __init__(self, c, moe: bool) -> None:
        super().__init__()
        self.input_norm = RMSNorm(c.hidden)
        self.attn = Attention(c)
        self.post_norm = RMSNorm(c.hidden)
        self.mlp = MoE(c) if moe else MLP(c)
        self.allreduce = c.allreduce

    def forward(self, x, cos, sin, pos, mask, pos_int):
        a = self.attn(self.input_norm(x), cos, sin, pos, mask, pos_int)
        if self.allreduce:
            torch.distributed.all_reduce(a)
        x = x + a
        m = self.mlp(self.post_norm(x))
        if self.allreduce:
            torch.distributed.all_reduce(m)
        return x + m


class Decoder(nn.Module):
    def __init__(self, c, moe: bool = False) -> None:
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.hidden)
        self.rotary = RotaryEmbedding(c.head_dim)
        self.layers = nn.ModuleList(DecoderLayer(c, moe) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden)
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)
        self.register_buffer("positions", torch.arange(c.max_len), persistent=False)

    def step(self, tok, pos, pos_int=None):
        """One decode step in place: reads tok [B] and pos [1], writes the next tokens, advances pos."""
        x = self.embed(tok)
        cos, sin = self.rotary(pos)
        mask = (self.positions <= pos).view(1, 1, 1, -1) if pos_int is None else None
        for layer in self.layers:
            x = layer(x, cos, sin, pos, mask, pos_int)
        logits = self.lm_head(self.norm(x))
        tok.copy_(torch.argmax(logits, dim=-1))
        pos.add_(1)


class Cfg:
    def __init__(self, **kw) -> None:
        self.hidden, self.heads, self.head_dim, self.inter, self.vocab = 1024, 8, 128, 2816, 32000
        self.layers, self.max_len, self.batch = 4, 256, 4
        self.experts, self.top_k, self.expert_inter = 8, 2, 512
        self.allreduce = False
        self.__dict__.update(kw)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# ---------------------------------------------------------------- timing helpers

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


def timed_steps(step_fn, n, timer, annotate=False, prof=None, first=0):
    ev = []
    for i in range(n):
        a = timer.event()
        if annotate:
            with record_function(f"decode_step_{first + i}"):
                step_fn()
        else:
            step_fn()
        b = timer.event()
        ev.append((a, b))
        if prof is not None:
            prof.step()
    timer.sync()
    return [timer.ms(a, b) for a, b in ev]


def module_times(model, classes, step_fn, timer, dev, reps=3) -> dict:
    """GPU time per module class per step: forward hooks record CUDA events while the GPU is held by
    ``torch.cuda._sleep`` until the whole step is queued (launch gaps then do not count)."""
    if not timer.cuda:
        return {"note": "cpu dry run: no CUDA events"}
    handles, events = [], []
    for m in model.modules():
        cls = type(m).__name__
        if cls not in classes:
            continue

        def pre(mod, args, cls=cls):
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            events.append((cls, id(mod), "s", e))

        def post(mod, args, out, cls=cls):
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            events.append((cls, id(mod), "e", e))

        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    per_rep, steps = [], []
    try:
        for _ in range(reps):
            events.clear()
            torch.cuda.synchronize()
            torch.cuda._sleep(int(400e6))       # ~0.2 s: the CPU queues the whole step meanwhile
            a = torch.cuda.Event(enable_timing=True)
            a.record()
            t0 = time.perf_counter()
            step_fn()
            queued_ms = (time.perf_counter() - t0) * 1000
            b = torch.cuda.Event(enable_timing=True)
            b.record()
            torch.cuda.synchronize()
            open_, tot = {}, {}
            for cls, mid, kind, e in events:
                if kind == "s":
                    open_.setdefault((cls, mid), []).append(e)
                else:
                    s = open_[(cls, mid)].pop()
                    tot[cls] = tot.get(cls, 0.0) + s.elapsed_time(e) * 1000.0
            per_rep.append(tot)
            steps.append({"step_gpu_us": a.elapsed_time(b) * 1000.0, "cpu_queue_ms": queued_ms})
    finally:
        for h in handles:
            h.remove()
    out = {cls: statistics.median(r.get(cls, 0.0) for r in per_rep) for cls in sorted(classes)}
    return {"modules_gpu_us": out, "step_gpu_us": statistics.median(s["step_gpu_us"] for s in steps),
            "cpu_queue_ms": max(s["cpu_queue_ms"] for s in steps),
            "method": "forward-hook CUDA events in an unprofiled step queued behind torch.cuda._sleep (~200 ms; "
                      "cpu_queue_ms must stay below it), median of %d steps; per class, summed over instances "
                      "(nested classes each count their own span)" % reps}


def module_graph_times(model, classes, step_fn, timer, reps=20) -> dict:
    """GPU time per module class per step: each module call of one step is captured in a CUDA graph
    with the inputs it had and replayed ``reps`` times between CUDA events (pure GPU time: no launch
    gaps). Calls that cannot be captured (a host sync inside) are listed with the error."""
    if not timer.cuda:
        return {}
    from torch.utils._pytree import tree_map

    calls, handles = [], []

    def snap(x):
        return x.clone() if isinstance(x, torch.Tensor) else x

    for m in model.modules():
        cls = type(m).__name__
        if cls in classes:
            def pre(mod, args, kwargs, cls=cls):
                calls.append((cls, mod, tree_map(snap, args), tree_map(snap, kwargs)))
            handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
    try:
        step_fn()
    finally:
        for h in handles:
            h.remove()
    torch.cuda.synchronize()
    per_class, per_class_calls, failed = {}, {}, {}
    for cls, mod, args, kwargs in calls:
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():
                for _ in range(2):
                    mod(*args, **kwargs)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g), torch.no_grad():
                mod(*args, **kwargs)
            for _ in range(3):
                g.replay()
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                g.replay()
            b.record()
            torch.cuda.synchronize()
            per_class[cls] = per_class.get(cls, 0.0) + a.elapsed_time(b) * 1000.0 / reps
            per_class_calls[cls] = per_class_calls.get(cls, 0) + 1
            del g
        except Exception as exc:  # noqa: BLE001 - record which could not be captured
            torch.cuda.synchronize()
            failed[cls] = f"{type(exc).__name__}: {exc}"[:200]
    return {"modules_graph_us": per_class, "modules_graph_calls": per_class_calls, "modules_graph_failed": failed,
            "modules_graph_method": "each module call of one decode step captured in a CUDA graph with its inputs "
                                    "and replayed %d times between CUDA events; summed per class (nested classes "
                                    "each count their own time)" % reps}


def step_graph_time(step_fn, timer) -> dict:
    """The whole decode step captured in a CUDA graph and replayed: its pure GPU time (the
    denominator of the module shares)."""
    if not timer.cuda:
        return {}
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step_fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step_fn()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        a.record()
        for _ in range(20):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        del g
        return {"step_graph_us": a.elapsed_time(b) * 1000.0 / 20}
    except Exception as exc:  # noqa: BLE001
        torch.cuda.synchronize()
        return {"step_graph_error": f"{type(exc).__name__}: {exc}"[:300]}


def record(outdir, name, step_fn, timer, steps, *, with_stack=False, record_shapes=False, warm=3, extra=None,
           model=None, classes=(), graph_truth=False):
    """Warm up, time ``steps`` unprofiled steps, record the profiled ones (trace written first), then
    measure the module truth (which may capture CUDA graphs) and write measured.json."""
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    for _ in range(warm):
        step_fn()
    timer.sync()
    un = timed_steps(step_fn, steps, timer)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if timer.cuda else [])
    path = os.path.join(d, "trace.json")
    with profile(activities=acts, record_shapes=record_shapes, with_stack=with_stack) as prof:
        pr = timed_steps(step_fn, steps, timer, annotate=True)
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    rec = {"scenario": name, "trace": "trace.json.gz", "decode_steps": steps,
           "annotations": [f"decode_step_{i}" for i in range(steps)],
           "with_stack": with_stack, "record_shapes": record_shapes,
           "profiled": {"decode_step_ms": pr, "decode": stats(pr)},
           "unprofiled": {"decode_step_ms": un, "decode": stats(un)},
           "step_method": "torch.cuda.Event pairs on the current stream around each decode step "
                          "(record_function('decode_step_N') inside them in the profiled run)",
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name() if timer.cuda else "cpu"}
    rec.update(extra or {})

    def write():
        with open(os.path.join(d, "measured.json"), "w") as f:
            json.dump(rec, f, indent=1, sort_keys=True)

    write()
    mod = module_times(model, set(classes), step_fn, timer, None) if model is not None and classes else {}
    rec.update(mod)
    write()
    if graph_truth and model is not None and classes:
        try:
            # DecoderLayer is left out: it holds the process-group all-reduce in the MoE scenario
            rec.update(module_graph_times(model, set(classes) - {"DecoderLayer"}, step_fn, timer))
        except Exception as exc:  # noqa: BLE001
            rec["modules_graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
        write()
        rec.update(step_graph_time(step_fn, timer))
        write()
    print(f"[{name}] decode step unprofiled median {stats(un).get('median_ms', float('nan')):.3f} ms, profiled "
          f"{stats(pr).get('median_ms', float('nan')):.3f} ms, trace {os.path.getsize(path + '.gz'):,} B gz; "
          f"graph module us {json.dumps(rec.get('modules_graph_us', {}))}, step graph us "
          f"{rec.get('step_graph_us')} {rec.get('step_graph_error', '')} {rec.get('modules_graph_failed', '')}",
          flush=True)
    return rec


# ---------------------------------------------------------------- scenarios

def own_model(dev, moe=False, **kw):
    torch.manual_seed(0)
    c = Cfg(**kw)
    m = Decoder(c, moe=moe).to(dev, DT).eval()
    tok = torch.randint(0, c.vocab, (c.batch,), device=dev)
    pos = torch.full((1,), 16, dtype=torch.long, device=dev)
    return c, m, tok, pos


def wrap_pos(c, pos, limit=200):
    """Keep the position inside the cache (steps repeat; values are random anyway)."""
    if int(pos.item()) >= limit:
        pos.fill_(16)


OWN_CLASSES = ("RMSNorm", "RotaryEmbedding", "Attention", "MLP", "MoE", "Router", "Experts", "DecoderLayer")


def sc_eager(dev, out, timer, steps, name, backend=None, moe=False, allreduce=False):
    c, m, tok, pos = own_model(dev, moe=moe, allreduce=allreduce, layers=2 if moe else 4,
                               batch=8 if moe else 4)
    ctx = None
    if backend is not None:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = sdpa_kernel([getattr(SDPBackend, backend)])
        ctx.__enter__()
    try:
        host_pos = [16]

        @torch.no_grad()
        def step():
            # the position is tracked on the host too: no .item() sync inside a step
            if host_pos[0] >= 200:
                pos.fill_(16)
                host_pos[0] = 16
            m.step(tok, pos, pos_int=host_pos[0])
            host_pos[0] += 1

        extra = {"model": c.as_dict(), "sdpa_backend": backend, "moe": moe}
        if moe:
            extra["grouped_mm"] = True
        rec = record(out, name, step, timer, steps, with_stack=True, extra=extra, model=m, classes=OWN_CLASSES,
                     graph_truth=True)
        if moe:
            ex = [l.mlp.experts for l in m.layers]
            if not all(e.grouped for e in ex):
                rec["grouped_mm"] = False
                rec["grouped_mm_error"] = next(getattr(e, "grouped_error", "") for e in ex if not e.grouped)
                with open(os.path.join(out, name, "measured.json"), "w") as f:
                    json.dump(rec, f, indent=1, sort_keys=True)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)


def sc_compiled(dev, out, timer, steps):
    c, m, tok, pos = own_model(dev)
    if dev.type != "cuda":
        print("[compiled_*] skipped on CPU dry run", flush=True)
        return

    def raw():
        with torch.no_grad():
            m.step(tok, pos)

    comp = torch.compile(raw)

    def step():
        comp()
        # positions wrap on the host only when needed (no sync in the timed steps: checked every 64)

    t0 = time.perf_counter()
    for _ in range(3):
        comp()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    pos.fill_(16)
    record(out, "compiled_decode", step, timer, steps, extra={"model": c.as_dict(), "compile": "default",
                                                             "compile_s": compile_s})
    pos.fill_(16)
    # the same compiled step captured in a CUDA graph and replayed
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            comp()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    pos.fill_(16)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        comp()
    torch.cuda.synchronize()
    pos.fill_(16)
    record(out, "compiled_graph", g.replay, timer, steps, warm=3,
           extra={"model": c.as_dict(), "compile": "default, captured in torch.cuda.CUDAGraph and replayed"})


def hf_model(dev):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=512, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(dev, DT).eval()
    return cfg, model


def sc_hf_generate(dev, out, timer, new_tokens):
    import transformers
    cfg, model = hf_model(dev)
    ids = torch.randint(3, cfg.vocab_size, (1, 32), device=dev)

    def gen():
        with torch.no_grad():
            # eos never ends it early: min_new_tokens = max_new_tokens
            return model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                  cache_implementation="static", pad_token_id=0)

    t0 = time.perf_counter()
    gen()
    gen()
    timer.sync()
    warm_s = time.perf_counter() - t0
    d = os.path.join(out, "hf_generate_static")
    os.makedirs(d, exist_ok=True)
    un = []
    for _ in range(3):
        a = timer.event()
        gen()
        b = timer.event()
        timer.sync()
        un.append(timer.ms(a, b))
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if timer.cuda else [])
    path = os.path.join(d, "trace.json")
    with profile(activities=acts) as prof:
        a = timer.event()
        with record_function("generate"):
            o = gen()
        b = timer.event()
    timer.sync()
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    rec = {"scenario": "hf_generate_static", "trace": "trace.json.gz", "new_tokens": int(o.shape[1] - ids.shape[1]),
           "prompt_len": int(ids.shape[1]), "profiled": {"generate_ms": timer.ms(a, b)},
           "unprofiled": {"generate_ms": un, "generate": stats(un)}, "warmup_s": warm_s,
           "model": {k: getattr(cfg, k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                                   "num_attention_heads", "num_key_value_heads", "vocab_size")},
           "transformers": transformers.__version__, "torch": torch.__version__,
           "method": "torch.cuda.Event pair around the whole generate() call",
           "device": torch.cuda.get_device_name() if timer.cuda else "cpu"}
    with open(os.path.join(d, "measured.json"), "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
    print(f"[hf_generate_static] {rec['new_tokens']} tokens, unprofiled median {stats(un)['median_ms']:.2f} ms, "
          f"profiled {rec['profiled']['generate_ms']:.2f} ms, warm-up {warm_s:.1f} s", flush=True)


def sc_hf_eager(dev, out, timer, steps):
    import transformers
    from transformers import DynamicCache
    cfg, model = hf_model(dev)
    ids = torch.randint(3, cfg.vocab_size, (1, 32), device=dev)
    state = {}

    def reset():
        with torch.no_grad():
            cache = DynamicCache()
            o = model(ids, past_key_values=cache, use_cache=True)
            state.update(cache=o.past_key_values, tok=o.logits[:, -1:].argmax(-1), n=0)

    def step():
        if state.get("n", 1000) >= 96:
            reset()
        with torch.no_grad():
            o = model(state["tok"], past_key_values=state["cache"], use_cache=True)
        state["tok"] = o.logits[:, -1:].argmax(-1)
        state["n"] += 1

    classes = ("LlamaRMSNorm", "LlamaRotaryEmbedding", "LlamaAttention", "LlamaMLP", "LlamaDecoderLayer")
    record(out, "hf_eager_stack", step, timer, steps, with_stack=True, record_shapes=True, model=model,
           classes=classes, extra={"model": {k: getattr(cfg, k) for k in (
               "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "vocab_size")}, "transformers": transformers.__version__,
               "cache": "DynamicCache"})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(0)
    timer = Timer(dev)
    os.makedirs(args.out, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
                "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                "cudnn": torch.backends.cudnn.version() if dev.type == "cuda" else None,
                "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "failures": {}}
    try:
        import transformers
        versions["transformers"] = transformers.__version__
    except ImportError:
        pass
    jobs = [
        ("moe_decode", lambda: sc_eager(dev, args.out, timer, args.steps, "moe_decode", moe=True,
                                        allreduce=_init_dist(dev),
                                        backend="FLASH_ATTENTION" if dev.type == "cuda" else None)),
        ("sdpa_flash", lambda: sc_eager(dev, args.out, timer, args.steps, "sdpa_flash", backend="FLASH_ATTENTION")),
        ("sdpa_cudnn", lambda: sc_eager(dev, args.out, timer, args.steps, "sdpa_cudnn", backend="CUDNN_ATTENTION")),
        ("sdpa_efficient", lambda: sc_eager(dev, args.out, timer, args.steps, "sdpa_efficient",
                                            backend="EFFICIENT_ATTENTION")),
        ("sdpa_math", lambda: sc_eager(dev, args.out, timer, args.steps, "sdpa_math", backend="MATH")),
        ("hf_eager_stack", lambda: sc_hf_eager(dev, args.out, timer, args.steps)),
        ("compiled", lambda: sc_compiled(dev, args.out, timer, args.steps)),
        ("hf_generate_static", lambda: sc_hf_generate(dev, args.out, timer, 16)),
    ]
    for name, fn in jobs:
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001 - one failing scenario must not lose the others
            tb = traceback.format_exc()
            versions["failures"][name] = tb[-2000:]
            print(f"[{name}] FAILED:\n{tb}", file=sys.stderr, flush=True)
        print(f"[{name}] {time.perf_counter() - t0:.1f} s", flush=True)
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump(versions, f, indent=1, sort_keys=True)
    return 0


def _init_dist(dev) -> bool:
    """A world-size-1 process group (NCCL on GPU, gloo on CPU): its all-reduce launches no kernel."""
    import torch.distributed as dist
    if dist.is_initialized():
        return True
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    try:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=0, world_size=1)
        return True
    except Exception as exc:  # noqa: BLE001
        print(f"[moe_decode] no process group ({exc}); recording without all-reduce", file=sys.stderr, flush=True)
        return False


if __name__ == "__main__":
    _ = math
    sys.exit(main())
