#!/usr/bin/env python3
"""Record pairs of real decode traces that differ by one known change (fixtures for ``kit.profile.compare``).

Each pair is the decode loop of ``tools/record_decode_traces.py`` (a Llama-shaped decoder, bf16,
batch 1, one GPU) run twice, identical except for one change, both as CUDA-graph replays (the GPU
runs the step's kernels back to back, so a change in kernel time is a change in step time):

- ``cmp_gemm_a`` / ``cmp_gemm_b``: 8 layers; run B adds one extra GEMM per layer
  (``F.linear`` of the normed hidden state by an extra [8192 x 4096] weight, output discarded).
  Known cause: the GEMM category. Its duration is measured separately with CUDA events (the 8
  per-layer extra GEMMs launched back to back, 20 rounds x 5 repeats, median).
- ``cmp_sdpa_<A>`` / ``cmp_sdpa_<B>``: 8 layers, 32 KV heads (MHA), a static KV cache of 4096
  positions; only the ``F.scaled_dot_product_attention`` backend differs (``sdpa_kernel``), chosen
  as the first two of cuDNN, memory-efficient, flash, math that accept these shapes with a mask.
  Known cause: the attention category. The two backends' SDPA time is measured separately with
  CUDA events on the model's own caches.
- ``cmp_shapes_a``: the GEMM pair's run A without graph capture, with ``record_shapes=True``, so
  the trace links each kernel (correlation id) to the aten op and its input shapes (roofline).

Every trace has ``decode_step_K`` ``record_function`` ranges (and their GPU copies) and a
``measured.json`` in the format of ``record_decode_traces.py`` (CUDA-event step times, profiled and
unprofiled) plus ``known``: the separately measured per-step cost of the change.

Usage (one GPU; the outputs go into one tar file because the device tool brings back few files)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python3 tools/record_compare_pairs.py --out OUTDIR [--tar OUT.tar]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import sys
import tarfile
import time
import traceback

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from record_decode_traces import Config, TPDecoder, write_versions  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
            ("flash", SDPBackend.FLASH_ATTENTION), ("math", SDPBackend.MATH)]


class CmpDecoder(TPDecoder):
    """TPDecoder with two switches: an extra GEMM per layer, and GQA on/off in SDPA."""

    def __init__(self, cfg: Config, device: torch.device, extra_out: int = 0) -> None:
        super().__init__(cfg, device)
        self.extra_on = False
        g = torch.Generator(device=device).manual_seed(7)
        for L in self.layers:
            if extra_out:
                w = torch.randn(extra_out, cfg.hidden, generator=g, device=device) * 0.02
                L["w_extra"] = w.to(torch.bfloat16)

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """As TPDecoder.prefill, with ``enable_gqa`` only when the heads differ (some SDPA backends
        refuse the flag)."""
        c = self.cfg
        T = tokens.shape[0]
        x = self.embed[tokens]
        cos, sin = self.cos[:T], self.sin[:T]
        for L in self.layers:
            h = F.rms_norm(x, (c.hidden,), L["attn_norm"], 1e-5)
            q, k, v = self._qkv(L, h, T)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            L["k_cache"][:, :, :T] = k
            L["v_cache"][:, :, :T] = v
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.hq != self.hkv)
            a = a.squeeze(0).transpose(0, 1).reshape(T, self.hq * c.head_dim)
            o = F.linear(a, L["wo"])
            dist.all_reduce(o)
            x = self._mlp(L, x + o)
        x = F.rms_norm(x[-1:], (c.hidden,), self.final_norm, 1e-5)
        return F.linear(x, self.lm_head).argmax(dim=-1)

    def attention(self, q, L, mask):
        return F.scaled_dot_product_attention(q, L["k_cache"], L["v_cache"], attn_mask=mask,
                                              enable_gqa=self.hq != self.hkv)

    def decode(self, tok: torch.Tensor, pos: torch.Tensor) -> None:
        c = self.cfg
        x = self.embed.index_select(0, tok)
        cos, sin = self.cos.index_select(0, pos), self.sin.index_select(0, pos)
        mask = (self.positions <= pos).view(1, 1, 1, c.max_len)
        for L in self.layers:
            h = F.rms_norm(x, (c.hidden,), L["attn_norm"], 1e-5)
            if self.extra_on:
                F.linear(h, L["w_extra"])
            q, k, v = self._qkv(L, h, 1)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            L["k_cache"].index_copy_(2, pos, k)
            L["v_cache"].index_copy_(2, pos, v)
            a = self.attention(q, L, mask)
            a = a.squeeze(0).transpose(0, 1).reshape(1, self.hq * c.head_dim)
            o = F.linear(a, L["wo"])
            dist.all_reduce(o)
            x = self._mlp(L, x + o)
        x = F.rms_norm(x, (c.hidden,), self.final_norm, 1e-5)
        tok.copy_(F.linear(x, self.lm_head).argmax(dim=-1))
        pos.add_(1)


def _stats(xs):
    return {"mean_ms": statistics.fmean(xs), "median_ms": statistics.median(xs),
            "min_ms": min(xs), "max_ms": max(xs), "n": len(xs)}


def _backend_ctx(backend):
    if backend is None:
        import contextlib
        return contextlib.nullcontext()
    return sdpa_kernel([backend])


def _gzip_away(path: str) -> None:
    """``path`` -> ``path.gz`` (level 9); the plain file is removed."""
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


def run_variant(model: CmpDecoder, tag: str, *, graph_mode: bool, steps: int, prompt_len: int, outdir: str,
                backend=None, record_shapes: bool = False) -> dict:
    """Profile prefill + ``steps`` decode steps and time an identical unprofiled run (CUDA events)."""
    dev = torch.device("cuda", torch.cuda.current_device())
    prompt = torch.randint(0, model.cfg.vocab, (prompt_len,), device=dev,
                           generator=torch.Generator(device=dev).manual_seed(1))
    tok = torch.zeros(1, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    with _backend_ctx(backend):
        def do_prefill():
            tok.copy_(model.prefill(prompt))
            pos.fill_(prompt_len)

        graph = None
        if graph_mode:
            do_prefill()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model.decode(tok, pos)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model.decode(tok, pos)
            torch.cuda.synchronize()

        def do_decode():
            if graph is not None:
                graph.replay()
            else:
                model.decode(tok, pos)

        for _ in range(2):
            do_prefill()
            for _ in range(4):
                do_decode()
        torch.cuda.synchronize()

        def timed_loop(annotate: bool, prof=None):
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(steps + 1)]
            for i in range(steps + 1):
                name = "prefill" if i == 0 else f"decode_step_{i - 1}"
                ev[i][0].record()
                if annotate:
                    with record_function(name):
                        do_prefill() if i == 0 else do_decode()
                else:
                    do_prefill() if i == 0 else do_decode()
                ev[i][1].record()
                if prof is not None:
                    prof.step()
            torch.cuda.synchronize()
            ms = [a.elapsed_time(b) for a, b in ev]
            return ms[0], ms[1:]

        t0 = time.perf_counter()
        pre_un, dec_un = timed_loop(annotate=False)
        wall_un = time.perf_counter() - t0
        os.makedirs(outdir, exist_ok=True)
        trace_tmp = os.path.join(outdir, "rank0.trace.json")

        def on_ready(p):
            p.export_chrome_trace(trace_tmp)

        sched = schedule(wait=1, warmup=1, active=steps + 1, repeat=1)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                     on_trace_ready=on_ready, record_shapes=record_shapes, with_stack=False) as prof:
            for _ in range(2):
                do_decode()
                prof.step()
            pre_pr, dec_pr = timed_loop(annotate=True, prof=prof)
        torch.cuda.synchronize()
    _gzip_away(trace_tmp)
    c = model.cfg
    return {
        "variant": "graph" if graph_mode else "eager", "scenario": tag, "rank": 0, "world_size": 1,
        "trace": "rank0.trace.json.gz", "prompt_len": prompt_len, "decode_steps": steps,
        "annotations": ["prefill"] + [f"decode_step_{i}" for i in range(steps)],
        "profiled": {"prefill_ms": pre_pr, "decode_step_ms": dec_pr, "decode": _stats(dec_pr)},
        "unprofiled": {"prefill_ms": pre_un, "decode_step_ms": dec_un, "decode": _stats(dec_un),
                       "loop_wall_s": wall_un},
        "method": "torch.cuda.Event pairs recorded on the current stream around each step",
        "record_shapes": record_shapes, "sdpa_backend": str(backend) if backend is not None else "default",
        "extra_gemm": bool(model.extra_on), "layers": c.layers, "hidden": c.hidden, "heads": c.heads,
        "kv_heads": c.kv_heads, "head_dim": c.head_dim, "intermediate": c.inter, "vocab": c.vocab,
        "max_len": c.max_len, "dtype": "bfloat16", "batch": 1, "torch": torch.__version__, "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(dev),
    }


def time_calls(fn, calls: int, rounds: int = 20, repeats: int = 5) -> float:
    """Median microseconds per call of ``fn(i)`` for i in range(calls), CUDA events around a batch."""
    for i in range(calls):
        fn(i)
    torch.cuda.synchronize()
    per = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(rounds):
            for i in range(calls):
                fn(i)
        b.record()
        torch.cuda.synchronize()
        per.append(a.elapsed_time(b) * 1000.0 / (rounds * calls))
    return statistics.median(per)


def write(outdir: str, rec: dict) -> None:
    with open(os.path.join(outdir, "measured.json"), "w") as f:
        json.dump({"ranks": [rec]}, f, indent=1, sort_keys=True)
    d = rec["profiled"]["decode"]
    print(f"[{rec['scenario']}] decode step profiled median {d['median_ms']:.4f} ms, unprofiled median "
          f"{rec['unprofiled']['decode']['median_ms']:.4f} ms", flush=True)


def gemm_pair(args, dev) -> None:
    cfg = Config(args.layers, 1)
    model = CmpDecoder(cfg, dev, extra_out=args.extra_out)
    h = torch.randn(1, cfg.hidden, device=dev).to(torch.bfloat16)
    extra_us = time_calls(lambda i: F.linear(h, model.layers[i]["w_extra"]), cfg.layers)
    known = {"change": f"one extra GEMM per layer: [1 x {cfg.hidden}] x [{cfg.hidden} x {args.extra_out}] bf16",
             "category": "gemm", "per_call_us": extra_us, "calls_per_step": cfg.layers,
             "per_step_us": extra_us * cfg.layers,
             "method": "CUDA events around the per-layer extra GEMMs launched back to back "
                       "(20 rounds over the 8 layers' weights, median of 5), outside the decode loop"}
    recs = {}
    for tag, extra in (("cmp_gemm_a", False), ("cmp_gemm_b", True)):
        model.extra_on = extra
        out = os.path.join(args.out, tag)
        rec = run_variant(model, tag, graph_mode=True, steps=args.steps, prompt_len=args.prompt_len, outdir=out)
        rec["pair"] = ["cmp_gemm_a", "cmp_gemm_b"]
        rec["known"] = known
        write(out, rec)
        recs[tag] = rec
    model.extra_on = False
    tag = "cmp_shapes_a"
    out = os.path.join(args.out, tag)
    rec = run_variant(model, tag, graph_mode=False, steps=6, prompt_len=args.prompt_len, outdir=out, record_shapes=True)
    write(out, rec)
    print(f"[gemm pair] extra GEMM {extra_us:.2f} us/call x {cfg.layers} = {extra_us * cfg.layers:.1f} us/step",
          flush=True)
    model.layers.clear()
    torch.cuda.empty_cache()


def sdpa_pair(args, dev) -> None:
    cfg = Config(args.layers, 1)
    cfg.kv_heads = cfg.heads
    cfg.max_len = args.context
    model = CmpDecoder(cfg, dev)
    q = torch.randn(1, cfg.heads, 1, cfg.head_dim, device=dev).to(torch.bfloat16)
    mask = (model.positions <= args.prompt_len).view(1, 1, 1, cfg.max_len)
    for L in model.layers:
        L["k_cache"].normal_()
        L["v_cache"].normal_()
    usable = []
    for name, be in BACKENDS:
        try:
            with sdpa_kernel([be]):
                model.attention(q, model.layers[0], mask)
            torch.cuda.synchronize()
            usable.append((name, be))
        except Exception as exc:  # this backend does not take these shapes
            print(f"[sdpa] backend {name} unusable: {str(exc).splitlines()[0][:200]}", flush=True)
    if len(usable) < 2:
        print("[sdpa] fewer than two usable backends; pair skipped", flush=True)
        return
    pick = usable[:2]
    times = {}
    for name, be in pick:
        with sdpa_kernel([be]):
            times[name] = time_calls(lambda i: model.attention(q, model.layers[i], mask), cfg.layers)
    (na, ba), (nb, bb) = pick
    known = {"change": f"SDPA backend {na} -> {nb} (decode, q 1 token, 32 heads, KV cache {cfg.max_len} positions, "
                       "mask)",
             "category": "attention", "per_call_us": {na: times[na], nb: times[nb]}, "calls_per_step": cfg.layers,
             "per_step_us": (times[nb] - times[na]) * cfg.layers, "usable_backends": [n for n, _ in usable],
             "method": "CUDA events around F.scaled_dot_product_attention on the model's own caches, launched back "
                       "to back over the 8 layers (20 rounds, median of 5), outside the decode loop"}
    for L in model.layers:
        L["k_cache"].zero_()
        L["v_cache"].zero_()
    tags = [f"cmp_sdpa_{na}", f"cmp_sdpa_{nb}"]
    for tag, be in zip(tags, (ba, bb)):
        out = os.path.join(args.out, tag)
        rec = run_variant(model, tag, graph_mode=True, steps=args.steps, prompt_len=args.prompt_len, outdir=out,
                          backend=be)
        rec["pair"] = tags
        rec["known"] = known
        write(out, rec)
    print(f"[sdpa pair] {na} {times[na]:.2f} us/call, {nb} {times[nb]:.2f} us/call", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", help="also pack OUT into this tar file")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--extra-out", type=int, default=8192)
    ap.add_argument("--context", type=int, default=4096)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_versions(os.path.join(args.out, "versions.json"))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    torch.manual_seed(0)
    rc = 0
    for fn in (gemm_pair, sdpa_pair):
        try:
            fn(args, dev)
        except Exception:
            rc = 1
            print(f"{fn.__name__} FAILED:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    dist.destroy_process_group()
    if args.tar:
        with tarfile.open(args.tar, "w") as t:
            t.add(args.out, arcname="pairs")
    return rc


if __name__ == "__main__":
    sys.exit(main())
