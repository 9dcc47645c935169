"""``python -m tinyserve.launch_server``: tinyserve as a small real HTTP serving engine.

Endpoints (stdlib ``http.server``, one thread per connection, one scheduler thread):

- ``GET /health``, ``GET /v1/models``, ``GET /get_server_info`` (the effective arguments, as SGLang's)
- ``POST /v1/completions``, ``POST /v1/chat/completions``: OpenAI-compatible, streaming (SSE) or not;
  ``stream_options.include_usage`` adds a final usage chunk; ``ignore_eos`` accepted (there is no EOS)
- ``POST /start_profile`` (SGLang's body: ``output_dir``, ``num_steps``, ``activities``,
  ``profile_prefix``) and ``POST /stop_profile``; trace files ``{id}-TP-0.trace.json.gz``

Log lines follow SGLang 0.5.9's format (``[YYYY-mm-dd HH:MM:SS] message``): ``Load weight begin``,
``Loading safetensors checkpoint shards: ...``, ``Load weight end``, ``Capture cuda graph begin`` /
``end``, ``The server is fired up and ready to roll!``, ``Prefill batch, ...``, ``Decode batch, ...``.

Runner: ``--device cpu`` (default unless torch sees a GPU) sleeps for known per-token times
(``runtime.TRUTH``; base ``--token-ms``); ``--device cuda`` runs a random-weight transformer of a
real model shape (``--model-shape``) with torch (``torch_runner.py``).

Test modes: ``--load-seconds`` (slow start phase), ``TINYSERVE_CRASH=load`` (die while loading
weights) or ``TINYSERVE_CRASH=after:N`` (die after N requests), ``TINYSERVE_IGNORE_SIGTERM=1``
(a server that must be killed), ``TINYSERVE_DRIFT=T0:SLOPE`` (a machine that slows down over time),
step and request records and the delays of a latency reconciliation (``records.py``:
``TINYSERVE_STEP_RECORDS=1``, ``TINYSERVE_DETOK_MS``, ``TINYSERVE_HOST_COPY_MS``, ``TINYSERVE_OVERLAP=1``,
``TINYSERVE_CLOCK_OFFSET_S``), ``--reasoning-tokens N`` (chat answers start with N ``delta.reasoning_content`` tokens, as SGLang and
vLLM stream a reasoning model's thinking; ``--reasoning-field reasoning`` for vLLM's newer name).

Original code written for decode-kit; nothing here is copied from any engine.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tinyserve import __version__, records
from tinyserve.runtime import CpuRunner, Profiler, Request, Scheduler

logger = logging.getLogger("tinyserve")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tinyserve.launch_server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--model-path", default="tinyserve/random-llama")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--model-shape", default="llama-3.2-1b")
    p.add_argument("--attention-backend", default="flashinfer")
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--enable-torch-compile", action="store_true")
    p.add_argument("--cuda-graph-bs", default="1,2,4,8")
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--disable-custom-all-reduce", action="store_true")
    p.add_argument("--max-running-requests", type=int, default=8)
    p.add_argument("--context-length", type=int, default=1024)
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--reasoning-tokens", type=int, default=0,
                   help="chat: stream the first N tokens as reasoning (as a reasoning parser does)")
    p.add_argument("--reasoning-field", default="reasoning_content", choices=["reasoning_content", "reasoning"])
    p.add_argument("--token-ms", type=float, default=float(os.environ.get("TINYSERVE_TOKEN_MS", "4")))
    p.add_argument("--prefill-ms-per-token", type=float, default=0.05)
    p.add_argument("--load-seconds", type=float, default=float(os.environ.get("TINYSERVE_LOAD_SECONDS", "0.5")))
    return p.parse_args(argv)


def resolve_flags(args) -> None:
    """The engine's own decisions over the user's flags, made on the GPUs it finds (as a real engine's
    argument handling does), logged, and applied before the server_args line is written:

    - custom all-reduce is turned off on more than two GPUs that are not all NVLink-connected
      (:func:`tinyserve.srt.utils.is_pcie_only`), so ``--disable-custom-all-reduce`` changes nothing there;
    - the ``fa3`` attention backend runs only on Hopper (:func:`tinyserve.srt.utils.is_sm90_supported`);
      elsewhere the engine falls back to ``flashinfer``.
    """
    from tinyserve.srt.utils import is_pcie_only, is_sm90_supported

    if args.tp_size > 2 and not args.disable_custom_all_reduce and is_pcie_only():
        logger.warning(f"Custom allreduce is disabled because tinyserve does not run it on more than two "
                       f"PCIe-only GPUs (tp_size={args.tp_size}); all-reduce goes through NCCL")
        args.disable_custom_all_reduce = True
    if args.attention_backend == "fa3" and not is_sm90_supported():
        logger.warning("Attention backend fa3 needs compute capability 9.x (Hopper); using flashinfer backend instead")
        args.attention_backend = "flashinfer"


def _setup_logging() -> None:
    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _crash_mode() -> tuple[str, int | None]:
    mode = os.environ.get("TINYSERVE_CRASH", "")
    if mode.startswith("after:"):
        return "after", int(mode.split(":", 1)[1])
    return mode, None


def _load(args, flags: dict):
    """The start phase: weights, KV cache, graph capture, with SGLang's log lines. Returns the runner."""
    crash, _ = _crash_mode()
    shards = 4
    logger.info("Load weight begin. avail mem=0.00 GB" if args.device == "cpu" else "Load weight begin.")
    for i in range(1, shards + 1):
        time.sleep(args.load_seconds / (shards + 1))
        logger.info(f"Loading safetensors checkpoint shards: {100 * i // shards:3d}% Completed | {i}/{shards}")
        if crash == "load" and i == 2:
            try:
                raise RuntimeError("CUDA error: out of memory (tinyserve crash mode TINYSERVE_CRASH=load)")
            except RuntimeError:
                for line in traceback.format_exc().rstrip().splitlines():
                    logger.error(line)
            logging.shutdown()
            os._exit(1)
    if args.device == "cuda":
        from tinyserve.torch_runner import TorchRunner

        runner = TorchRunner(args, flags)
    else:
        runner = CpuRunner(args.token_ms, args.prefill_ms_per_token, flags, dict(os.environ))
    logger.info(f"Load weight end. type=TinyLlama, dtype={getattr(runner, 'dtype', 'none')}, "
                f"device={args.device}, shape={args.model_shape if args.device == 'cuda' else 'sleep'}")
    logger.info(f"KV Cache is allocated. #tokens: {args.max_running_requests * args.context_length}")
    if not args.disable_cuda_graph:
        t0 = time.perf_counter()
        logger.info("Capture cuda graph begin. This can take up to several minutes.")
        if hasattr(runner, "capture"):
            runner.capture()
        else:
            logger.info(f"Capture cpu graph bs {sorted(runner.graph_bs)}")
            time.sleep(args.load_seconds / (shards + 1))
        logger.info(f"Capture cuda graph end. Time elapsed: {time.perf_counter() - t0:.2f} s.")
    return runner


def make_handler(sched: Scheduler, profiler: Profiler, model_name: str, reasoning_tokens: int = 0,
                 reasoning_field: str = "reasoning_content", info: dict | None = None):
    counter = {"rid": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = f"tinyserve/{__version__}"

        def log_message(self, fmt, *a):  # uvicorn-style access line in the server log
            pass

        def _access(self, code: int) -> None:
            phrase = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(code, "")
            logger.info(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                        f'"{self.command} {self.path} HTTP/1.1" {code} {phrase}')

        def _send(self, code: int, body, ctype: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else (json.dumps(body) if not isinstance(body, str) else body).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self._access(code)

        def _body(self) -> dict:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            return json.loads(raw) if raw.strip() else {}

        def do_GET(self):
            if self.path == "/health":
                self._send(200, b"", "text/plain")
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model_name, "object": "model",
                                                             "owned_by": "tinyserve", "root": model_name}]})
            elif self.path == "/get_server_info":  # the arguments after the engine's own decisions
                self._send(200, dict(info or {}))
            elif self.path in ("/start_profile", "/stop_profile"):
                self.do_POST()
            else:
                self._send(404, {"error": f"no route {self.path}"})

        def do_POST(self):
            try:
                body = self._body()
            except ValueError as exc:
                self._send(400, {"error": f"invalid JSON: {exc}"})
                return
            if self.path == "/start_profile":
                try:
                    profiler.request(body)
                except RuntimeError as exc:
                    self._send(400, str(exc) + "\n", "text/plain")
                    return
                self._send(200, "Start profiling.\n", "text/plain")
            elif self.path == "/stop_profile":
                try:
                    profiler.stop_request()
                except RuntimeError as exc:
                    self._send(400, str(exc) + "\n", "text/plain")
                    return
                self._send(200, "Stop profiling. This will take some time.\n", "text/plain")
            elif self.path in ("/v1/completions", "/v1/chat/completions"):
                self._generate(body, chat=self.path.endswith("chat/completions"))
            else:
                self._send(404, {"error": f"no route {self.path}"})

        def _generate(self, body: dict, chat: bool) -> None:
            arrival = records.clock()
            if chat:
                msgs = body.get("messages") or []
                prompt = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
            else:
                prompt = body.get("prompt", "")
                if isinstance(prompt, list):
                    prompt = " ".join(map(str, prompt))
            words = str(prompt).split() or ["<empty>"]
            ids = [abs(hash(w)) % 32000 for w in words]
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            with lock:
                counter["rid"] += 1
                rid = counter["rid"]
            req = sched.submit(Request(rid, ids, max(1, max_tokens)))
            oid = f"{'chatcmpl' if chat else 'cmpl'}-{rid}"
            created = int(time.time())
            obj = "chat.completion.chunk" if chat else "text_completion"
            if not body.get("stream"):
                toks = []
                while (t := req.out.get()) is not None:
                    toks.append(t)
                text = "".join(f" t{t}" for t in toks)
                choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                          if chat else {"index": 0, "text": text, "finish_reason": "length"})
                self._send(200, {"id": oid, "object": "chat.completion" if chat else "text_completion",
                                 "created": created, "model": model_name, "choices": [choice],
                                 "usage": {"prompt_tokens": len(ids), "completion_tokens": len(toks),
                                           "total_tokens": len(ids) + len(toks)}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self._access(200)
            n = 0
            got: list[float] = []
            sent: list[float] = []
            try:
                while (t := req.out.get()) is not None:
                    got.append(records.clock())
                    records.detokenize()
                    n += 1
                    reasoning = chat and n <= reasoning_tokens  # a reasoning model thinks first
                    delta = ({reasoning_field: f" r{t}"} if reasoning else {"content": f" t{t}"}) if chat else None
                    choice = ({"index": 0, "delta": delta, "finish_reason": None} if chat
                              else {"index": 0, "text": f" t{t}", "finish_reason": None})
                    sent.append(records.clock())   # the write starts: the client cannot read it earlier
                    self._sse({"id": oid, "object": obj, "created": created, "model": model_name, "choices": [choice]})
                last = ({"index": 0, "delta": {}, "finish_reason": "length"} if chat
                        else {"index": 0, "text": "", "finish_reason": "length"})
                self._sse({"id": oid, "object": obj, "created": created, "model": model_name, "choices": [last]})
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}
                    if chat and reasoning_tokens:
                        usage["completion_tokens_details"] = {"reasoning_tokens": min(n, reasoning_tokens)}
                    self._sse({"id": oid, "object": obj, "created": created, "model": model_name, "choices": [],
                               "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            records.log_request(rid=rid, id=oid, arrival=arrival, emit=req.emitted, got=got, sent=sent)
            self.close_connection = True

        def _sse(self, obj: dict) -> None:
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


def main(argv=None) -> int:
    _setup_logging()
    args = parse_args(argv)
    if args.device == "auto":
        try:
            import torch

            args.device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            args.device = "cpu"
    resolve_flags(args)
    flags = {"attention_backend": args.attention_backend, "disable_cuda_graph": args.disable_cuda_graph,
             "enable_torch_compile": args.enable_torch_compile, "cuda_graph_bs": args.cuda_graph_bs,
             "disable_custom_all_reduce": args.disable_custom_all_reduce and args.tp_size > 1}
    model_name = args.served_model_name or args.model_path
    server_args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items()))
    logger.info(f"server_args=ServerArgs({server_args})")
    logger.info(f"tinyserve {__version__} on {args.device}; pid {os.getpid()}")

    stop = threading.Event()
    serving = threading.Event()

    def on_term(signum, frame):
        if os.environ.get("TINYSERVE_IGNORE_SIGTERM") == "1":
            logger.info("Received SIGTERM; ignored (TINYSERVE_IGNORE_SIGTERM=1)")
            return
        if not serving.is_set():  # still loading: nothing to drain, leave now
            logger.info(f"Received sig {signum} during start-up; exiting")
            logging.shutdown()
            os._exit(128 + signum)
        logger.info(f"Received sig {signum}; shutting down gracefully")
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    runner = _load(args, flags)
    _, crash_after = _crash_mode()
    profiler = Profiler(runner, use_torch=args.device == "cuda")
    sched = Scheduler(runner, max_running=args.max_running_requests,
                      max_total_tokens=args.max_running_requests * args.context_length,
                      decode_log_interval=args.decode_log_interval, profiler=profiler, crash_after=crash_after)
    logger.info(f"max_total_num_tokens={args.max_running_requests * args.context_length}, "
                f"max_running_requests={args.max_running_requests}, context_len={args.context_length}")
    sched.start()
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(sched, profiler, model_name, args.reasoning_tokens,
                                                                     args.reasoning_field,
                                                                     dict(vars(args), version=__version__)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, name="http", daemon=True).start()
    logger.info(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    logger.info("The server is fired up and ready to roll!")
    serving.set()
    while not stop.wait(0.2):
        pass
    sched.stopped.set()
    httpd.shutdown()
    logger.info("Server stopped.")
    logging.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
