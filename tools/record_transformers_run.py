"""Record transformers' continuous batching served by ``transformers serve``, driven by the kit, with the
engine's own OpenTelemetry spans: the fixture ``kit.bench.reconcile`` reads per request.

Run from the repository root with the kit's interpreter, once the serving stack is in its cache venv
(``.kit-cache/transformers-serve``: torch, ``transformers[serving]`` 5.0 to 5.8 (the releases whose
``transformers/utils/metrics.py`` traces the continuous-batching loop), ``opentelemetry-distro`` and
``opentelemetry-exporter-otlp-proto-http``)::

    python tools/record_transformers_run.py OUT_DIR [--venv DIR] [--requests 4] [--max-tokens 12]

It builds a random-weight Llama-shaped model (the layer shape of SmolLM2-135M, 4 of its layers) and an
offline word-level tokenizer in a temporary directory (nothing from the Hub), starts the kit's OTLP receiver
(``kit.bench.otlp_receiver``), starts ``opentelemetry-instrument`` + the engine's registry launch command
(``kit.engines.engine("transformers").launch``) with continuous batching on the CPU through ``kit.server``,
benchmarks it with ``Server.load`` at concurrency 1 and 4, waits until the spans of every benchmarked
request arrived, stops the engine and writes ``OUT_DIR/client.json`` (the kit's result), ``OUT_DIR/spans.jsonl``
(the export requests the receiver stored, cut to the spans the reader reads: see :func:`trim`),
``OUT_DIR/versions.json``, ``OUT_DIR/server.json`` (the start-up phases ``kit.server`` read from the engine's log,
by the engine's registry row) and ``OUT_DIR/reconcile.txt`` (what ``kit.bench.reconcile`` made of them).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".kit-cache" / "transformers-serve"
SHAPE = dict(hidden_size=576, num_hidden_layers=4, num_attention_heads=9, num_key_value_heads=3,
             intermediate_size=1536, max_position_embeddings=2048, rope_theta=100000.0, tie_word_embeddings=True)
WORDS = 2048
# a small paged KV cache: on the CPU the default sizes the cache from memory and each forward pays for it
CB_ARGS = ("--continuous-batching", "--device", "cpu", "--cb-num-blocks", "64", "--cb-block-size", "32",
           "--cb-max-batch-tokens", "256", "--log-level", "info")
KEPT = {"generation_loop", "_generation_step", "model_forward", "record_ttft_metric", "record_request_completion"}
EVENTS = {"record_ttft_metric", "record_request_completion"}


def build_model(out: Path) -> None:
    """The random model and its tokenizer (run by the venv's interpreter: ``--build-model DIR``)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(WORDS - 3)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(out)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=WORDS, bos_token_id=1, eos_token_id=2, **SHAPE)).eval()
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=None, pad_token_id=0)  # max_tokens stops
    model.save_pretrained(out)


def versions(venv: Path) -> dict:
    code = ("import json, importlib.metadata as m; print(json.dumps({d: m.version(d) for d in ('torch', "
            "'transformers', 'opentelemetry-sdk', 'opentelemetry-exporter-otlp-proto-http', 'opentelemetry-distro')}))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-300:]}


def trim(lines: list[dict]) -> list[dict]:
    """The receiver's export requests cut to what the reader reads: the spans in :data:`KEPT` of the iterations
    that ran a step (the idle loop's 10 iterations a second dropped), each kept span's parent set to its nearest
    kept ancestor, attributes kept only on the per-request calls (the others name Python classes)."""
    spans = [(d, ss, s) for d in lines for rs in d.get("resourceSpans", []) for ss in rs.get("scopeSpans", [])
             for s in ss.get("spans", [])]
    by_id = {s["spanId"]: s for _d, _ss, s in spans}
    busy = {s["parentSpanId"] for _d, _ss, s in spans if s["name"] == "_generation_step"
            and by_id.get(s.get("parentSpanId"), {}).get("name") == "generation_loop"}

    def kept_parent(s: dict):
        p = s.get("parentSpanId")
        while p and p in by_id and by_id[p]["name"] not in KEPT:
            p = by_id[p].get("parentSpanId")
        return p if p in by_id else None

    def keep(s: dict) -> bool:
        if s["name"] == "generation_loop":
            return s["spanId"] in busy
        if s["name"] not in KEPT:
            return False
        p = s
        while (p := by_id.get(p.get("parentSpanId"))) is not None and p["name"] != "generation_loop":
            pass
        return p is not None and p["spanId"] in busy

    out = []
    for d in lines:
        for rs in d.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                ss["spans"] = [dict(s, parentSpanId=kept_parent(s) or "",
                                    attributes=s["attributes"] if s["name"] in EVENTS else [])
                               for s in ss.get("spans", []) if keep(s)]
            rs["scopeSpans"] = [ss for ss in rs.get("scopeSpans", []) if ss["spans"]]
        d["resourceSpans"] = [rs for rs in d.get("resourceSpans", []) if rs["scopeSpans"]]
        if d["resourceSpans"]:
            out.append(d)
    return out


def _spans_cover(path: Path, ids: set[str]) -> bool:
    import kit
    from kit.errors import LogFormatError

    try:
        recs = kit.logs.step_records(path, engine="transformers")
    except LogFormatError:
        return False
    return ids <= {str(i) for i in recs.requests["id"]}


def record(out: Path, venv: Path = VENV, *, requests: int = 4, max_tokens: int = 12,
           ready_timeout: float = 600.0, spans_timeout: float = 120.0):
    """The whole loop (see the module docstring); returns ``kit.bench.reconcile``'s Reconciliation."""
    import kit
    import kit.engines
    from kit.util import quote

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kit-transformers-") as tmp:
        model, hub = Path(tmp) / "model", Path(tmp) / "hub"
        hub.mkdir()
        subprocess.run([str(venv / "bin" / "python"), str(Path(__file__).resolve()), "--build-model", str(model)],
                       check=True, timeout=600, capture_output=True)
        spans = Path(tmp) / "spans.jsonl"
        launch = kit.engines.engine("transformers").launch
        cmd = " ".join(["opentelemetry-instrument", launch, quote(str(model)), *CB_ARGS])
        with kit.bench.otlp_receiver(spans) as rx:
            env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1",
                   "HF_HUB_CACHE": str(hub), "OMP_NUM_THREADS": "1", "OTEL_SERVICE_NAME": "transformers-serve",
                   "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
                   "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rx.endpoint}
            with kit.server("local", cmd, env=env, engine="transformers", port="free", session=Path(tmp) / "session",
                            name="transformers", progress=False, ready_timeout=ready_timeout) as srv:
                # /v1/models lists only the Hub cache's models, so the model is named
                res = srv.load(name="cb", model=str(model), concurrencies=[1, 4], requests=requests,
                               prompt_tokens=16, max_tokens=max_tokens, warmup=1, seed=0, timeout=300)
                ids = {str(r["response_id"]) for r in res.requests if r.get("ok") and r.get("response_id")}
                end = time.monotonic() + spans_timeout
                while not _spans_cover(spans, ids) and time.monotonic() < end:
                    time.sleep(0.2)
                phases = {"phases": srv.phases, "ready_s": srv.ready_s}
            lines = [json.loads(x) for x in spans.read_text().splitlines() if x.strip()]
        res.save(out / "client.json")
        # the model's temporary path names this machine: the fixture says "MODEL_DIR" instead
        (out / "client.json").write_text((out / "client.json").read_text().replace(str(model), "MODEL_DIR"))
        (out / "spans.jsonl").write_text("".join(json.dumps(d, separators=(",", ":")) + "\n" for d in trim(lines)))
    (out / "versions.json").write_text(json.dumps(versions(venv), indent=1) + "\n")
    (out / "server.json").write_text(json.dumps(phases, indent=1) + "\n")   # the start-up phases kit.server saw
    rec = kit.bench.reconcile(out / "client.json", out / "spans.jsonl")
    (out / "reconcile.txt").write_text(f"{rec!r}\n{rec.table.to_string() if rec.table is not None else ''}\n"
                                       + "\n".join(rec.warnings) + "\n")
    return rec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--build-model", action="store_true", help="(internal) build the model in OUT with this Python")
    p.add_argument("--venv", type=Path, default=VENV)
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=12)
    a = p.parse_args()
    if a.build_model:
        build_model(a.out)
        return 0
    rec = record(a.out, a.venv, requests=a.requests, max_tokens=a.max_tokens)
    print((a.out / "reconcile.txt").read_text())
    return 1 if rec.refused else 0


if __name__ == "__main__":
    sys.exit(main())
