"""An OpenAI-compatible streaming server of known timing, for testing clients against the truth.

``python -m tests.live.timed_server --port P [options]`` serves ``/health``, ``/v1/models``,
``/v1/completions`` and ``/v1/chat/completions`` (streaming SSE, one token per chunk, a final
``usage`` chunk when ``stream_options.include_usage``). Each request's tokens are sent on a schedule
fixed in advance: the first ``--ttft-ms`` after the request arrived, then one every ``--itl-ms``
times a log-normal jitter factor of mean 1 (``--jitter`` is its sigma), plus ``--stall-ms`` on every
``--stall-every``-th token. ``--reasoning N`` streams the first N tokens of a chat answer as
``delta.reasoning_content`` (``--reasoning-field reasoning`` for vLLM's newer name). With
``--prefix-cache`` a prompt seen before gets a TTFT of 20 % (what a prefix cache does to a benchmark
that repeats its prompt); a prompt that starts with one seen before (in words) gets the share of it
reported as ``usage.prompt_tokens_details.cached_tokens`` and its TTFT cut in proportion. ``--slots N``
serves at most N requests at once (the rest wait: a server of known capacity); ``--head-ms`` delays
the response headers; ``--warm-requests K --warm-factor F`` makes the first K requests' TTFT F times
longer (a cold server); ``/metrics`` serves Prometheus counters and gauges of what it did.
``--cut-after N`` closes the connection after N tokens without ``[DONE]`` (on every ``--cut-every``-th request).
``--no-done`` ends each reply with a ``finish_reason`` chunk and no ``[DONE]``, ``--strict-fields`` answers HTTP 422
to ``ignore_eos`` (both as ``transformers serve`` 5.8 does).

The truth: with ``--truth FILE`` each finished request appends one JSON line with the times (seconds
after the request arrived) at which each token chunk was written and flushed, measured in this
process, plus the prompt (all of it with ``--full-prompts``), the epoch time it arrived (``t``) and
the number of reasoning tokens. Tests compare a client's figures with
those. Written for decode-kit's tests; it imitates no engine's internals.
"""
from __future__ import annotations

import argparse
import contextlib
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
    p.add_argument("--slots", type=int, default=0, help="at most this many requests served at once (0: no limit)")
    p.add_argument("--head-ms", type=float, default=0.0, help="delay before the response headers")
    p.add_argument("--warm-requests", type=int, default=0)
    p.add_argument("--warm-factor", type=float, default=1.0)
    p.add_argument("--full-prompts", action="store_true")
    p.add_argument("--cut-after", type=int, default=0, help="close the connection after N tokens, no [DONE]")
    p.add_argument("--cut-every", type=int, default=1, help="... on every M-th request only")
    p.add_argument("--no-done", action="store_true",
                   help="end with a finish_reason chunk (usage in it) and no [DONE], as transformers serve 5.8")
    p.add_argument("--strict-fields", action="store_true",
                   help="HTTP 422 for a request with ignore_eos, as transformers serve 5.8 (it validates fields)")
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


def prompt_words(body: dict, chat: bool) -> list[str]:
    """The prompt as words (this server's tokens): the prompt text or ids, or every message's content."""
    if chat:
        return " ".join(str(m.get("content") or "") for m in body.get("messages") or []).split()
    p = body.get("prompt")
    return [str(x) for x in p] if isinstance(p, list) else str(p or "").split()


def cached_share(words: list[str], seen: list[list[str]]) -> tuple[int, float]:
    """(cached words, share): the longest run of leading words shared with a prompt seen before."""
    best = 0
    for s in seen:
        n = 0
        for a, b in zip(words, s):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return best, (best / len(words) if words else 0.0)


def usage_of(args, n_prompt: int, n_out: int, hit: int, n_reason: int) -> dict:
    """The final chunk's usage: token counts, cached prompt tokens (with --prefix-cache), reasoning."""
    usage = {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}
    if args.prefix_cache:
        usage["prompt_tokens_details"] = {"cached_tokens": hit}
    if n_reason:
        usage["completion_tokens_details"] = {"reasoning_tokens": n_reason}
    return usage


def answer_text(args, chat: bool, n: int, n_reason: int) -> str:
    """The answer text streamed for ``n`` tokens (content or completion text, reasoning left out)."""
    return "".join((c.get("delta") or {}).get("content") or c.get("text") or ""
                   for c in (_choice(args, chat, i, n_reason) for i in range(n)))


def metrics_text(model: str, state: dict) -> bytes:
    """The Prometheus exposition of what the server did so far."""
    lab = f'{{model="{model}"}}'
    return ("# TYPE timed:requests_total counter\n"
            f"timed:requests_total{lab} {state['requests']}\n"
            "# TYPE timed:generation_tokens_total counter\n"
            f"timed:generation_tokens_total{lab} {state['tokens']}\n"
            "# TYPE timed:prompt_tokens_total counter\n"
            f"timed:prompt_tokens_total{lab} {state['prompt_tokens']}\n"
            "# TYPE timed:num_requests_running gauge\n"
            f"timed:num_requests_running{lab} {state['running']}\n").encode()


def ttft_of(args, rid: int, cached: bool, share: float) -> float:
    """The TTFT (s): cut by a prefix-cache hit, stretched for the first --warm-requests requests."""
    ttft = args.ttft_ms / 1e3 * (0.2 if cached else 1.0 - 0.8 * share)
    return ttft * (args.warm_factor if rid <= args.warm_requests else 1.0)


def admit(args, state: dict, lock, prompt: str, words: list[str]) -> tuple:
    """A new request's id, whether its prompt was seen (cached), the cached words and share, its seed."""
    with lock:
        state["rid"] += 1
        cached = args.prefix_cache and prompt in state["seen"]
        hit, share = cached_share(words, state["seen_words"]) if args.prefix_cache else (0, 0.0)
        state["seen"].add(prompt)
        state["seen_words"].append(words)
        return state["rid"], cached, hit, share, state["rng"].random()


def _cut(args, rid: int, n: int) -> int:
    """How many of ``n`` tokens request ``rid`` gets before its connection is closed (``--cut-after``)."""
    return min(n, args.cut_after) if args.cut_after and rid % args.cut_every == 0 else n


def _refusal(args, path: str, body: dict) -> tuple[int, dict] | None:
    """(status, body) of a request the server refuses: an unknown path, or ``ignore_eos`` (``--strict-fields``)."""
    if path not in ("/v1/completions", "/v1/chat/completions"):
        return 404, {"error": path}
    if args.strict_fields and "ignore_eos" in body:
        return 422, {"detail": "Unexpected fields in the request: {'ignore_eos'}"}
    return None


def _end(h, args, body: dict, chat: bool, oid: str, usage: dict) -> None:
    """A whole reply's end: ``[DONE]`` (after a usage chunk when asked for), or with ``--no-done`` a
    ``finish_reason`` chunk carrying the usage and nothing after it."""
    if args.no_done:
        last = {"index": 0, "finish_reason": "length", **({"delta": {}} if chat else {"text": ""})}
        h._sse({"id": oid, "object": "chunk", "model": args.model, "choices": [last], "usage": usage})
        return
    if (body.get("stream_options") or {}).get("include_usage"):
        h._sse({"id": oid, "object": "chunk", "model": args.model, "choices": [], "usage": usage})
    h.wfile.write(b"data: [DONE]\n\n")
    h.wfile.flush()


def make_handler(args):
    lock = threading.Lock()
    state = {"rid": 0, "seen": set(), "seen_words": [], "rng": random.Random(args.seed), "running": 0,
             "requests": 0, "tokens": 0, "prompt_tokens": 0}
    slots = threading.Semaphore(args.slots) if args.slots > 0 else None

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
            with lock:
                routes = {"/health": (200, "application/json", b"{}"),
                          "/metrics": (200, "text/plain; version=0.0.4", metrics_text(args.model, state)),
                          "/v1/models": (200, "application/json", json.dumps(
                              {"object": "list", "data": [{"id": args.model, "object": "model"}]}).encode())}
            missing = (404, "application/json", json.dumps({"error": self.path}).encode())
            code, kind, data = routes.get(self.path, missing)
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            t_in, t_epoch = time.perf_counter(), time.time()
            body = json.loads(self.rfile.read(n) or b"{}")
            chat = self.path.endswith("/chat/completions")
            refused = _refusal(args, self.path, body)
            if refused:
                self._json(*refused)
                return
            prompt = (json.dumps(body.get("messages")) if chat else json.dumps(body.get("prompt")))
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            words = prompt_words(body, chat)
            rid, cached, hit, share, seed = admit(args, state, lock, prompt, words)
            with slots or contextlib.nullcontext():
                arrival = t_in if slots is None else time.perf_counter()  # served from here (after any wait)
                self._serve(body, chat, prompt, words, max_tokens, rid, cached, hit, share, seed, t_epoch, arrival)

        def _serve(self, body, chat, prompt, words, max_tokens, rid, cached, hit, share, seed, t_epoch, arrival):
            with lock:
                state["running"] += 1
                state["requests"] += 1
                state["prompt_tokens"] += len(words)
            try:
                self._stream(body, chat, prompt, words, max_tokens, rid, cached, hit, share, seed, t_epoch, arrival)
            finally:
                with lock:
                    state["running"] -= 1

        def _stream(self, body, chat, prompt, words, max_tokens, rid, cached, hit, share, seed, t_epoch, arrival):
            due = schedule(args, max_tokens, random.Random(seed), ttft_of(args, rid, cached, share))
            time.sleep(args.head_ms / 1e3)
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
                    with lock:
                        state["tokens"] += 1
                if len(sent) < len(due):  # cut: the engine (or a proxy) closes mid-reply, a clean EOF
                    return
                _end(self, args, body, chat, oid, usage_of(args, len(words), max_tokens, hit, n_reason))
            except (BrokenPipeError, ConnectionResetError):
                return
            finally:
                self.close_connection = True
            if args.truth:
                line = json.dumps({"rid": rid, "sent": sent, "due": due, "reasoning": n_reason, "cached": cached,
                                   "prompt": prompt if args.full_prompts else prompt[:200], "chat": chat,
                                   "t": t_epoch, "prompt_tokens": len(words), "max_tokens": max_tokens,
                                   "cached_tokens": hit, "text": answer_text(args, chat, max_tokens, n_reason)})
                with lock, open(args.truth, "a", encoding="utf-8") as f:
                    f.write(line + "\n")

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
