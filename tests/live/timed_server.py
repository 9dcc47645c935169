"""An OpenAI-compatible streaming server of known timing, for testing clients against the truth.

``python -m tests.live.timed_server --port P [options]`` serves ``/health``, ``/v1/models``,
``/v1/completions`` and ``/v1/chat/completions`` (streaming SSE, one token per chunk, a final
``usage`` chunk when ``stream_options.include_usage``). Each request's tokens are sent on a schedule
fixed in advance: the first ``--ttft-ms`` after the request arrived, then one every ``--itl-ms``
times a log-normal jitter factor of mean 1 (``--jitter`` is its sigma), plus ``--stall-ms`` on every
``--stall-every``-th token. ``--reasoning N`` streams the first N tokens of a chat answer as
``delta.reasoning_content`` (``--reasoning-field reasoning`` for vLLM's newer name). With
``--prefix-cache`` a prompt seen before gets a TTFT of 20 % (what a prefix cache does to a benchmark
that repeats its prompt). ``--cut-after N`` closes the connection after N tokens without ``[DONE]``
(on every ``--cut-every``-th request).

The truth: with ``--truth FILE`` each finished request appends one JSON line with the times (seconds
after the request arrived) at which each token chunk was written and flushed, measured in this
process, plus the prompt and the number of reasoning tokens. Tests compare a client's figures with
those. Written for decode-kit's tests; it imitates no engine's internals.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="timed_server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", default="timed-model")
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--jitter", type=float, default=0.0, help="sigma of the log-normal ITL factor (mean 1)")
    p.add_argument("--stall-every", type=int, default=0)
    p.add_argument("--stall-ms", type=float, default=0.0)
    p.add_argument("--reasoning", type=int, default=0)
    p.add_argument("--reasoning-field", default="reasoning_content")
    p.add_argument("--prefix-cache", action="store_true")
    p.add_argument("--cut-after", type=int, default=0, help="close the connection after N tokens, no [DONE]")
    p.add_argument("--cut-every", type=int, default=1, help="... on every M-th request only")
    p.add_argument("--truth", default="")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def schedule(args, n: int, rng: random.Random, ttft_s: float) -> list[float]:
    """Seconds after arrival at which each of ``n`` tokens is due."""
    out, t = [], ttft_s
    sigma = args.jitter
    for i in range(n):
        if i:
            f = math.exp(rng.gauss(0.0, sigma) - sigma * sigma / 2.0) if sigma > 0 else 1.0
            t += args.itl_ms / 1e3 * f
            if args.stall_every and i % args.stall_every == 0:
                t += args.stall_ms / 1e3
        out.append(t)
    return out


def _choice(args, chat: bool, i: int, n_reason: int) -> dict:
    """Token ``i``'s streamed choice: a chat delta (reasoning first, then content) or a completion text."""
    if chat:
        delta = {args.reasoning_field: f" r{i}"} if i < n_reason else {"content": f" a{i}"}
        if i == 0:
            delta["role"] = "assistant"
        return {"index": 0, "delta": delta, "finish_reason": None}
    return {"index": 0, "text": f" t{i}", "finish_reason": None}


def _cut(args, rid: int, n: int) -> int:
    """How many of ``n`` tokens request ``rid`` gets before its connection is closed (``--cut-after``)."""
    return min(n, args.cut_after) if args.cut_after and rid % args.cut_every == 0 else n


def _tail(args, body: dict, oid: str, prompt: str, max_tokens: int, n_reason: int) -> bytes:
    """What ends a stream: the usage chunk when the request asked for one, then ``data: [DONE]``."""
    if not (body.get("stream_options") or {}).get("include_usage"):
        return b"data: [DONE]\n\n"
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": max_tokens,
             "total_tokens": len(prompt.split()) + max_tokens}
    if n_reason:
        usage["completion_tokens_details"] = {"reasoning_tokens": n_reason}
    chunk = {"id": oid, "object": "chunk", "model": args.model, "choices": [], "usage": usage}
    return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


def make_handler(args):
    lock = threading.Lock()
    state = {"rid": 0, "seen": set(), "rng": random.Random(args.seed)}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # each token chunk leaves at once

        def log_message(self, fmt, *a):
            pass

        def _json(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._json(200, {})
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": args.model, "object": "model"}]})
            else:
                self._json(404, {"error": self.path})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            arrival = time.perf_counter()
            body = json.loads(self.rfile.read(n) or b"{}")
            chat = self.path.endswith("/chat/completions")
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._json(404, {"error": self.path})
                return
            prompt = (json.dumps(body.get("messages")) if chat else json.dumps(body.get("prompt")))
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            with lock:
                state["rid"] += 1
                rid = state["rid"]
                cached = args.prefix_cache and prompt in state["seen"]
                state["seen"].add(prompt)
                seed = state["rng"].random()
            ttft = args.ttft_ms / 1e3 * (0.2 if cached else 1.0)
            due = schedule(args, max_tokens, random.Random(seed), ttft)
            n_reason = min(args.reasoning, max_tokens) if chat else 0
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            sent = []
            oid = f"cmpl-{rid}"
            try:
                for i, t in enumerate(due[:_cut(args, rid, len(due))]):
                    left = arrival + t - time.perf_counter()
                    if left > 0:
                        time.sleep(left)
                    choice = _choice(args, chat, i, n_reason)
                    self._sse({"id": oid, "object": "chunk", "model": args.model, "choices": [choice]})
                    sent.append(time.perf_counter() - arrival)
                if len(sent) < len(due):  # cut: the engine (or a proxy) closes mid-reply, a clean EOF
                    return
                self._end(body, oid, prompt, max_tokens, n_reason)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            finally:
                self.close_connection = True
            if args.truth:
                line = json.dumps({"rid": rid, "sent": sent, "due": due, "reasoning": n_reason, "cached": cached,
                                   "prompt": prompt[:200], "chat": chat})
                with lock, open(args.truth, "a", encoding="utf-8") as f:
                    f.write(line + "\n")

        def _end(self, body, oid, prompt, max_tokens, n_reason):
            """The usage chunk (when asked for) and the terminator."""
            self.wfile.write(_tail(args, body, oid, prompt, max_tokens, n_reason))

        def _sse(self, obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


def main(argv=None) -> int:
    args = parse_args(argv)
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(args))
    httpd.daemon_threads = True
    print(f"timed_server listening on http://{args.host}:{args.port} "
          f"(ttft {args.ttft_ms} ms, itl {args.itl_ms} ms, jitter {args.jitter}); ready", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
