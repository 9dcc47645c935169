#!/usr/bin/env python3
"""Record transformers' continuous batching (a serving loop the kit was not written for) and tinyserve.

transformers 5.x runs continuous batching behind ``generate_batch`` and ``transformers serve``: a FIFO
scheduler fills each iteration with prefill chunks and decodes up to ``max_batch_tokens``, pads the
batch to a static signature (query tokens to ``q_padding_interval_size``, KV reads to
``kv_padding_interval_size``), runs paged attention (``paged|sdpa``) and replays one CUDA graph per
padded signature. The loop here is the manager's own (``prepare_next_batch`` -> ``_generation_step``
-> ``update_batch``, what ``ContinuousBatchingManager`` runs in its thread), driven on the main thread
so the profiler sees it; requests arrive in two waves (four at the start, two at iteration 6).

For each model (random weights of a real shape, bf16, 4 layers; no tokenizer is needed for
``generate_batch``, prompts are token ids), the same requests run, after one unprofiled warm pass of
each mode (every graph signature captured before the profiled pass, so the replay holds replays only):

- ``cb_<model>_graph``: CUDA graphs (CPU+CUDA activities);
- ``cb_<model>_eager``: graphs off, padding kept (the same signatures, eagerly), CPU+CUDA only;
- ``cb_<model>_ref``: the same eager pass with ``with_stack=True, record_shapes=True`` (the reference);

each iteration inside ``record_function(STEP_RANGE)`` (a name no engine table knows), and the same
three again with no step range at all (``..._norange``). ``measured.json`` holds the iterations (count
and per-iteration padded signature, requests, prefill/decode tokens), the config and the versions.

tinyserve (``notebooks/sample/engine``) on the Llama shape (``llama-3.2-1b`` with 4 layers), in
process: 4 requests prefilled, then decode steps under ``ProfilerStep#N`` (its own profiler's marker),
graph replay (``ts_llama_graph``) and eager with stacks (``ts_llama_ref``).

Usage (one GPU)::

    python3 tools/record_cb_traces.py --out OUTDIR [--only llama,qwen3,tinyserve]

``--device cpu`` dry-runs the same loop on a CPU (float32, no graphs, CPU activities only).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import time
import traceback
from types import SimpleNamespace

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

STEP_RANGE = "cb.generation_step"
DEV = {"device": "cuda"}
PROMPTS = [100, 40, 70, 20, 55, 30]          # prompt lengths (tokens)
NEW_TOKENS = [12, 16, 8, 14, 10, 6]          # max new tokens per request
LATE_FROM, LATE_AT = 4, 6                    # requests 4.. arrive at iteration 6
SHAPES = {  # name -> config kwargs (4 layers of each model's real dimensions)
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=2048, num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=8192, vocab_size=128256, max_position_embeddings=2048, rope_theta=500000.0,
        tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        hidden_size=1024, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        intermediate_size=3072, vocab_size=151936, max_position_embeddings=2048, tie_word_embeddings=True)),
}


def _sync() -> None:
    if DEV["device"] == "cuda":
        torch.cuda.synchronize()


def _acts() -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV["device"] == "cuda" else [])


def _save(prof, path: str) -> None:
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(path, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def _requests(vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(10, min(vocab, 30000), (n,), generator=g).tolist() for n in PROMPTS]


class Loop:
    """The continuous-batching manager's loop, driven here; one pass = the same requests, same schedule."""

    def __init__(self, model, cb_config, gen_config):
        from transformers.generation.continuous_batching.utils import WorkloadHints

        hints = WorkloadHints(max_prompt_length=max(PROMPTS), max_generated_length=max(NEW_TOKENS),
                              num_requests=len(PROMPTS))
        self.model = model
        self.mgr = model.init_continuous_batching(generation_config=gen_config,
                                                  continuous_batching_config=cb_config, workload_hints=hints)
        self.mgr.warmup()
        self.bp = self.mgr.batch_processor
        self.signatures: list[dict] = []
        runner = self.bp.model_runner
        pad = runner.maybe_pad_inputs

        def spy(num_q, max_kv, fast):
            out = pad(num_q, max_kv, fast)
            self.signatures.append({"q_tokens": num_q, "kv_read": max_kv, "decode_fast_path": bool(fast),
                                    "padded_q": out[0], "padded_kv": out[1]})
            return out

        runner.maybe_pad_inputs = spy

    def graphs(self, on: bool) -> None:
        r = self.bp.model_runner
        r.use_cuda_graph_varlen = r.use_cuda_graph_decode = on and DEV["device"] == "cuda"
        r.pad_inputs = True  # graphs off, padding kept: the reference runs the replay's signatures

    def run(self, prompts, step_range: str | None) -> list[dict]:
        self.signatures = []
        for i, p in enumerate(prompts[:LATE_FROM]):
            self.mgr.add_request(p, request_id=f"r{i}-{time.monotonic_ns()}", max_new_tokens=NEW_TOKENS[i])
        it, iters = 0, []
        while True:
            if it == LATE_AT:
                for i in range(LATE_FROM, len(prompts)):
                    self.mgr.add_request(prompts[i], request_id=f"r{i}-{time.monotonic_ns()}",
                                         max_new_tokens=NEW_TOKENS[i])
            t0 = time.perf_counter()
            ctx = record_function(step_range) if step_range else _Null()
            with ctx:
                if not self.bp.prepare_next_batch():
                    if it < LATE_AT:
                        it += 1
                        continue
                    break
                self.bp._generation_step(self.model)
                self.bp.update_batch()
            _sync()
            iters.append({"iteration": len(iters), "wall_ms": round((time.perf_counter() - t0) * 1e3, 3),
                          **(self.signatures[-1] if self.signatures else {})})
            it += 1
            if it > 400:
                raise RuntimeError("the loop did not drain")
        return iters


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def record_cb(name: str, out: str, log: dict) -> None:
    import transformers
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    cfg_cls, model_cls, kw = SHAPES[name]
    cfg = getattr(transformers, cfg_cls)(**kw)
    cfg.eos_token_id = None
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(DEV["device"]):  # random weights drawn on the GPU
        model = getattr(transformers, model_cls)(cfg)
    model = model.to(torch.bfloat16 if DEV["device"] == "cuda" else torch.float32).eval()
    model.set_attn_implementation("paged|sdpa")
    gen = GenerationConfig(do_sample=False, max_new_tokens=max(NEW_TOKENS), eos_token_id=-1, pad_token_id=0)
    cb = ContinuousBatchingConfig(block_size=32, num_blocks=64, max_batch_tokens=64, max_requests_per_batch=8,
                                  use_cuda_graph=True, use_async_batching=False, allow_block_sharing=False,
                                  q_padding_interval_size=32, kv_padding_interval_size=64, seed=0)
    loop = Loop(model, cb, gen)
    prompts = _requests(cfg.vocab_size)
    runs = {}
    for mode, graphs in (("graph", True), ("eager", False)):
        loop.graphs(graphs)
        runs[f"warm_{mode}"] = loop.run(prompts, STEP_RANGE)  # captures every signature / warms the allocator
        variants = [("graph", {})] if graphs else [("eager", {}), ("ref", {"with_stack": True, "record_shapes": True})]
        for tag, opts in variants:
            for rng in (STEP_RANGE, None):
                scen = f"cb_{name}_{tag}" + ("" if rng else "_norange")
                d = os.path.join(out, scen)
                os.makedirs(d, exist_ok=True)
                _sync()
                with profile(activities=_acts(), **opts) as prof:
                    iters = loop.run(prompts, rng)
                _save(prof, os.path.join(d, "trace.json.gz"))
                meas = {"scenario": scen, "engine": f"transformers {transformers.__version__} continuous batching",
                        "model": model_cls, "config": kw, "attn_implementation": "paged|sdpa",
                        "cuda_graphs": graphs, "padding_kept": True, "step_range": rng,
                        "iterations": len(iters), "per_iteration": iters, "profiler": opts or "CPU+CUDA",
                        "requests": {"prompt_tokens": PROMPTS, "max_new_tokens": NEW_TOKENS,
                                     "late_from": LATE_FROM, "late_at_iteration": LATE_AT},
                        "cb_config": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                                      for k, v in vars(loop.mgr.continuous_batching_config).items()}}
                with open(os.path.join(d, "measured.json"), "w") as f:
                    json.dump(meas, f, indent=1)
                log[scen] = {"iterations": len(iters), "bytes": os.path.getsize(os.path.join(d, "trace.json.gz"))}
                print(scen, log[scen], flush=True)
    log[f"cb_{name}_warm"] = {k: len(v) for k, v in runs.items()}


def record_tinyserve(out: str, log: dict, engine_path: str, steps: int = 12) -> None:
    sys.path.insert(0, engine_path)
    from tinyserve import torch_runner as tr

    tr.SHAPES["llama-3.2-1b-4l"] = (2048, 4, 32, 8, 8192, 128256)  # tinyserve's llama-3.2-1b with 4 layers
    args = SimpleNamespace(model_shape="llama-3.2-1b-4l", context_length=512, max_running_requests=8,
                           attention_backend="sdpa", cuda_graph_bs="1,2,4,8")
    prompts = _requests(128256)[:4]
    for tag, graphs, opts in (("graph", True, {}), ("ref", False, {"with_stack": True, "record_shapes": True})):
        runner = tr.TorchRunner(args, {"disable_cuda_graph": not graphs})
        runner.capture()
        last = [runner.prefill(s, p) for s, p in enumerate(prompts)]
        pos = [len(p) for p in prompts]
        for _ in range(3):  # warm
            runner.decode(last, pos, list(range(4)))
        scen = f"ts_llama_{tag}"
        d = os.path.join(out, scen)
        os.makedirs(d, exist_ok=True)
        _sync()
        with profile(activities=_acts(), **opts) as prof:
            for _ in range(steps):
                last = runner.decode(last, pos, list(range(4)))
                pos = [p + 1 for p in pos]
                prof.step()
        _save(prof, os.path.join(d, "trace.json.gz"))
        with open(os.path.join(d, "measured.json"), "w") as f:
            json.dump({"scenario": scen, "engine": "tinyserve (in process, TorchRunner)",
                       "shape": "llama-3.2-1b with 4 layers", "dims": tr.SHAPES["llama-3.2-1b-4l"],
                       "batch": 4, "cuda_graphs": graphs, "steps": steps, "step_marker": "ProfilerStep#N",
                       "profiler": opts or "CPU+CUDA"}, f, indent=1)
        log[scen] = {"steps": steps, "bytes": os.path.getsize(os.path.join(d, "trace.json.gz"))}
        print(scen, log[scen], flush=True)
        del runner
        _empty()


def _empty() -> None:
    if DEV["device"] == "cuda":
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="llama,qwen3,tinyserve")
    ap.add_argument("--engine-path", default="notebooks/sample/engine")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    DEV["device"] = a.device
    for _, _, kw in SHAPES.values():
        kw["num_hidden_layers"] = a.layers
    os.makedirs(a.out, exist_ok=True)
    import transformers

    log = {"versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                        "transformers": transformers.__version__, "python": platform.python_version(),
                        "gpu": torch.cuda.get_device_name() if a.device == "cuda" else "cpu"}, "errors": {}}
    for what in a.only.split(","):
        try:
            if what == "tinyserve":
                record_tinyserve(a.out, log, a.engine_path)
            else:
                record_cb(what, a.out, log)
        except Exception:  # one scenario's failure is recorded, the others still run
            log["errors"][what] = traceback.format_exc()[-3000:]
            print(log["errors"][what], flush=True)
        _empty()
    with open(os.path.join(a.out, "versions_cb.json"), "w") as f:
        json.dump(log, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
