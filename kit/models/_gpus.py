"""The GPU spec table (``gpus.toml``, shipped with a source per row) and lookup by name or host."""
from __future__ import annotations

import html
import os
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kit.errors import ModelError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["GPUSpec", "gpu_specs", "gpu_spec"]

TABLE = Path(__file__).with_name("gpus.toml")
ENV = "KIT_GPUS"


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's vendor peaks (not measurements). Bandwidths GB/s, throughputs dense TFLOP/s."""

    key: str
    name: str
    match: str
    memory_gb: float
    mem_bw_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    nvlink_gbps: float = 0.0
    pcie: str = ""
    link: str = ""
    source: str = ""
    note: str = ""

    def peak_tflops(self, fmt: str = "bf16") -> float:
        """Dense peak for a weight format: fp4 formats use the FP4 peak (else FP8, else BF16), fp8 the
        FP8 peak (else BF16), everything else BF16."""
        if fmt in ("nvfp4", "mxfp4") and self.fp4_tflops:
            return self.fp4_tflops
        if fmt in ("fp8", "nvfp4", "mxfp4", "int4") and self.fp8_tflops:
            return self.fp8_tflops
        return self.bf16_tflops

    def __repr__(self) -> str:
        fp8 = f", fp8 {self.fp8_tflops:g}" if self.fp8_tflops else ""
        return (f"GPUSpec({self.key}: {self.memory_gb:g} GB, {self.mem_bw_gbps:,.0f} GB/s, bf16 {self.bf16_tflops:g}"
                f"{fp8} TFLOP/s dense; source: {self.source})")

    def _repr_html_(self) -> str:
        return f"<code>{html.escape(repr(self))}</code>"


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ModelError(f"{path}: cannot read GPU spec table ({exc})") from None
    rows = data.get("gpu")
    if not isinstance(rows, list):
        raise ModelError(f"{path}: no [[gpu]] tables")
    return rows


def _spec(row: dict[str, Any], path: Path) -> GPUSpec:
    known = {f.name for f in fields(GPUSpec)}
    missing = [k for k in ("key", "name", "match", "memory_gb", "mem_bw_gbps", "bf16_tflops") if k not in row]
    if missing:
        raise ModelError(f"{path}: GPU row {row.get('key', '?')!r} lacks {', '.join(missing)}")
    extra = sorted(set(row) - known)
    if extra:
        raise ModelError(f"{path}: GPU row {row['key']!r} has unknown field(s) {', '.join(extra)}")
    try:
        re.compile(row["match"])
    except re.error as exc:
        raise ModelError(f"{path}: GPU row {row['key']!r}: bad match regex ({exc})") from None
    return GPUSpec(**row)


def gpu_specs(extra: str | os.PathLike | None = None) -> dict[str, GPUSpec]:
    """The shipped GPU table, then rows from ``$KIT_GPUS`` and ``extra`` (TOML files of the same
    layout; a row with an existing key replaces it). Keyed by ``key``, in file order."""
    out: dict[str, GPUSpec] = {}
    paths = [TABLE] + [Path(p) for p in (os.environ.get(ENV), extra) if p]
    for p in paths:
        for row in _read(p):
            s = _spec(row, p)
            out[s.key] = s
    return out


def gpu_spec(gpu: Any, *, extra: str | os.PathLike | None = None) -> GPUSpec:
    """A GPU's spec from a key (``'H200'``), a name as nvidia-smi prints it (``'NVIDIA H200'``), a
    :class:`kit.env.Fingerprint` (its first GPU) or a connected host (fingerprinted), or a GPUSpec."""
    if isinstance(gpu, GPUSpec):
        return gpu
    specs = gpu_specs(extra)
    name = gpu
    if not isinstance(gpu, str):
        fp = gpu
        if not hasattr(fp, "gpus"):   # a host: ask it
            from kit.env import fingerprint  # deferred: only for a host (kit.env brings the remote layer)

            fp = fingerprint(gpu)
        if fp.gpus is None or fp.gpus.empty or "name" not in fp.gpus:
            raise ModelError(f"{getattr(fp, 'host', '?')}: no GPU name in the fingerprint "
                             f"({(fp.missing or {}).get('gpus', 'nvidia-smi gave none')})")
        names = sorted(set(fp.gpus["name"].astype(str)))
        if len(names) > 1:
            raise ModelError(f"{fp.host}: mixed GPUs {names}; pass one name to gpu_spec")
        name = names[0]
    if name in specs:
        return specs[name]
    hits = [s for s in specs.values() if re.search(s.match, name, re.I)]
    if not hits:
        raise ModelError(f"no GPU spec matches {name!r}; known: {', '.join(specs)} (add a row with "
                         f"kit.models.gpu_specs(extra=FILE) or ${ENV})")
    return hits[-1]   # user rows come last and win
