"""Kernel -> CPU op links read from a Kineto trace in a separate pass (op names, input shapes, modules).

The main reader (``_kineto.py``) drops ``cpu_op`` and ``python_function`` events for speed. The
comparison's by-op / by-module view and the GEMM roofline need, for each kernel, the aten op that
launched it and that op's ``Input Dims`` / ``Input type`` (``record_shapes=True``). This pass parses
the file once more (orjson, whole file: memory grows with the trace; meant for the decode windows
the kit records, tens of MB at most), finds each launch (runtime event with a ``correlation`` id) and
the CPU ops and ``nn.Module`` frames enclosing it on the same thread, and returns one row per
correlation id: ``op`` (innermost enclosing cpu_op), ``op_top`` (outermost), ``input_dims``,
``input_types`` (of the innermost op that has shapes), ``module`` (innermost ``nn.Module:`` frame),
``call`` (thread@start of that shaped op: the kernels of one op call, e.g. a split-K GEMM and its
reduction, share it).
Kernels launched by a CUDA-graph replay share the graph launch's correlation id and get the op of
that launch (``cudaGraphLaunch`` inside no aten op: empty), so the by-op view needs eager traces.
"""
from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd

from kit.errors import TraceError
from kit.profile._io import read_bytes, sniff

RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "Driver"}
COLUMNS = ["correlation", "launch", "op", "op_top", "input_dims", "input_types", "module", "call"]


def op_links(path: str | Path) -> pd.DataFrame:
    """One row per launch correlation id of ``path`` (see module docstring); empty if no CPU ops."""
    p = Path(path)
    kind = sniff(p)
    if kind not in ("json", "gzip"):
        return pd.DataFrame(columns=COLUMNS)
    data, _ = read_bytes(p, kind)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"{p}: not valid JSON for the op-link pass ({exc})", path=str(p)) from None
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    threads: dict[tuple, list] = {}
    for e in events:
        if type(e) is not dict or e.get("ph") != "X" or "ts" not in e:
            continue
        cat = e.get("cat")
        key = (str(e.get("pid")), str(e.get("tid")))
        ts = float(e["ts"])
        dur = float(e.get("dur") or 0.0)
        if cat == "cpu_op":
            a = e.get("args") or {}
            threads.setdefault(key, []).append((ts, 0, -dur, "op", e.get("name", ""), a.get("Input Dims"),
                                                a.get("Input type")))
        elif cat == "python_function" and str(e.get("name", "")).startswith("nn.Module: "):
            threads.setdefault(key, []).append((ts, 0, -dur, "mod", e["name"][11:], None, None))
        elif cat in RUNTIME_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                threads.setdefault(key, []).append((ts, 1, -dur, "launch", e.get("name", ""), int(corr), None))
    rows = []
    for key, evs in threads.items():
        evs.sort(key=lambda x: (x[0], x[1], x[2]))
        ops: list = []    # (end, name, dims, types)
        mods: list = []   # (end, name)
        for ts, _, negdur, typ, name, x, y in evs:
            while ops and ops[-1][0] < ts:
                ops.pop()
            while mods and mods[-1][0] < ts:
                mods.pop()
            if typ == "op":
                ops.append((ts - negdur, name, x, y, f"{key[1]}@{ts}"))
            elif typ == "mod":
                mods.append((ts - negdur, name))
            else:
                shaped = next((o for o in reversed(ops) if o[2]), None)
                rows.append((x, name, ops[-1][1] if ops else None, ops[0][1] if ops else None,
                             shaped[2] if shaped else None, shaped[3] if shaped else None,
                             mods[-1][1] if mods else None, shaped[4] if shaped else None))
    return pd.DataFrame(rows, columns=COLUMNS).drop_duplicates("correlation")
