"""A run's files by what they hold, read by the audit's classification (``kit.audit.audit(...).inputs``)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import kit.audit
from kit.errors import UsageError


@dataclass
class RunInputs:
    """One run's artefacts: ``traces`` (with ``references``: traces under a ``reference/`` folder, the eager run
    that places graph replays), ``logs`` (engine logs and settings captures), ``bench`` (benchmark results),
    ``config`` (the model's ``config.json``), ``gpus`` (``nvidia-smi --query-gpu`` CSV), ``measured``
    (step times measured outside the profiler), ``command`` (the engine's command line, from an
    experiment's ``variant.json`` or ``server.json``), the audit that classified them (``audit``) and
    ``missing`` (what the pipeline looks for and did not find)."""

    label: str
    paths: list[Path]
    traces: list[Path] = field(default_factory=list)
    references: list[Path] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    bench: list[Path] = field(default_factory=list)
    config: Path | None = None
    gpus: Path | None = None
    measured: Path | None = None
    command: str | None = None
    env: dict = field(default_factory=dict)
    audit: object = None
    missing: list[str] = field(default_factory=list)

    def files(self) -> list[str]:
        extra = [x for x in (self.config, self.gpus, self.measured) if x is not None]
        return [str(p) for p in (*self.traces, *self.references, *self.logs, *self.bench, *extra)]


def split(run) -> list[Path]:
    """A run given as a folder, a file, several joined by ``,`` or a list of them -> its paths (checked)."""
    parts = [run] if isinstance(run, (str, os.PathLike)) else list(run)
    out = [Path(x) for p in parts for x in (p.split(",") if isinstance(p, str) else [p]) if str(x).strip()]
    for p in out:
        if not p.exists():
            raise UsageError(f"kit investigate: {p}: no such file or directory (a run is a folder, a file, "
                             "or files joined by ',')")
    return out


def _walk(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        files += sorted(x for x in p.rglob("*") if x.is_file() and not any(s.startswith(".") for s in x.parts[-3:])) \
            if p.is_dir() else [p]
    return files


def gather(run, label: str) -> RunInputs:
    """Read what ``run`` holds: the audit classifies logs, benchmarks, clocks and traces (``traces=False``: trace
    trust is read by the structure step); config, GPU capture and measured step times are found by name."""
    paths = split(run)
    a = kit.audit.audit(paths, traces=False)
    r = RunInputs(label, paths, audit=a)
    for name, kind in a.inputs.items():
        f = Path(name)
        if kind == "trace":
            (r.references if "reference" in f.parts[:-1] else r.traces).append(f)
        elif kind == "bench":
            r.bench.append(f)
        elif kind.startswith(("engine log", "context")):
            r.logs.append(f)
    for f in _walk(paths):
        if f.name == "config.json" and r.config is None:
            r.config = f
        elif f.name.endswith(".csv") and "query-gpu" in f.name and r.gpus is None:
            r.gpus = f
        elif f.name == "measured.json" and r.measured is None:
            r.measured = f
        elif f.name in ("variant.json", "server.json") and r.command is None:
            try:
                d = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            r.command, r.env = (d.get("cmd") if isinstance(d.get("cmd"), str) else None), dict(d.get("env") or {})
    have = {"bench": r.bench, "trace": r.traces, "engine log": [x for x in a.inputs.values()
                                                               if x.startswith("engine log")],
            "model config": r.config, "GPU capture": r.gpus}
    r.missing = [k for k, v in have.items() if not v]
    return r
