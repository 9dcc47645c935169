"""Load kinds beyond one prompt per request: multi-turn and agentic sessions, and trace replay.

**Sessions** (``users=``): each user runs conversations one after another, each of ``turns`` turns;
turn k is sent with every earlier turn (its prompts and the answers the server really streamed) as
its prefix, as a chat client does, so a prefix cache is hit the way a chat product hits it. An
**agentic** session (``shared_prefix_tokens`` > 0) also starts from a prefix shared by every session
(a system prompt with tool definitions) and waits ``think_ms`` between turns (the tool running).

**Trace replay** (``trace=``): arrival times and input/output lengths from a recorded trace, in the
formats guidellm replays: Mooncake JSONL (``timestamp`` in ms, ``input_length``, ``output_length``,
``hash_ids``) and WEKA (``t`` in s, ``in``, ``out``, ``hash_ids``), or any JSONL with
``timestamp``/``prompt_tokens``/``output_tokens`` (seconds). ``hash_ids`` rebuild the prompt from
blocks of ``block_size`` words, one block per hash, so two requests that shared cache blocks in the
trace share the same leading words here (the trace's prefix-cache pattern, not its text). Lengths are
in words, one token each on most tokenizers for these words (the server's ``usage`` says the truth).
"""
from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

from kit.bench._client import stream_request
from kit.bench._prompts import words
from kit.errors import BenchError

# format -> (time field, seconds per unit, input length field, output length field)
TRACE_FORMATS = {
    "mooncake": ("timestamp", 1e-3, "input_length", "output_length"),
    "weka": ("t", 1.0, "in", "out"),
    "generic": ("timestamp", 1.0, "prompt_tokens", "output_tokens"),
}


def _trace_format(rec: dict, where: str) -> str:
    for name, (t, _, i, o) in TRACE_FORMATS.items():
        if t in rec and i in rec and o in rec:
            return name
    raise BenchError(f"{where}: not a trace record (expected Mooncake timestamp/input_length/output_length, "
                     f"WEKA t/in/out or timestamp/prompt_tokens/output_tokens; keys: {', '.join(list(rec)[:8])})")


def read_trace(path: str | Path, *, fmt: str = "auto", time_scale: float = 1.0, block_size: int = 512,
               seed: int = 0) -> list[dict]:
    """The requests of a trace file: dicts with ``at`` (s after the first), ``prompt``, ``max_tokens``
    and ``input_length``, in arrival order. ``time_scale`` stretches the gaps (0.5: twice as fast)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{path}: cannot read the trace ({getattr(exc, 'strerror', None) or exc})") from None
    rows = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}: line {no}"
        try:
            rec = json.loads(line)
        except ValueError:
            raise BenchError(f"{where}: not a JSON record: {line[:60]!r}") from None
        if not isinstance(rec, dict):
            raise BenchError(f"{where}: a JSON {type(rec).__name__}, not a trace record")
        name = _trace_format(rec, where) if fmt == "auto" else fmt
        if name not in TRACE_FORMATS:
            raise BenchError(f"trace format must be auto or one of {', '.join(TRACE_FORMATS)}, not {fmt!r}")
        tk, unit, ik, ok = TRACE_FORMATS[name]
        try:
            rows.append((float(rec[tk]) * unit, int(rec[ik]), int(rec[ok]), rec.get("hash_ids") or []))
        except (KeyError, TypeError, ValueError):
            raise BenchError(f"{where}: {tk}/{ik}/{ok} missing or not numbers ({line[:80]!r})") from None
    if not rows:
        raise BenchError(f"{path}: an empty trace")
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    return [{"at": (t - t0) * time_scale, "prompt": _trace_prompt(n_in, hashes, block_size, seed, i),
             "max_tokens": max(1, n_out), "input_length": n_in} for i, (t, n_in, n_out, hashes) in enumerate(rows)]


def _trace_prompt(n: int, hashes: list, block: int, seed: int, i: int) -> str:
    """``n`` words: one block of ``block`` words per hash id (the same id, the same words), then
    words unique to this request."""
    out: list[str] = []
    for h in hashes:
        if len(out) >= n:
            break
        out += words(block, random.Random(f"{seed}:{h}"), f"h{h}").split()
    if len(out) < n:
        out += words(n - len(out), random.Random(f"{seed}:r{i}"), f"r{seed}x{i}").split()
    return " ".join(out[:max(1, n)])


def session_plan(n_sessions: int, turns: int, turn_tokens: int, shared_prefix_tokens: int, seed: int) -> list[dict]:
    """The sessions of a multi-turn level: each with its shared prefix (or none) and its user turns."""
    rng = random.Random(seed)
    prefix = words(shared_prefix_tokens, rng, f"tools{seed}") if shared_prefix_tokens > 0 else ""
    return [{"session": s, "prefix": prefix,
             "turns": [words(turn_tokens, rng, f"s{seed}u{s}t{k}") for k in range(turns)]} for s in range(n_sessions)]


def _turn_prompt(history: list[dict], chat: bool):
    return history if chat else "\n".join(m["content"] for m in history)


def run_sessions(url: str, model: str, plan: list[dict], users: int, max_tokens: list[int], chat: bool,
                 timeout: float, think_ms: float = 0.0) -> tuple[list[tuple[dict, object]], float]:
    """Run the sessions of ``plan`` by ``users`` workers, each turn after the previous one's answer,
    sent with the whole conversation so far; returns ((info, timing) per request, wall seconds)."""
    todo = list(range(len(plan)))[::-1]
    lock = threading.Lock()
    out: list[tuple[dict, object]] = []
    n_turns = len(plan[0]["turns"]) if plan else 0

    def one_session(s: dict) -> None:
        history = [{"role": "system", "content": s["prefix"]}] if s["prefix"] else []
        for k, text in enumerate(s["turns"]):
            if k and think_ms > 0:
                time.sleep(think_ms / 1e3)
            history = history + [{"role": "user", "content": text}]
            prompt = _turn_prompt(history, chat)
            mt = max_tokens[(s["session"] * n_turns + k) % len(max_tokens)]
            r = stream_request(url, model=model, prompt=prompt, max_tokens=mt, chat=chat, timeout=timeout)
            with lock:
                out.append(({"session": s["session"], "turn": k, "prompt": prompt, "max_tokens": mt}, r))
            if not r.ok:
                return  # the conversation cannot go on without its answer
            history = history + [{"role": "assistant", "content": r.text}]

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            one_session(plan[i])

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, users))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout * max(1, n_turns) * max(1, len(plan)) + 5)
    return out, time.perf_counter() - t0
