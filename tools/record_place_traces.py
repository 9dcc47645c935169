#!/usr/bin/env python3
"""Record trace pairs for placing kernels by alignment (``kit.profile.load(trace, reference=REF)``).

Each pair is one decode step of a real ``transformers`` model (small random config, bf16, static
cache where the model has one) recorded twice: eager with ``with_stack=True, record_shapes=True``
(``<pair>_ref``: the reference, every kernel under its ops and modules) and the same step captured
in a CUDA graph and replayed (``<pair>_graph``: CPU+CUDA activities only, the replayed kernels under
no op). The truth for the aligner comes from the pair itself, not from the kit: where a replay step
and a reference step have the same number of kernels on a stream, kernel i is kernel i (the tests
check the count per step and say where it fails).

Pairs (``OUT/<scenario>/trace.json.gz`` + ``measured.json``):

- ``place_llama``: Llama, StaticCache, batch 4 (``_ref`` eager, ``_graph`` replay), and
  ``place_llama_ref_bs3``: the eager reference at batch 3 (a batch of 3 runs the graph of 4);
- ``place_mixtral``: Mixtral MoE (top-2 of 8, the grouped-mm experts backend: no host sync);
- ``place_<hybrid>``: Mamba-2 hybrids (Bamba, GraniteMoeHybrid, NemotronH: the first two that
  capture), the model's own cache, torch fallback mixers;
- ``place_compiled``: the Llama step ``torch.compile``d (inductor, no CUDA graphs) as reference,
  the same compiled step captured in a CUDA graph as target;
- ``place_piecewise``: a small decoder of this file whose step is captured in one graph per piece
  between attentions, attention (SDPA over the cache) run eagerly between the pieces, as vLLM's
  piecewise mode does;
- ``place_twostream``: that decoder with a shared-expert MLP on a second stream beside the MLP,
  forked and joined with events, captured in one graph.

Usage (one GPU)::

    python3 tools/record_place_traces.py --out OUTDIR [--steps 4] [--only llama,mixtral,...]

``--device cpu`` dry-runs the logic on a CPU (no graphs: the "graph" step runs eagerly).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_hf_traces as H  # noqa: E402  (also sets the NCCL/NVLS variables before torch)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DT = H.DT
PROMPT = H.PROMPT
MAX_LEN = 128
STACK = {"with_stack": True, "record_shapes": True}


# ---------------------------------------------------------------- graphs (eager stand-in on CPU)

def warm_on_side_stream(fn, dev, n=3):
    if dev.type != "cuda":
        for _ in range(n):
            fn()
        return
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def capture(fn, dev):
    """``fn`` captured in one CUDA graph -> its replay (on CPU: ``fn`` itself)."""
    warm_on_side_stream(fn, dev)
    if dev.type != "cuda":
        return fn
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g.replay


# ---------------------------------------------------------------- transformers models

def build(key, dev, experts=None):
    """H.build with the experts backend chosen where the model has one (grouped_mm: no host sync)."""
    import transformers
    cls_name, kw = H.MODELS[key]
    cfg = getattr(transformers, cls_name)(**{**H.SMALL, **kw})
    torch.manual_seed(0)
    extra = {"experts_implementation": experts} if experts else {}
    try:
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=DT, attn_implementation="sdpa", **extra)
    except Exception:  # noqa: BLE001 - a model without experts refuses the argument: build it without
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=DT, attn_implementation="sdpa")
        extra = {}
    return cfg, model.to(dev).eval(), extra


class Decode:
    """One greedy decode step of an HF model on a cache: ``forward()`` (the part a graph captures)
    and ``after()`` (the token and position updates every step runs eagerly)."""

    def __init__(self, model, cfg, dev, bs, static=True):
        import transformers
        self.model, self.dev = model, dev
        torch.manual_seed(1)
        ids = torch.randint(3, cfg.vocab_size, (bs, PROMPT), device=dev)
        cache = transformers.StaticCache(config=cfg, max_cache_len=MAX_LEN) if static else None
        with torch.no_grad():
            o = model(input_ids=ids, past_key_values=cache, use_cache=True,
                      cache_position=torch.arange(PROMPT, device=dev))
        self.cache = o.past_key_values
        self.tok = o.logits[:, -1:].argmax(-1).clone()
        self.nxt = self.tok.clone()
        self.pos = torch.tensor([PROMPT], device=dev)
        self.cache_type = type(self.cache).__name__

    def forward(self):
        with torch.no_grad():
            lo = self.model(input_ids=self.tok, past_key_values=self.cache, use_cache=True,
                            cache_position=self.pos).logits
            self.nxt.copy_(lo[:, -1:].argmax(-1))

    def after(self):
        self.tok.copy_(self.nxt)
        self.pos.add_(1).remainder_(MAX_LEN - 8)
        self.pos.clamp_(min=PROMPT)

    def eager_step(self):
        self.forward()
        self.after()


def pair(out, name, timer, dev, steps, eager_fn, replay_fn, after, extra, ref_only=False, ref_name=None):
    """Record ``<name>_ref`` (eager, with stack; or ``ref_name``) and, unless ``ref_only``, ``<name>_graph``."""
    def ref():
        eager_fn()
        after()
    H.record(out, ref_name or f"{name}_ref", ref, timer, dev, steps, **STACK, extra={**extra, "role": "reference"})
    if ref_only:
        return
    replay = replay_fn()

    def tgt():
        replay()
        after()
    H.record(out, f"{name}_graph", tgt, timer, dev, steps, extra={**extra, "role": "target (graph replay)"})


def sc_hf(key, dev, out, timer, steps, bs=4, static=True, experts=None, name=None, ref_bs=None):
    cfg, model, ex = build(key, dev, experts)
    d = Decode(model, cfg, dev, bs, static)
    extra = {"model_type": cfg.model_type, "architecture": type(model).__name__, "config": cfg.to_dict(),
             "batch": bs, "cache": d.cache_type, "code_paths": H.code_paths(model), **ex,
             "what": f"{type(model).__name__} decode step (greedy argmax) at batch {bs}; _graph: the step "
                     f"captured in one torch.cuda.CUDAGraph and replayed, then the same eager token/position "
                     f"updates"}
    name = name or f"place_{key}"
    pair(out, name, timer, dev, steps, d.forward, lambda: capture(d.forward, dev), d.after, extra)
    if ref_bs:
        d3 = Decode(model, cfg, dev, ref_bs, static)
        pair(out, name, timer, dev, steps, d3.forward, None, d3.after,
             {**extra, "batch": ref_bs, "what": f"the eager reference at batch {ref_bs} (the graph of batch "
                                                f"{bs} serves it, padded)"}, ref_only=True,
             ref_name=f"{name}_ref_bs{ref_bs}")
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def moe(dev, out, timer, steps):
    """Mixtral with the grouped-mm experts backend, else batched-mm (whichever captures here)."""
    try:
        sc_hf("mixtral", dev, out, timer, steps, experts="grouped_mm")
    except Exception:  # noqa: BLE001 - the other backend is the fallback; its failure is reported
        traceback.print_exc()
        print("mixtral: grouped_mm failed, trying batched_mm", flush=True)
        sc_hf("mixtral", dev, out, timer, steps, experts="batched_mm")


def sc_compiled(dev, out, timer, steps, bs=4):
    """Llama step compiled by inductor: launched as compiled (reference) vs captured in a graph."""
    cfg, model, _ = build("llama", dev)
    d = Decode(model, cfg, dev, bs)
    inner = torch.compile(lambda tok, pos: model(input_ids=tok, past_key_values=d.cache, use_cache=True,
                                                 cache_position=pos).logits[:, -1:].argmax(-1))

    def fwd():
        with torch.no_grad():
            d.nxt.copy_(inner(d.tok, d.pos))
    t0 = time.perf_counter()
    for _ in range(3):
        fwd()
    extra = {"model_type": cfg.model_type, "config": cfg.to_dict(), "batch": bs, "cache": d.cache_type,
             "compile_s": time.perf_counter() - t0, "compile": "torch.compile default mode (inductor, no CUDA graphs)",
             "what": "compiled Llama decode step; _ref launched as compiled, _graph captured in a CUDA graph"}
    pair(out, "place_compiled", timer, dev, steps, fwd, lambda: capture(fwd, dev), d.after, extra)


# ---------------------------------------------------------------- the small decoder: piecewise, two streams

class Hooks:
    """Where a piecewise capture ends one graph and starts the next (no-ops when running eagerly)."""

    def __init__(self):
        self.before_attend = self.after_attend = lambda: None


class TinyRMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)


class TinyAttention(nn.Module):
    """q/k/v projections, a rotary-like mix, the cache write and SDPA over the whole cache with a
    position mask (fixed shapes: capturable); ``q`` and ``a`` are static buffers so the attention
    can run eagerly between two graph pieces."""

    def __init__(self, hidden, heads, bs, hooks):
        super().__init__()
        self.heads, self.hd, self.hooks = heads, hidden // heads, hooks
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        for n, shape in (("k_cache", (bs, heads, MAX_LEN, self.hd)), ("v_cache", (bs, heads, MAX_LEN, self.hd)),
                         ("q", (bs, heads, 1, self.hd)), ("a", (bs, heads, 1, self.hd))):
            self.register_buffer(n, torch.zeros(shape), persistent=False)
        self.register_buffer("mask", torch.zeros(1, 1, 1, MAX_LEN, dtype=torch.bool), persistent=False)

    def forward(self, x, pos):
        b = x.shape[0]
        q = self.q_proj(x).view(b, 1, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, 1, self.heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, 1, self.heads, self.hd).transpose(1, 2)
        q, k = q * 0.5 + q.flip(-1) * 0.5, k * 0.5 + k.flip(-1) * 0.5
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        self.q.copy_(q)
        torch.le(torch.arange(MAX_LEN, device=x.device), pos, out=self.mask.view(-1))
        self.hooks.before_attend()
        self.attend()
        self.hooks.after_attend()
        return self.o_proj(self.a.transpose(1, 2).reshape(b, 1, -1))

    def attend(self):
        self.a.copy_(F.scaled_dot_product_attention(self.q, self.k_cache, self.v_cache, attn_mask=self.mask))


class TinyMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TinyDecoderLayer(nn.Module):
    def __init__(self, hidden, heads, inter, bs, hooks, side):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = TinyRMSNorm(hidden), TinyRMSNorm(hidden)
        self.self_attn, self.mlp = TinyAttention(hidden, heads, bs, hooks), TinyMLP(hidden, inter)
        self.side = side
        self.shared_expert = TinyMLP(hidden, inter // 2) if side is not None else None

    def forward(self, h, pos):
        h = h + self.self_attn(self.input_layernorm(h), pos)
        x = self.post_attention_layernorm(h)
        if self.side is None:
            return h + self.mlp(x)
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            y2 = self.shared_expert(x)
        y1 = self.mlp(x)
        cur.wait_stream(self.side)
        return h + y1 + y2


class TinyModel(nn.Module):
    def __init__(self, dev, bs=4, layers=4, hidden=512, heads=8, inter=1024, vocab=4096, two_streams=False):
        super().__init__()
        self.hooks = Hooks()
        side = torch.cuda.Stream() if two_streams and dev.type == "cuda" else None
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(TinyDecoderLayer(hidden, heads, inter, bs, self.hooks, side)
                                    for _ in range(layers))
        self.norm = TinyRMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.shape = dict(batch=bs, layers=layers, hidden=hidden, heads=heads, inter=inter, vocab=vocab,
                          max_len=MAX_LEN, two_streams=side is not None)

    def forward(self, tok, pos):
        h = self.embed_tokens(tok)
        for layer in self.layers:
            h = layer(h, pos)
        return self.lm_head(self.norm(h)).argmax(-1)


def tiny(dev, **kw):
    torch.manual_seed(0)
    m = TinyModel(dev, **kw).to(dev, DT).eval()
    bs = m.shape["batch"]
    tok = torch.randint(3, m.shape["vocab"], (bs, 1), device=dev)
    nxt = tok.clone()
    pos = torch.tensor([PROMPT], device=dev)

    def forward():
        with torch.no_grad():
            nxt.copy_(m(tok, pos))

    def after():
        tok.copy_(nxt)
        pos.add_(1).remainder_(MAX_LEN - 8)
        pos.clamp_(min=PROMPT)
    return m, forward, after


def capture_piecewise(m, forward, dev):
    """One graph per piece between attentions (embedding + layer 0 up to its attention, each layer's
    tail + the next layer's head, the last tail + the LM head); the attentions run eagerly between
    replays. On CPU: the forward itself."""
    warm_on_side_stream(forward, dev)
    if dev.type != "cuda":
        return forward
    graphs = [torch.cuda.CUDAGraph()]

    def end():
        graphs[-1].capture_end()

    def begin():
        graphs.append(torch.cuda.CUDAGraph())
        graphs[-1].capture_begin(pool=graphs[0].pool())

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        graphs[0].capture_begin()
        m.hooks.before_attend, m.hooks.after_attend = end, begin
        try:
            forward()
        finally:
            m.hooks.before_attend = m.hooks.after_attend = lambda: None
        graphs[-1].capture_end()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    attends = [layer.self_attn.attend for layer in m.layers]

    def replay():
        with torch.no_grad():
            for g, att in zip(graphs, attends):
                g.replay()
                att()
            graphs[-1].replay()
    return replay


def sc_piecewise(dev, out, timer, steps):
    m, forward, after = tiny(dev)
    extra = {"model": m.shape, "what": "small decoder of record_place_traces.py; _graph: one CUDA graph per piece "
                                       "between attentions, SDPA attention eager between the replays"}
    pair(out, "place_piecewise", timer, dev, steps, forward, lambda: capture_piecewise(m, forward, dev), after, extra)


def sc_twostream(dev, out, timer, steps):
    m, forward, after = tiny(dev, two_streams=True)
    extra = {"model": m.shape, "what": "small decoder with a shared-expert MLP on a second stream (fork/join by "
                                       "events); _graph: the step captured in one CUDA graph"}
    pair(out, "place_twostream", timer, dev, steps, forward, lambda: capture(forward, dev), after, extra)


# ---------------------------------------------------------------- main

def jobs(dev, out, timer, steps):
    yield "llama", lambda: sc_hf("llama", dev, out, timer, steps, ref_bs=3)
    yield "mixtral", lambda: moe(dev, out, timer, steps)
    for key in ("bamba", "granitehybrid", "nemotronh"):
        ex = None if key == "bamba" else "grouped_mm"
        yield key, (lambda key=key, ex=ex: sc_hf(key, dev, out, timer, steps, static=False, experts=ex))
    yield "compiled", lambda: sc_compiled(dev, out, timer, steps)
    yield "piecewise", lambda: sc_piecewise(dev, out, timer, steps)
    yield "twostream", lambda: sc_twostream(dev, out, timer, steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated job names (llama, mixtral, bamba, ...)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hybrids", type=int, default=2, help="stop after this many hybrids recorded")
    args = ap.parse_args()
    dev = torch.device(args.device)
    timer = H.Timer(dev)
    only = {s for s in args.only.split(",") if s}
    status, hybrids = {}, 0
    for key, fn in jobs(dev, args.out, timer, args.steps):
        if (only and key not in only) or (key in ("bamba", "granitehybrid", "nemotronh") and hybrids >= args.hybrids):
            continue
        t0 = time.perf_counter()
        try:
            fn()
            status[key] = f"ok {time.perf_counter() - t0:.1f}s"
            hybrids += key in ("bamba", "granitehybrid", "nemotronh")
        except Exception as exc:  # noqa: BLE001 - one scenario failing must not lose the others
            traceback.print_exc()
            status[key] = f"FAILED {type(exc).__name__}: {str(exc)[:300]}"
        print(f"== {key}: {status[key]}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "versions_place.json"), "w") as f:
        json.dump({**H.versions(dev), "status": status, "by": "tools/record_place_traces.py",
                   "steps": args.steps, "recorded_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())},
                  f, indent=1, sort_keys=True)
    print(json.dumps(status, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
