#!/usr/bin/env python3
"""Record real torch-profiler traces of a small Llama-shaped decode loop (the kit's own GPU fixtures).

What it runs: a Llama-shaped decoder (hidden 4096, 32 query heads, 8 KV heads (GQA), SiLU-gated MLP
of 14336, RMSNorm, RoPE, a static KV cache, greedy sampling, bf16, batch 1), written for tensor
parallelism over N ranks (torch.distributed NCCL, one process per GPU: column-parallel QKV and
gate/up projections, row-parallel output and down projections, an all-reduce after attention and
after the MLP). With ``--tp 1`` the same code runs on one GPU and still calls the 1-rank NCCL
all-reduce, so the trace shows what NCCL does for one rank.

For each variant (``eager``: one kernel launch per op; ``graph``: the decode step captured once in a
CUDA graph and replayed) it records, on every rank, one Kineto trace with a ``prefill`` and N
``decode_step_K`` annotations (``record_function``), one ``ProfilerStep#`` per step (profiler
schedule), and writes ``measured.json`` beside it: the per-step time measured with CUDA events
during the profiled run and during an identical unprofiled run, so tests can check the parsed step
time against a measurement that does not come from the trace.

Usage (one GPU)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python3 tools/record_decode_traces.py --tp 1 --out OUTDIR

``--sweep`` adds an all-reduce latency sweep (4 KB..4 MB, bf16) through torch.distributed, written
to ``OUTDIR/allreduce_sweep_tp<N>[_<proto>].csv`` (meaningful for N >= 2).
Output: ``OUTDIR/tp<N>_<variant>[_<proto>]/rank<R>.trace.json.gz`` and ``measured.json``.
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
import time
import traceback

# NVLink multicast stays off everywhere (it can take a shared host's GPUs out of service).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402


class Config:
    def __init__(self, layers: int, tp: int) -> None:
        self.hidden = 4096
        self.heads = 32
        self.kv_heads = 8
        self.head_dim = 128
        self.inter = 14336
        self.vocab = 32000
        self.layers = layers
        self.max_len = 512
        self.tp = tp
        assert self.heads % tp == 0 and self.kv_heads % tp == 0 and self.inter % tp == 0


class TPDecoder:
    """Weights of one rank's shard and the decode/prefill math (no nn.Module: fewer CPU ops)."""

    def __init__(self, cfg: Config, device: torch.device, seed: int = 0) -> None:
        g = torch.Generator(device=device).manual_seed(seed + dist.get_rank())
        dt = torch.bfloat16
        c = cfg
        self.cfg = c
        self.hq = c.heads // c.tp
        self.hkv = c.kv_heads // c.tp
        self.il = c.inter // c.tp

        def w(*shape):
            return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * 0.02).to(dt)

        self.embed = w(c.vocab, c.hidden)
        self.lm_head = w(c.vocab, c.hidden)
        self.final_norm = torch.ones(c.hidden, device=device, dtype=dt)
        self.layers = []
        for _ in range(c.layers):
            self.layers.append(dict(
                attn_norm=torch.ones(c.hidden, device=device, dtype=dt),
                wqkv=w((self.hq + 2 * self.hkv) * c.head_dim, c.hidden),   # column-parallel
                wo=w(c.hidden, self.hq * c.head_dim),                      # row-parallel
                mlp_norm=torch.ones(c.hidden, device=device, dtype=dt),
                w_gate_up=w(2 * self.il, c.hidden),                        # column-parallel
                w_down=w(c.hidden, self.il),                               # row-parallel
                k_cache=torch.zeros(1, self.hkv, c.max_len, c.head_dim, device=device, dtype=dt),
                v_cache=torch.zeros(1, self.hkv, c.max_len, c.head_dim, device=device, dtype=dt),
            ))
        inv = 1.0 / (10000 ** (torch.arange(0, c.head_dim, 2, device=device, dtype=torch.float32) / c.head_dim))
        freqs = torch.outer(torch.arange(c.max_len, device=device, dtype=torch.float32), inv)
        self.cos = freqs.cos().to(dt)
        self.sin = freqs.sin().to(dt)
        self.positions = torch.arange(c.max_len, device=device)

    @staticmethod
    def rope(x, cos, sin):
        # x: [1, H, T, D]; cos/sin: [T, D/2]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def _qkv(self, L, h, T):
        c = self.cfg
        qkv = F.linear(h, L["wqkv"])                                   # [T, (hq+2hkv)*D]
        q, k, v = qkv.split([self.hq * c.head_dim, self.hkv * c.head_dim, self.hkv * c.head_dim], dim=-1)
        q = q.view(T, self.hq, c.head_dim).transpose(0, 1).unsqueeze(0)
        k = k.view(T, self.hkv, c.head_dim).transpose(0, 1).unsqueeze(0)
        v = v.view(T, self.hkv, c.head_dim).transpose(0, 1).unsqueeze(0)
        return q, k, v

    def _mlp(self, L, x):
        h = F.rms_norm(x, (self.cfg.hidden,), L["mlp_norm"], 1e-5)
        gate, up = F.linear(h, L["w_gate_up"]).chunk(2, dim=-1)
        out = F.linear(F.silu(gate) * up, L["w_down"])
        dist.all_reduce(out)
        return x + out

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Process the prompt (causal attention), fill the KV cache, return the first sampled token."""
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
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            a = a.squeeze(0).transpose(0, 1).reshape(T, self.hq * c.head_dim)
            o = F.linear(a, L["wo"])
            dist.all_reduce(o)
            x = self._mlp(L, x + o)
        x = F.rms_norm(x[-1:], (c.hidden,), self.final_norm, 1e-5)
        return F.linear(x, self.lm_head).argmax(dim=-1)

    def decode(self, tok: torch.Tensor, pos: torch.Tensor) -> None:
        """One decode step, in place (graph-capturable): reads tok[1] and pos[1], writes the next
        token into tok and advances pos."""
        c = self.cfg
        x = self.embed.index_select(0, tok)                           # [1, hidden]
        cos, sin = self.cos.index_select(0, pos), self.sin.index_select(0, pos)
        mask = (self.positions <= pos).view(1, 1, 1, c.max_len)
        for L in self.layers:
            h = F.rms_norm(x, (c.hidden,), L["attn_norm"], 1e-5)
            q, k, v = self._qkv(L, h, 1)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            L["k_cache"].index_copy_(2, pos, k)
            L["v_cache"].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, L["k_cache"], L["v_cache"], attn_mask=mask, enable_gqa=True)
            a = a.squeeze(0).transpose(0, 1).reshape(1, self.hq * c.head_dim)
            o = F.linear(a, L["wo"])
            dist.all_reduce(o)
            x = self._mlp(L, x + o)
        x = F.rms_norm(x, (c.hidden,), self.final_norm, 1e-5)
        tok.copy_(F.linear(x, self.lm_head).argmax(dim=-1))
        pos.add_(1)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _stats(xs):
    return {"mean_ms": statistics.fmean(xs), "median_ms": statistics.median(xs),
            "min_ms": min(xs), "max_ms": max(xs), "n": len(xs)}


def _gzip_away(path: str) -> None:
    """``path`` -> ``path.gz`` (level 9); the plain file is removed."""
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


def run_variant(model: TPDecoder, variant: str, steps: int, prompt_len: int, outdir: str, rank: int,
                tag: str) -> dict:
    """Profile prefill + `steps` decode steps; also time an identical unprofiled run."""
    dev = torch.device("cuda", torch.cuda.current_device())
    prompt = torch.randint(0, model.cfg.vocab, (prompt_len,), device=dev,
                           generator=torch.Generator(device=dev).manual_seed(1))
    tok = torch.zeros(1, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)

    def do_prefill():
        tok.copy_(model.prefill(prompt))
        pos.fill_(prompt_len)

    graph = None
    if variant == "graph":
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

    # warm-up (cuBLAS heuristics, allocator, NCCL channels) outside every measurement
    for _ in range(2):
        do_prefill()
        for _ in range(4):
            do_decode()
    torch.cuda.synchronize()
    dist.barrier()

    def timed_loop(annotate: bool, prof=None):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps + 1)]
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

    # unprofiled reference run
    t0 = time.perf_counter()
    pre_un, dec_un = timed_loop(annotate=False)
    wall_un = time.perf_counter() - t0
    dist.barrier()

    trace_tmp = os.path.join(outdir, f"rank{rank}.trace.json")
    os.makedirs(outdir, exist_ok=True)

    def on_ready(p):
        p.export_chrome_trace(trace_tmp)

    # ProfilerStep#N via schedule: one wait and one warm-up iteration (a decode step each), then
    # the prefill and `steps` decode steps are active.
    sched = schedule(wait=1, warmup=1, active=steps + 1, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 on_trace_ready=on_ready, record_shapes=False, with_stack=False) as prof:
        for _ in range(2):
            do_decode()
            prof.step()
        pre_pr, dec_pr = timed_loop(annotate=True, prof=prof)
    torch.cuda.synchronize()
    _gzip_away(trace_tmp)
    return {
        "variant": variant,
        "scenario": tag,
        "rank": rank,
        "trace": f"rank{rank}.trace.json.gz",
        "prompt_len": prompt_len,
        "decode_steps": steps,
        "annotations": ["prefill"] + [f"decode_step_{i}" for i in range(steps)],
        "profiled": {"prefill_ms": pre_pr, "decode_step_ms": dec_pr, "decode": _stats(dec_pr)},
        "unprofiled": {"prefill_ms": pre_un, "decode_step_ms": dec_un, "decode": _stats(dec_un),
                       "loop_wall_s": wall_un},
        "method": "torch.cuda.Event pairs recorded on the current stream around each step "
                  "(prefill includes its cache fill; decode step includes sampling and the all-reduces)",
    }


def allreduce_sweep(rank: int, world: int, out_csv: str) -> None:
    """All-reduce latency, 4 KB..4 MB bf16, CUDA events over many back-to-back calls."""
    dev = torch.device("cuda", rank)
    rows = []
    size = 4096
    while size <= 4 * 1024 * 1024:
        n = size // 2
        x = torch.ones(n, dtype=torch.bfloat16, device=dev)
        for _ in range(20):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        iters = 200
        per = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(iters):
                dist.all_reduce(x)
            b.record()
            torch.cuda.synchronize()
            per.append(a.elapsed_time(b) * 1000.0 / iters)
        us = statistics.median(per)
        algbw = size / (us * 1e-6) / 1e9
        busbw = algbw * 2 * (world - 1) / world
        rows.append((size, n, world, os.environ.get("NCCL_PROTO", "default"), iters * 5, us, min(per), max(per),
                     algbw, busbw))
        size *= 2
    if rank == 0:
        with open(out_csv, "w") as f:
            f.write("size_bytes,nelems,world_size,nccl_proto,calls,median_us,min_us,max_us,algbw_GBps,busbw_GBps\n")
            for r in rows:
                f.write("%d,%d,%d,%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n" % r)


def worker(rank: int, args, port: int) -> None:
    world = args.tp
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    torch.manual_seed(0)
    cfg = Config(args.layers, world)
    model = TPDecoder(cfg, dev)
    proto = os.environ.get("NCCL_PROTO")
    suffix = f"_{proto.lower()}" if proto else ""
    for variant in args.variants.split(","):
        tag = f"tp{world}_{variant}{suffix}"
        outdir = os.path.join(args.out, tag)
        try:
            rec = run_variant(model, variant, args.steps, args.prompt_len, outdir, rank, tag)
            rec.update(world_size=world, nccl_proto=proto or "default", layers=cfg.layers, hidden=cfg.hidden,
                       heads=cfg.heads, kv_heads=cfg.kv_heads, intermediate=cfg.inter, dtype="bfloat16", batch=1,
                       torch=torch.__version__, cuda=torch.version.cuda,
                       nccl=".".join(map(str, torch.cuda.nccl.version())),
                       device=torch.cuda.get_device_name(dev),
                       allreduce_calls_per_decode_step=2 * cfg.layers)
            gathered = [None] * world
            dist.all_gather_object(gathered, rec)
            if rank == 0:
                with open(os.path.join(outdir, "measured.json"), "w") as f:
                    json.dump({"ranks": gathered}, f, indent=1, sort_keys=True)
                d = rec["profiled"]["decode"]
                print(f"[{tag}] decode step profiled median {d['median_ms']:.3f} ms, unprofiled median "
                      f"{rec['unprofiled']['decode']['median_ms']:.3f} ms; "
                      f"prefill {rec['profiled']['prefill_ms']:.3f} ms",
                      flush=True)
        except Exception:
            print(f"[{tag}] rank {rank} FAILED:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        dist.barrier()
    if args.sweep:
        try:
            allreduce_sweep(rank, world, os.path.join(args.out, f"allreduce_sweep_tp{world}{suffix}.csv"))
        except Exception:
            print(f"sweep rank {rank} FAILED:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    dist.destroy_process_group()


def write_versions(path: str) -> None:
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "python": sys.version.split()[0],
        "device_count": torch.cuda.device_count(),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "capability": [list(torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())],
        "env": {k: os.environ[k] for k in sorted(os.environ) if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))},
        "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(path, "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--variants", default="eager,graph")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--versions", help="write torch/CUDA/NCCL versions JSON here")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.versions:
        write_versions(args.versions)
    port = _free_port()
    if args.tp == 1:
        worker(0, args, port)
    else:
        torch.multiprocessing.spawn(worker, args=(args, port), nprocs=args.tp, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
