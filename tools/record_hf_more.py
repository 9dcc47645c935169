#!/usr/bin/env python3
"""Record real ``transformers`` decode traces of architectures that differ from the ones of
``record_hf_traces.py`` (held-out fixtures for attribution: issue 33).

Chosen to differ in what a class name cannot say:

- projection classes: GPT-2's ``Conv1D`` (a transposed-weight module calling ``addmm``);
- routers and expert layouts: GPT-OSS (experts as one batched matmul over a stacked weight, top-k
  then softmax), Llama 4 (router is an ``nn.Linear`` subclass, top-k then sigmoid, experts as ``bmm``),
  DBRX (stacked expert weights, a loop per expert), OLMoE, Granite MoE (a top-k gate and parallel
  experts), Phi-MoE (sparsemixer routing: no top-k), Switch Transformers (top-1 router with argmax);
- eager attention (GPT-2, BLOOM's ``baddbmm`` with ALiBi, T5) and SDPA;
- encoder-decoder decode with cross-attention: T5, BART, Whisper (encoder run once before the steps);
- linear recurrences: RWKV, RecurrentGemma (RG-LRU), xLSTM (mLSTM), Mamba-1 (pure), MiniMax's
  lightning attention (linear attention with a decay, no softmax), LFM2's short convolution.

Each model: a tiny config with random weights (2 layers unless the layer pattern needs more), bf16,
batch 1, a ``PROMPT``-token prompt (decoder prompt of 4 tokens for encoder-decoders), then greedy
decode (one ``argmax`` per step) with the model's own cache or state, each step inside
``record_function('decode_step_N')``. Twins as in ``record_hf_traces.py``: ``hf_<key>_plain``
(CPU+CUDA only) and ``hf_<key>_stack`` (``with_stack=True, record_shapes=True``) of the same model
object. ``measured.json`` says which attention implementation and cache ran.

On the H200 run of the fixtures (torch 2.11, transformers 5.17) DBRX (``torch.clamp`` with neither bound,
from its config's ``clip_qkv``) and Switch Transformers (its decoder stack refusing ``use_cache``) did
not run; the script records the others and says which failed (``versions_more.json``).

Usage (one GPU)::

    python3 tools/record_hf_more.py --out OUTDIR --steps 4 [--only gpt2,t5] [--tar OUT/more.tar]
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import tarfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from record_hf_traces import DT, PROMPT, Timer, code_paths, record, versions  # noqa: E402

V = dict(vocab_size=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2)
DENSE = dict(hidden_size=512, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=4, max_position_embeddings=512, **V)

# key: (config class, kwargs, loader, attention implementation asked for)
MODELS = {
    "gpt2": ("GPT2Config", dict(n_embd=512, n_layer=2, n_head=8, n_positions=512, **V), "causal", "eager"),
    "bloom": ("BloomConfig", dict(hidden_size=512, n_layer=2, n_head=8, **V), "causal", "eager"),
    "gptoss": ("GptOssConfig", dict(DENSE, head_dim=64, num_local_experts=8, num_experts_per_tok=2,
                                    sliding_window=64, layer_types=["sliding_attention", "full_attention"]),
               "causal", "eager"),
    "llama4": ("Llama4TextConfig", dict(DENSE, intermediate_size_mlp=1024, head_dim=64, num_local_experts=4,
                                        num_experts_per_tok=1, interleave_moe_layer_step=1,
                                        attention_chunk_size=256), "causal", "sdpa"),
    "dbrx": ("DbrxConfig", dict(d_model=512, n_heads=8, n_layers=2, max_seq_len=512,
                                attn_config={"kv_n_heads": 4, "rope_theta": 10000.0},
                                ffn_config={"ffn_hidden_size": 512, "moe_num_experts": 4, "moe_top_k": 2}, **V),
             "causal", "sdpa"),
    "olmoe": ("OlmoeConfig", dict(DENSE, intermediate_size=256, num_experts=8, num_experts_per_tok=2),
              "causal", "sdpa"),
    "granitemoe": ("GraniteMoeConfig", dict(DENSE, intermediate_size=256, num_local_experts=8,
                                            num_experts_per_tok=2), "causal", "sdpa"),
    "phimoe": ("PhimoeConfig", dict(DENSE, intermediate_size=256, num_local_experts=4, num_experts_per_tok=2),
               "causal", "sdpa"),
    "switch": ("SwitchTransformersConfig", dict(d_model=512, d_kv=64, d_ff=1024, expert_capacity=64, num_layers=2,
                                                num_sparse_encoder_layers=1, num_decoder_layers=2,
                                                num_sparse_decoder_layers=1, num_heads=8, num_experts=8,
                                                decoder_start_token_id=0, **V), "seq2seq", None),
    "t5": ("T5Config", dict(d_model=512, d_kv=64, d_ff=1024, num_layers=2, num_decoder_layers=2, num_heads=8,
                            decoder_start_token_id=0, **V), "seq2seq", "eager"),
    "bart": ("BartConfig", dict(d_model=512, encoder_layers=2, decoder_layers=2, encoder_attention_heads=8,
                                decoder_attention_heads=8, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
                                max_position_embeddings=512, decoder_start_token_id=2, **V), "seq2seq", "sdpa"),
    "whisper": ("WhisperConfig", dict(d_model=512, encoder_layers=2, decoder_layers=2, encoder_attention_heads=8,
                                      decoder_attention_heads=8, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
                                      num_mel_bins=80, max_source_positions=64, max_target_positions=256,
                                      decoder_start_token_id=1, **V), "speech", "sdpa"),
    "rwkv": ("RwkvConfig", dict(hidden_size=512, num_hidden_layers=2, attention_hidden_size=512,
                                intermediate_size=1024, context_length=512, **V), "causal", None),
    "recurrentgemma": ("RecurrentGemmaConfig", dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=3,
                                                    num_attention_heads=8, num_key_value_heads=1, head_dim=64,
                                                    lru_width=512, attention_window_size=64,
                                                    block_types=["recurrent", "recurrent", "attention"], **V),
                       "causal", None),
    "xlstm": ("xLSTMConfig", dict(hidden_size=512, embedding_dim=512, num_hidden_layers=2, num_blocks=2,
                                  num_heads=4, chunk_size=16, mode="inference", **V), "causal", None),
    "mamba": ("MambaConfig", dict(hidden_size=512, state_size=16, num_hidden_layers=2, expand=2, conv_kernel=4,
                                  use_mambapy=False, **V), "causal", None),
    "minimax": ("MiniMaxConfig", dict(DENSE, head_dim=64, intermediate_size=256, num_local_experts=4,
                                      num_experts_per_tok=2, block_size=16,
                                      layer_types=["linear_attention", "full_attention"]), "causal", "sdpa"),
    "lfm2": ("Lfm2Config", dict(DENSE, intermediate_size=1024, layer_types=["conv", "full_attention"],
                                full_attn_idxs=[1], conv_L_cache=3), "causal", "sdpa"),
}


def build(key, dev):
    import transformers
    cls_name, kw, loader, attn = MODELS[key]
    if key == "rwkv":   # no JIT build of the WKV kernel (decode of one token runs the torch path anyway)
        import transformers.models.rwkv.modeling_rwkv as mr
        mr.is_ninja_available = lambda: False
    cfg = getattr(transformers, cls_name)(**kw)
    auto = {"causal": transformers.AutoModelForCausalLM, "seq2seq": transformers.AutoModelForSeq2SeqLM,
            "speech": transformers.AutoModelForSpeechSeq2Seq}[loader]
    torch.manual_seed(0)
    try:
        model = auto.from_config(cfg, dtype=DT, **({"attn_implementation": attn} if attn else {}))
    except (ValueError, ImportError) as exc:   # that implementation is not supported: the default
        print(f"[{key}] attn_implementation={attn} refused ({str(exc)[:120]}); default", flush=True)
        model = auto.from_config(cfg, dtype=DT)
    return cfg, loader, model.to(dev).eval()


_CACHES = ("past_key_values", "cache_params", "state")


def decoder(model, cfg, loader, dev):
    """(reset, step, state): a prefill with the model's own cache/state, then one greedy token per step."""
    from transformers.modeling_outputs import BaseModelOutput
    params = set(inspect.signature(model.forward).parameters)
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(3, cfg.vocab_size, (1, PROMPT), generator=g).to(dev)
    st: dict = {}
    dec_len = 4

    def carry(o, kw):
        for c in _CACHES:
            v = getattr(o, c, None)
            if v is not None and c in params:
                kw[c] = v

    def reset():
        kw = {"use_cache": True}
        with torch.no_grad():
            if loader == "causal":
                if "cache_position" in params:
                    kw["cache_position"] = torch.arange(PROMPT, device=dev)
                o = model(input_ids=ids, **kw)
                pos = PROMPT
            else:
                dec = torch.randint(3, cfg.vocab_size, (1, dec_len), generator=g).to(dev)
                if loader == "speech":
                    feats = torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)
                    o = model(input_features=feats.to(dev, DT), decoder_input_ids=dec, **kw)
                else:
                    o = model(input_ids=ids, decoder_input_ids=dec, **kw)
                st["enc"] = BaseModelOutput(last_hidden_state=o.encoder_last_hidden_state)
                pos = dec_len
        st["kw"] = {}
        carry(o, st["kw"])
        st.update(tok=o.logits[:, -1:].argmax(-1), pos=pos, cache=type(next(iter(st["kw"].values()), None)).__name__)

    def step():
        kw = dict(st["kw"], use_cache=True)
        if "cache_position" in params:
            kw["cache_position"] = torch.tensor([st["pos"]], device=dev)
        with torch.no_grad():
            if loader == "causal":
                o = model(input_ids=st["tok"], **kw)
            else:
                o = model(decoder_input_ids=st["tok"], encoder_outputs=st["enc"], **kw)
            st["tok"] = o.logits[:, -1:].argmax(-1)
        carry(o, st["kw"])
        st["pos"] += 1

    return reset, step, st


def sc_more(key, dev, out, timer, steps):
    cfg, loader, model = build(key, dev)
    reset, step, st = decoder(model, cfg, loader, dev)
    reset()
    step()
    extra = {"model_type": cfg.model_type, "architecture": type(model).__name__, "config": cfg.to_dict(),
             "code_paths": code_paths(model), "prompt_len": PROMPT, "loader": loader,
             "attn_implementation": getattr(model.config, "_attn_implementation", None),
             "cache": st["cache"], "sampling": "greedy argmax per step",
             "classes": sorted({type(m).__name__ for m in model.modules()})}
    for twin, kw in (("plain", {}), ("stack", {"with_stack": True, "record_shapes": True})):
        record(out, f"hf_{key}_{twin}", step, timer, dev, steps, reset=reset, extra=extra, warm=2, **kw)
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tar", default="")
    args = ap.parse_args()
    dev = torch.device(args.device)
    timer = Timer(dev)
    only = [s for s in args.only.split(",") if s] or list(MODELS)
    status = {}
    for key in only:
        t0 = time.perf_counter()
        try:
            sc_more(key, dev, args.out, timer, args.steps)
            status[key] = f"ok {time.perf_counter() - t0:.1f}s"
        except Exception as exc:  # noqa: BLE001 - one model failing must not lose the others
            traceback.print_exc(limit=4)
            status[key] = f"FAILED {type(exc).__name__}: {str(exc)[:300]}"
        print(f"== {key}: {status[key]}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "versions_more.json"), "w") as f:
        json.dump({**versions(dev), "status": status,
                   "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f, indent=1, sort_keys=True)
    if args.tar:
        with tarfile.open(args.tar, "w") as t:
            for n in sorted(os.listdir(args.out)):
                t.add(os.path.join(args.out, n), arcname=n)
    print(json.dumps(status, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
