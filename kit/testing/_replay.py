"""Replaying a real trace: many steps, many ranks with jitter, planted slow kernels (``replay_trace``), for tests
and benchmarks that need a trace bigger or stranger than the ones recorded."""
from __future__ import annotations

import bisect
import gzip
import json
import random
from pathlib import Path

import orjson

_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
_ID_KEYS = ("correlation", "External id", "Record function id")


def _step_of(events: list[dict], prefix: str) -> tuple[list[tuple[float, float]], dict[int, int]]:
    """The step windows (CPU annotations named ``prefix<N>``) and, per event index, its step."""
    marks = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith(prefix)), key=lambda e: (e["ts"], e["ts"] + e.get("dur", 0)))
    if not marks:
        raise ValueError(f"no step annotations named {prefix}N in the trace")
    wins = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in marks]
    named = {e["name"]: i for i, e in enumerate(marks)}
    starts = [w[0] for w in wins]

    def window(ts):
        i = bisect.bisect_right(starts, ts) - 1
        return i if i >= 0 and ts <= wins[i][1] else None

    by_corr, step = {}, {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            s = window(e["ts"])
            if s is not None:
                by_corr[e.get("args", {}).get("correlation")] = s
    for i, e in enumerate(events):
        cat = e.get("cat")
        if cat == "gpu_user_annotation":
            s = named.get(e.get("name"))
        elif cat in _GPU_CATS:
            s = by_corr.get(e.get("args", {}).get("correlation"))
        elif cat == "ac2g":
            s = by_corr.get(e.get("id"))
        elif e.get("ph") == "M":
            continue
        else:
            s = window(e.get("ts", -1.0))
        if s is not None:
            step[i] = s
    return wins, step


def _slowed(slow: dict, name: str, seen: dict) -> float | None:
    """The factor of the first ``slow`` key matching ``name``: ``"text"`` matches every kernel whose name
    contains it, ``"text#N"`` only the N-th (from 0) such kernel of each step (one layer of a model)."""
    for key, fac in slow.items():
        text, _, nth = key.partition("#")
        if text in name:
            i = seen[key] = seen.get(key, -1) + 1
            if not nth or i == int(nth):
                return fac
    return None


def _id_stride(events: list[dict]) -> int:
    """One more than the largest id in the trace: step k's ids are shifted by k times it."""
    ids = [int(e["args"][k]) for e in events if isinstance(e.get("args"), dict) for k in _ID_KEYS
           if isinstance(e["args"].get(k), (int, float))]
    ids += [int(e["id"]) for e in events if e.get("cat") == "ac2g" and isinstance(e.get("id"), (int, float))]
    return 1 + max(ids, default=0)


def _place_step(events: list[dict], k: int, base: float, t0: float, f: float, stride: int, slow: dict,
                prefix: str) -> float:
    """Copy ``events`` (one source step, changed in place) to output step ``k`` at ``base``, stretched by ``f``;
    returns the GPU time the ``slow`` kernels added."""
    extra, seen = 0.0, {}
    for e in sorted(events, key=lambda e: (e.get("cat") not in _GPU_CATS, e.get("ts", 0))):
        e["ts"] = base + (e["ts"] - t0) * f
        if "dur" in e:
            e["dur"] = e["dur"] * f
        a = e.get("args", {})
        for key in _ID_KEYS:
            if isinstance(a.get(key), int) and a[key] >= 0:
                a[key] += k * stride
        if e.get("cat") == "ac2g" and isinstance(e.get("id"), int):
            e["id"] += k * stride
        if e.get("cat") in _GPU_CATS:
            e["ts"] += extra
            more = _slowed(slow, str(e.get("name", "")), seen) if e.get("cat") == "kernel" else None
            if more is not None:
                add = e["dur"] * (more - 1.0)
                e["dur"] += add
                extra += add
        if e.get("cat") in ("user_annotation", "gpu_user_annotation") and str(e.get("name", "")).startswith(prefix):
            e["name"] = f"{prefix}{k}"
    for e in events:   # the step's GPU window ends where its (later) last kernel now ends
        if e.get("cat") == "gpu_user_annotation":
            e["dur"] += extra
    return extra


def replay_trace(src, dest, *, steps: int | None = None, jitter: float = 0.0, slow: dict | None = None,
                 seed: int = 0, rank: int | None = None, world_size: int | None = None,
                 step_prefix: str = "decode_step_") -> Path:
    """Write a Kineto trace made of a real one's steps, replayed: for test fixtures and benchmarks.

    ``src``'s steps (CPU annotations ``decode_step_N``, with the kernels their runtime calls launched)
    are laid out ``steps`` times (cycling through the real ones, the first, often a warm-up, left out when
    there are more than two; ids made unique) at the real steps' own start-to-start periods (the CPU
    running ahead of the GPU as it did), each stretched by a factor drawn from N(1, ``jitter``)
    (``seed``); kernels whose name contains a key (``"name#N"``: only the N-th such kernel of each step)
    of ``slow`` take that factor longer (a planted change), the GPU work after them in the step moving
    later. ``rank``/``world_size`` set ``distributedInfo`` (one rank of a job). Returns ``dest``
    (gzipped when it ends with ``.gz``)."""

    src, dest = Path(src), Path(dest)
    with (gzip.open(src, "rt") if src.suffix == ".gz" else open(src)) as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    wins, step = _step_of(events, step_prefix)
    n = len(wins)
    rng = random.Random(seed)
    stride = _id_stride(events)
    members: list[list[dict]] = [[] for _ in range(n)]
    for i, s in step.items():
        members[s].append(events[i])
    periods = [wins[s + 1][0] - wins[s][0] for s in range(n - 1)]
    periods.append(sorted(periods)[len(periods) // 2] if periods else wins[0][1] - wins[0][0])
    cycle = list(range(1, n)) if n > 2 else list(range(n))   # the first step often carries warm-up
    out = [e for i, e in enumerate(events) if i not in step and (e.get("ph") == "M" or e.get("ts", 0) < wins[0][0])]
    base = wins[0][0]
    for k in range(steps or n):
        j = cycle[k % len(cycle)]
        f = max(0.5, rng.gauss(1.0, jitter)) if jitter else 1.0
        copied = [dict(e, args=dict(e["args"])) if isinstance(e.get("args"), dict) else dict(e) for e in members[j]]
        extra = _place_step(copied, k, base, wins[j][0], f, stride, slow or {}, step_prefix)
        out.extend(copied)
        base += periods[j] * f + extra
    doc["traceEvents"] = out
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size or rank + 1}
    dest.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open(dest, "wb", compresslevel=1) if dest.suffix == ".gz" else open(dest, "wb")) as fh:
        fh.write(orjson.dumps(doc))
    return dest
