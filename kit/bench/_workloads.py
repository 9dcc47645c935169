"""What the load kinds beyond one prompt per request send (``_run.py`` runs them): sessions and trace replay.

**Sessions** (``users=``): each user runs conversations one after another, each of ``turns`` turns;
turn k is sent with every earlier turn (its prompts and the answers the server really streamed) as
its prefix, as a chat client does, so a prefix cache is hit the way a chat product hits it. An
**agentic** session (``shared_prefix_tokens`` > 0) also starts from a prefix shared by every session
(a system prompt with tool definitions) and waits ``think_ms`` between turns (the tool running).

**Trace replay** (``trace=``): arrival times and input/output lengths from a recorded trace, in the
formats guidellm replays: Mooncake JSONL (``timestamp`` in ms, ``input_length``, ``output_length``,
``hash_ids``) and WEKA (``t`` in s, ``in``, ``out``, ``hash_ids``), or any JSONL with
``timestamp``/``prompt_tokens``/``output_tokens`` (seconds). ``hash_ids`` rebuild the prompt from
blocks of words, one block per hash (512 words for Mooncake, as its paper; 64 for WEKA, as guidellm),
so two requests that shared cache blocks in the trace share the same leading words here (the trace's
prefix-cache pattern, not its text). A WEKA line may hold a whole conversation (``id`` and a list of
requests); conversations start together and their hash ids are their own. WEKA's ``t`` is read as
seconds. Lengths are in words, about one token each for these words (the server's ``usage`` says).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from kit.bench._prompts import words
from kit.errors import BenchError

# format -> (time field, seconds per unit, input length field, output length field, words per hash id)
TRACE_FORMATS = {
    "mooncake": ("timestamp", 1e-3, "input_length", "output_length", 512),
    "weka": ("t", 1.0, "in", "out", 64),
    "generic": ("timestamp", 1.0, "prompt_tokens", "output_tokens", 512),
}


def _trace_format(rec: dict, where: str) -> str:
    for name, (t, _, i, o, _b) in TRACE_FORMATS.items():
        if t in rec and i in rec and o in rec:
            return name
    raise BenchError(f"{where}: not a trace record (expected Mooncake timestamp/input_length/output_length, "
                     f"WEKA t/in/out or timestamp/prompt_tokens/output_tokens; keys: {', '.join(list(rec)[:8])})")


def _records(path: Path) -> list[tuple[str, dict, str | None]]:
    """(where, record, conversation id) of every request of a JSONL trace; a line that holds a
    conversation (``id`` and a list of request records, as WEKA files do) gives one per request."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{path}: cannot read the trace ({getattr(exc, 'strerror', None) or exc})") from None
    out = []
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
        inner = next((v for v in rec.values() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)),
                     None)
        if inner is not None and not any(k in rec for k in ("t", "timestamp")):
            conv = str(rec.get("id", f"line {no}"))
            out += [(f"{where}: request {i + 1}", r, conv) for i, r in enumerate(inner)]
        else:
            out.append((where, rec, str(rec["id"]) if "id" in rec and "t" in rec else None))
    return out


def read_trace(path: str | Path, *, fmt: str = "auto", time_scale: float = 1.0, seed: int = 0) -> list[dict]:
    """The requests of a trace file: dicts with ``at`` (s after the start), ``prompt``, ``max_tokens``
    and ``input_length``, in arrival order. ``time_scale`` stretches the gaps (0.5: twice as fast).
    A WEKA file's conversations (by ``id``) each start at 0 (times are relative to the
    conversation's first request, as guidellm replays them) and their hash ids are their own."""
    path = Path(path)
    rows = []
    for where, rec, conv in _records(path):
        name = _trace_format(rec, where) if fmt == "auto" else fmt
        if name not in TRACE_FORMATS:
            raise BenchError(f"trace format must be auto or one of {', '.join(TRACE_FORMATS)}, not {fmt!r}")
        tk, unit, ik, ok, block = TRACE_FORMATS[name]
        try:
            rows.append([float(rec[tk]) * unit, int(rec[ik]), int(rec[ok]), rec.get("hash_ids") or [], conv, block])
        except (KeyError, TypeError, ValueError):
            raise BenchError(f"{where}: {tk}/{ik}/{ok} missing or not numbers ({json.dumps(rec)[:80]})") from None
    if not rows:
        raise BenchError(f"{path}: an empty trace")
    start: dict = {}
    for r in rows:
        start[r[4]] = min(start.get(r[4], r[0]), r[0])
    for r in rows:
        r[0] -= start[r[4]]
    rows.sort(key=lambda r: r[0])
    return [{"at": t * time_scale, "prompt": _trace_prompt(n_in, [f"{conv}:{h}" if conv else h for h in hashes],
                                                         block, seed, i),
             "max_tokens": max(1, n_out), "input_length": n_in, **({"conversation": conv} if conv else {})}
            for i, (t, n_in, n_out, hashes, conv, block) in enumerate(rows)]


def _trace_prompt(n: int, hashes: list, block: int, seed: int, i: int) -> str:
    """``n`` words: one block of ``block`` words per hash id (the same id, the same words), then
    words unique to this request."""
    out: list[str] = []
    for h in hashes:
        if len(out) >= n:
            break
        out += words(block, random.Random(f"{seed}:{h}"), f"h{h}".replace(" ", "_")).split()
    if len(out) < n:
        out += words(n - len(out), random.Random(f"{seed}:r{i}"), f"r{seed}x{i}").split()
    return " ".join(out[:max(1, n)])


def session_plan(n_sessions: int, turns: int, turn_tokens: int, shared_prefix_tokens: int, seed: int) -> list[dict]:
    """The sessions of a multi-turn level: each with its shared prefix (or none) and its user turns."""
    rng = random.Random(seed)
    prefix = words(shared_prefix_tokens, rng, f"tools{seed}") if shared_prefix_tokens > 0 else ""
    return [{"session": s, "prefix": prefix,
             "turns": [words(turn_tokens, rng, f"s{seed}u{s}t{k}") for k in range(turns)]} for s in range(n_sessions)]
