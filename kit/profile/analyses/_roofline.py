"""Per-kernel achieved bandwidth and FLOP/s of GEMMs whose trace recorded shapes (``record_shapes=True``).

Each GEMM kernel carries (from the reader, through ``_attribution.py``) the innermost aten op with
``Input Dims`` that launched it (``op_call``, ``input_dims``, ``input_types`` of ``Profile.kernels``):
``aten::mm`` ``[[M, K], [K, N]]``, ``aten::addmm`` ``[[bias], [M, K], [K, N]]``, ``aten::bmm``
``[[B, M, K], [B, K, N]]``, ``aten::linear`` ``[[..., K], [N, K], ...]``. Then ``FLOPs = 2 B M N K``
and the bytes that must move are ``B (M K + K N + M N) x element size``; dividing by the kernel's
duration gives the achieved TB/s and TFLOP/s, set against the GPU's peaks (``kit.models.gpu_spec``).
A decode GEMM (M = batch) is memory-bound: its bandwidth share is the figure that says how far it runs
from the roofline.
A GEMM split into several kernels (split-K reduce) has its bytes and FLOPs on the first and the
time of all of them: rows are grouped per launching op call (the kernels under one op call).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from kit.errors import TraceError
from kit.models import gpu_spec
from kit.profile._profile import Profile
from kit.profile.analyses._summary import dtype_bytes
from kit.profile.attribution._categories import GEMM, MOE

__all__ = ["roofline"]


def _mnk(op: str, dims: list, types: list) -> tuple[int, int, int, int, int] | None:
    """(B, M, N, K, element bytes) of a GEMM op call, or None if the dims do not fit."""
    try:
        d = [list(x) for x in dims]
        elt = dtype_bytes((types or [None])[0], 2)
        if op == "aten::addmm":
            d = d[1:]
            elt = dtype_bytes(types[1], elt)
        if op in ("aten::mm", "aten::addmm", "aten::_scaled_mm"):
            (m, k), (k2, n) = d[0], d[1]
            return (1, m, n, k, elt) if k == k2 else None
        if op == "aten::bmm":
            (b, m, k), (_, k2, n) = d[0], d[1]
            return (b, m, n, k, elt) if k == k2 else None
        if op in ("aten::linear", "aten::matmul"):   # x [..., K] times a weight [N, K] / a matrix [K, N]
            x, w = d[0], d[1]
            n, k = (w[0], w[1]) if op == "aten::linear" else (w[-1], w[-2])
            return (1, int(np.prod(x[:-1])) if len(x) > 1 else 1, n, k, elt) if x[-1] == k else None
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _json(text):
    """The JSON text of an op's input dims/types (as the reader keeps them) -> list, or None."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def roofline(profile, gpu=None, *, phase: str = "all") -> pd.DataFrame:
    """One row per GEMM op call with recorded shapes: op, B/M/N/K, kernels, dur_us, GFLOP, MB,
    achieved TB/s and TFLOP/s, their shares of the GPU's peaks, arithmetic intensity, bound.

    ``profile``: a :class:`kit.profile.Profile` (or trace path). ``gpu``: a GPU key/name/spec for
    :func:`kit.models.gpu_spec`; None takes the trace's ``deviceProperties`` name. Empty when the
    trace has no shapes (warns through the ``attrs['warnings']`` of the result).
    """
    p = Profile.of(profile)
    if gpu is None:
        names = [d.get("name") for m in p.meta.get("ranks", {}).values() for d in (m.get("device_properties") or [])
                 if isinstance(d, dict) and d.get("name")]
        if not names:
            raise TraceError("roofline: the trace names no GPU (deviceProperties); give gpu=")
        gpu = names[0]
    spec = gpu_spec(gpu)
    k = p.kernels
    if phase != "all":
        k = k[k["phase"] == phase]
    k = k[k["category"].astype(str).isin([GEMM, MOE])]
    cols = ["rank", "op", "B", "M", "N", "K", "dtype_bytes", "kernels", "kernel", "dur_us", "gflop", "mbytes",
            "tb_s", "tflop_s", "bw_share", "flop_share", "intensity", "bound"]
    warnings = []
    rows = []
    for f, kf in k.groupby("file", observed=True):
        kf = kf[kf["op_call"] >= 0]
        if not len(kf) or kf["input_dims"].isna().all():
            warnings.append(f"{f}: no recorded shapes (record_shapes=False, or CUDA-graph replay)")
            continue
        for _, g in kf.groupby(["rank", "op_call"]):
            first = g.iloc[0]
            op = first["op"]
            dims, types = _json(first["input_dims"]), _json(first["input_types"])
            shape = _mnk(str(op), dims, types) if dims is not None else None
            if shape is None:
                continue
            b, m, n, kk, elt = shape
            dur = float(g["dur_us"].sum())
            if dur <= 0:
                continue
            flop = 2.0 * b * m * n * kk
            byt = float(b * (m * kk + kk * n + m * n) * elt)
            tb_s = byt / dur / 1e6
            tflop_s = flop / dur / 1e6
            rows.append({"rank": int(g["rank"].iloc[0]), "op": op, "B": b, "M": m, "N": n, "K": kk, "dtype_bytes": elt,
                         "kernels": len(g), "kernel": str(g.sort_values("dur_us")["name"].iloc[-1]), "dur_us": dur,
                         "gflop": flop / 1e9, "mbytes": byt / 1e6, "tb_s": tb_s, "tflop_s": tflop_s,
                         "bw_share": tb_s * 1e3 / spec.mem_bw_gbps,
                         "flop_share": tflop_s / spec.peak_tflops("fp8" if elt == 1 else "bf16"),
                         "intensity": flop / byt})
    out = pd.DataFrame(rows, columns=cols[:-1])
    ridge = spec.peak_tflops("bf16") * 1e12 / (spec.mem_bw_gbps * 1e9)
    out["bound"] = np.where(out["intensity"] < ridge, "memory", "compute")
    out.attrs["gpu"] = repr(spec)
    out.attrs["ridge_flop_per_byte"] = ridge if math.isfinite(ridge) else None
    out.attrs["warnings"] = warnings
    return out
