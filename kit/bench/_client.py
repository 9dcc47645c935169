"""One streamed request to an OpenAI-compatible server, timed per chunk (stdlib ``http.client`` only).

Timing definitions follow vLLM's ``vllm bench serve`` request functions (and SGLang's
``bench_serving``, which uses the same ones): the clock starts just before the request is sent;
**TTFT** is the arrival of the first chunk that carries a generated token of any kind: answer text
(``text``, ``delta.content``) or reasoning (``delta.reasoning_content``, SGLang and older vLLM;
``delta.reasoning``, newer vLLM) - a reasoning model's thinking tokens are generated tokens, decoded
at the same speed; each later token chunk appends the gap since the previous one to **ITL**;
**latency** (E2E) is the last token chunk's arrival. The output token count is the server's
``usage.completion_tokens`` (asked for with ``stream_options.include_usage``), else the number of
token chunks; reasoning and answer tokens are counted apart (``usage.completion_tokens_details.
reasoning_tokens`` where given, else the reasoning chunks), and ``ttft_answer`` is the first answer
chunk's arrival (what a user of a reasoning model waits for before reading the answer).
"""
from __future__ import annotations

import http.client
import json
import math
import socket
import time
import urllib.parse
from dataclasses import asdict, dataclass, field

from kit.errors import BenchError


@dataclass
class RequestTiming:
    """What one request measured. Times in seconds; ``itl`` is the list of inter-chunk gaps."""

    ok: bool
    ttft: float = float("nan")
    latency: float = float("nan")
    itl: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int | None = None
    chunks: int = 0
    error: str = ""
    start: float = 0.0  # wall-clock epoch seconds at send
    reasoning_tokens: int = 0
    answer_tokens: int = 0
    ttft_answer: float = float("nan")
    prompt_id: int | None = None  # which prompt of the benchmark's prompt set was sent
    response_id: str = ""  # the id the server gave its chunks (matches the engine's own request records)
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (prefix-cache hit), if given
    phases: dict = field(default_factory=dict)  # HTTP phases (ms): connect, send, wait (to headers), receive
    text: str = field(default="", repr=False)  # the answer text received (kept for multi-turn; not saved)

    @property
    def e2e(self) -> float:
        """End-to-end latency: send to the last token (the same as ``latency``)."""
        return self.latency

    @property
    def tpot(self) -> float:
        """Time per output token after the first: ``(latency - ttft) / (output_tokens - 1)``."""
        if self.output_tokens < 2:
            return float("nan")
        return (self.latency - self.ttft) / (self.output_tokens - 1)

    @property
    def decode_tok_s(self) -> float:
        """Decode speed of this request: ``1 / tpot`` (tokens after the first per second)."""
        t = self.tpot
        return 1.0 / t if t and t > 0 else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("text")
        d["tpot"] = self.tpot
        d["decode_tok_s"] = self.decode_tok_s
        return d


def split_url(url: str) -> tuple[str, int, str, bool]:
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise BenchError(f"{url}: not an http(s) URL")
    return u.hostname, u.port or (443 if u.scheme == "https" else 80), u.path.rstrip("/"), u.scheme == "https"


def _conn(url: str, timeout: float):
    host, port, base, tls = split_url(url)
    cls = http.client.HTTPSConnection if tls else http.client.HTTPConnection
    return cls(host, port, timeout=timeout), base


def get(url: str, path: str, timeout: float = 10.0) -> bytes:
    """The body of GET ``url + path``; BenchError naming the URL on any failure or a status other than 200."""
    conn, base = _conn(url, timeout)
    try:
        conn.request("GET", base + path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise BenchError(f"{url}{path}: HTTP {resp.status}: {body[:200]!r}")
        return body
    except (OSError, http.client.HTTPException) as exc:
        raise BenchError(f"{url}{path}: {type(exc).__name__}: {exc}") from None
    finally:
        conn.close()


def get_json(url: str, path: str, timeout: float = 10.0) -> dict:
    """GET ``url + path`` and decode JSON; BenchError naming the URL on any failure."""
    body = get(url, path, timeout)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise BenchError(f"{url}{path}: {type(exc).__name__}: {exc}") from None


def list_models(url: str, timeout: float = 10.0) -> list[str]:
    """The model ids the server lists at ``/v1/models``."""
    data = get_json(url, "/v1/models", timeout)
    try:
        return [m["id"] for m in data["data"]]
    except (KeyError, TypeError):
        raise BenchError(f"{url}/v1/models: not an OpenAI model list ({str(data)[:120]})") from None


def _chunk_tokens(obj: dict, chat: bool) -> tuple[str, str]:
    reason = answer = ""
    for ch in obj.get("choices") or []:
        if chat:
            d = ch.get("delta") or {}
            answer += d.get("content") or ""
            reason += d.get("reasoning_content") or d.get("reasoning") or ""
        else:
            answer += ch.get("text") or ""
    return reason, answer


class IncompleteStream(Exception):
    """The stream ended or broke before ``data: [DONE]`` (or a last chunk with a ``finish_reason``): the
    server, a proxy or an SSH forward closed the connection mid-reply. Such a request is failed, never a
    short success (engines that end a reply by closing the connection give no other sign)."""


def _sse_data(resp):
    """The ``data:`` payloads of a server-sent event stream, up to ``[DONE]`` (IncompleteStream before it)."""
    last = b""
    while True:
        try:
            line = resp.readline()
        except socket.timeout:
            raise
        except (OSError, http.client.HTTPException) as exc:
            raise IncompleteStream(f"the connection broke before data: [DONE] ({type(exc).__name__}: {exc}; "
                                   f"a kit forward resets its connections when its SSH connection is lost: "
                                   f"see its log)") from None
        if not line:
            if _finished(last):   # transformers serve ends its stream after the finish_reason chunk, no [DONE]
                return
            raise IncompleteStream("the stream ended without data: [DONE] (connection closed mid-reply)")
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        body = line[5:].strip()
        if body == b"[DONE]":
            return
        last = body
        yield body


def _finished(body: bytes) -> bool:
    """Whether an SSE payload is a chunk whose choices all carry a ``finish_reason``."""
    try:
        choices = json.loads(body).get("choices")
    except (ValueError, AttributeError):
        return False
    return bool(choices) and isinstance(choices, list) and all(
        isinstance(c, dict) and c.get("finish_reason") for c in choices)


def _payload(model: str, prompt, max_tokens: int, chat: bool, extra: dict | None) -> bytes:
    payload = {"model": model, "max_tokens": max_tokens, "stream": True, "temperature": 0.0,
               "ignore_eos": True, "stream_options": {"include_usage": True}}
    if chat:  # a prompt that is a list of messages (a multi-turn session) is sent as it is
        is_msgs = isinstance(prompt, list) and prompt and isinstance(prompt[0], dict)
        payload["messages"] = prompt if is_msgs else [{"role": "user", "content": prompt}]
    else:
        payload["prompt"] = prompt
    payload.update(extra or {})
    return json.dumps({k: v for k, v in payload.items() if v is not None}).encode()   # extra's None: not sent


# servers that refused ``ignore_eos`` (HTTP 400/422 naming it: transformers serve validates its fields) -> sent
# without it from then on; outputs that stop at EOS are then short, which the run's validity check reports
_NO_IGNORE_EOS: set[str] = set()


def _count_tokens(out: RequestTiming, usage: dict | None, reason_chunks: int) -> None:
    """Token counts: the server's usage where it gave one, else the chunks counted."""
    out.output_tokens = int(usage.get("completion_tokens", out.chunks)) if usage else out.chunks
    out.prompt_tokens = usage.get("prompt_tokens") if usage else None
    details = (usage or {}).get("completion_tokens_details") or {}
    if details.get("reasoning_tokens") is not None:
        out.reasoning_tokens = int(details["reasoning_tokens"])
    elif reason_chunks:  # one chunk per token unless the server batches: scale to the usage count
        out.reasoning_tokens = round(out.output_tokens * reason_chunks / max(1, out.chunks))
    out.answer_tokens = out.output_tokens - out.reasoning_tokens
    cached = ((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    out.cached_tokens = int(cached) if cached is not None else None


def _send(conn, path: str, data: bytes, t0: float) -> list[float]:
    """Connect, then send the request; the clock marks [start, connected, sent]."""
    conn.connect()
    marks = [t0, time.perf_counter()]
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json",
                                                   "Accept": "text/event-stream"})
    marks.append(time.perf_counter())
    return marks


# HTTP phases as aiperf exports them, between the marks [start, connected, sent, headers, end]: wait is sent
# to the response headers, receive the headers to the stream's end
PHASES = ("connect_ms", "send_ms", "wait_ms", "receive_ms")


def stream_request(url: str, *, model: str, prompt, max_tokens: int, chat: bool = False,
                   timeout: float = 120.0, extra: dict | None = None) -> RequestTiming:
    """Send one streaming completion and time its chunks. Failures come back as ``ok=False``.

    ``prompt``: text, or (completions only) a list of token ids."""
    if url in _NO_IGNORE_EOS:
        extra = {"ignore_eos": None, **(extra or {})}
    out = _stream(url, _payload(model, prompt, max_tokens, chat, extra), chat, timeout)
    if (not out.ok and out.error.startswith(("HTTP 400", "HTTP 422")) and "ignore_eos" in out.error
            and url not in _NO_IGNORE_EOS):
        _NO_IGNORE_EOS.add(url)
        return stream_request(url, model=model, prompt=prompt, max_tokens=max_tokens, chat=chat, timeout=timeout,
                              extra=extra)
    return out


def _stream(url: str, data: bytes, chat: bool, timeout: float) -> RequestTiming:
    path = "/v1/chat/completions" if chat else "/v1/completions"
    conn, base = _conn(url, timeout)
    wall = time.time()
    t0 = time.perf_counter()
    out = RequestTiming(ok=False, start=wall)
    last = None
    reason_chunks = answer_chunks = 0
    parts: list[str] = []
    try:
        marks = _send(conn, base + path, data, t0)
        resp = conn.getresponse()
        marks.append(time.perf_counter())
        if resp.status != 200:
            out.error = f"HTTP {resp.status}: {resp.read(300)!r}"
            return out
        usage = None
        for body in _sse_data(resp):
            now = time.perf_counter()
            try:
                obj = json.loads(body)
            except ValueError:
                out.error = f"undecodable chunk {body[:80]!r}"
                return out
            if obj.get("usage"):
                usage = obj["usage"]
            if not out.response_id and isinstance(obj.get("id"), str):
                out.response_id = obj["id"][:200]
            reason, answer = _chunk_tokens(obj, chat)
            if reason or answer:
                if last is None:
                    out.ttft = now - t0
                else:
                    out.itl.append(now - last)
                last = now
                out.chunks += 1
                parts.append(answer)
                if answer:
                    answer_chunks += 1
                    if math.isnan(out.ttft_answer):
                        out.ttft_answer = now - t0
                elif reason:
                    reason_chunks += 1
        if last is None:
            out.error = "no token chunk received (neither text nor reasoning)"
            return out
        out.latency = last - t0
        out.text = "".join(parts)
        marks.append(time.perf_counter())
        out.phases = {k: (b - a) * 1e3 for k, a, b in zip(PHASES, marks, marks[1:])}
        _count_tokens(out, usage, reason_chunks)
        out.ok = True
        return out
    except IncompleteStream as exc:
        out.error = f"IncompleteStream: {exc}; {out.chunks} token chunks had arrived"
        return out
    except (OSError, socket.timeout, http.client.HTTPException) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    finally:
        conn.close()
