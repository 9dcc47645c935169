"""An investigation session: where its artefacts live, and where each one came from.

A session is a directory. Its layout is fixed here, once (:data:`LAYOUT`), so notebooks stop building paths::

    traces/<scenario>/rank*.trace.json.gz   profiler traces, one folder per scenario
    traces/<scenario>/measured.json         truth recorded outside the profiler (CUDA-event step times)
    logs/ bench/ model/                     serving and NCCL logs, benchmark results, the model's config.json
    env/ server/                            captures of the trace machine and of the serving host
    experiments/<name>/                     configuration sweeps (one folder per variant)
    ledger.json provenance.json             the hypotheses and their verdicts; where each artefact came from

Where each artefact came from lives in ``kit.provenance`` (at the bottom of the house, so that parsers
can ask without a session); this module re-exports its names.

    s = kit.session.open("notebooks/sample")
    s.path("logs", "sglang.log")           # Path inside the session
    s.provenance("logs/sglang.log").label  # 'sample written to the SGLang 0.5.9 format (not measured)'
    s.record("traces/tp1_eager", Provenance.measured(host="h200", how="tools/record_decode_traces.py"))
    s.evidence("logs/sglang.log", role="step time")  # an Evidence for a ledger entry or a plot caption

A session whose manifest marks ``ledger.json`` as ``project-written`` keeps it as posed: notebooks
run by hand record into ``.kit/ledger.json`` beside it (seeded from the posed file, git-ignored),
so running a notebook never rewrites a tracked ledger. ``kit report`` points ``$KIT_LEDGER`` at the
report's own copy.
"""
from __future__ import annotations

import html
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from kit import env
from kit.audit import audit as audit_paths
from kit.errors import SessionError
from kit.ledger import LEDGER_ENV, Ledger
from kit.logs import read
from kit.provenance import (
    KINDS,
    MANIFEST,
    Evidence,
    Provenance,
    caption,
    lookup,
    provenance_of,
    read_manifest,
    relative,
)
from kit.util import write_atomic

__all__ = ["KINDS", "LAYOUT", "Captures", "Evidence", "Provenance", "Session", "StepTimes", "open", "provenance_of",
           "caption"]

LAYOUT = {"traces": "traces", "logs": "logs", "bench": "bench", "env": "env", "server": "server",
          "model": "model", "experiments": "experiments"}
_WORK = ".kit"            # per-checkout working copies (git-ignored): the ledger of hand-run notebooks


class Session:
    """One investigation's directory: paths by role, and the provenance of each artefact."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise SessionError(f"{self.root}: session directory not found")
        self._manifest: dict[str, Provenance] | None = None

    # -- paths ------------------------------------------------------------------------------
    def path(self, *parts: str | os.PathLike[str]) -> Path:
        """A path inside the session (``s.path("logs", "x.log")``). An absolute *first* part is a file
        the user named explicitly (a parameter pointing at a log elsewhere) and is kept as given.
        Any other name that leads outside the session (``../``, an absolute name after a folder:
        ``s.path("experiments", name)``) is refused with a SessionError: names come from users and
        configurations, and nothing the kit writes under a session folder may land outside it."""
        if parts and os.path.isabs(os.fspath(parts[0])):
            base = Path(parts[0])
            return self._inside(base.joinpath(*parts[1:]), parts[1:], base)
        return self._inside(self.root.joinpath(*parts), parts, self.root)

    def __truediv__(self, other: str | os.PathLike[str]) -> Path:
        return self.path(other)

    def _inside(self, p: Path, parts: tuple, base: Path) -> Path:
        """``p`` if it lies under ``base`` (the session root, or an absolute path the caller named):
        by its normalised path (a folder symlinked from elsewhere, ``traces -> /data/traces``,
        stays in), or by the real paths of both (a root given through a symlink); else SessionError."""
        root = os.path.normpath(os.path.abspath(base))
        full = os.path.normpath(os.path.abspath(p))
        if _under(full, root) or _under(os.path.realpath(full), os.path.realpath(root)):
            return p
        name = "/".join(str(x) for x in parts)
        where = "the session" if base == self.root else str(base)
        raise SessionError(f"{self.root}: {name!r} resolves outside {where} ({full}); "
                           f"session names must stay inside it")

    def scenarios(self, pattern: str = "rank*.trace.json.gz") -> dict[str, list[Path]]:
        """Trace files per scenario folder under ``traces/`` (sorted), folders without a match left out."""
        out: dict[str, list[Path]] = {}
        base = self.root / LAYOUT["traces"]
        for d in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
            files = sorted(d.glob(pattern))
            if files:
                out[d.name] = files
        return out

    def measured(self, scenario: str) -> dict[str, Any] | None:
        """``traces/<scenario>/measured.json`` (the truth recorded outside the profiler), or None."""
        p = self.path(LAYOUT["traces"], scenario, "measured.json")
        if not p.is_file():
            return None
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise SessionError(f"{p}: unreadable measured.json ({exc})") from None

    def step_times(self, scenario: str) -> "StepTimes | None":
        """The measured record of ``traces/<scenario>/`` (``measured.json``, rank 0) as a
        :class:`StepTimes`, with its provenance; None where the scenario has none."""
        m = self.measured(scenario)
        if not m:
            return None
        try:
            return StepTimes.from_record(scenario, m["ranks"][0], self.evidence(
                f"{LAYOUT['traces']}/{scenario}/measured.json", "step times (CUDA events)"))
        except (KeyError, IndexError, TypeError) as exc:
            raise SessionError(f"{self.path(LAYOUT['traces'], scenario, 'measured.json')}: "
                               f"no decode step times in rank 0 ({type(exc).__name__}: {exc})") from None

    def captures(self, folder: str = "server") -> "Captures":
        """What was captured of one machine (``server/`` the serving host, ``env/`` the trace
        machine): its GPUs, link matrix and driver, each read with its provenance (:class:`Captures`)."""
        return Captures.read(self, folder)

    def ledger(self):
        """The ledger notebooks record into: ``$KIT_LEDGER`` when set; else ``<session>/ledger.json``,
        unless the manifest marks that file ``project-written`` (the hypotheses as posed): then a
        working copy ``<session>/.kit/ledger.json``, seeded from it, so the posed file stays as it is."""
        if os.environ.get(LEDGER_ENV):
            return Ledger.for_session(self.root)
        posed = self.root / "ledger.json"
        entry = self.manifest().get("ledger.json")
        if entry is None or entry.kind != "project-written":
            return Ledger.open(posed)
        work = self.root / _WORK / "ledger.json"
        if not work.exists() and posed.is_file():
            work.parent.mkdir(parents=True, exist_ok=True)
            (work.parent / ".gitignore").write_text("*\n", encoding="utf-8")
            fd, tmp = tempfile.mkstemp(prefix=".ledger.json.", suffix=".tmp", dir=work.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(posed.read_bytes())
            os.replace(tmp, work)
        return Ledger.open(work)

    def evidence(self, path: str | os.PathLike[str], role: str | None = None) -> Evidence:
        """The artefact at ``path`` with its provenance, for a ledger entry or a caption."""
        return Evidence(self._rel(path), self.provenance(path), role)

    # -- provenance ---------------------------------------------------------------------------
    def _rel(self, path: str | os.PathLike[str]) -> str:
        return relative(self.root, path)

    def manifest(self) -> dict[str, Provenance]:
        """The entries of ``provenance.json`` (path or folder prefix -> Provenance)."""
        if self._manifest is None:
            self._manifest = read_manifest(self.root)
        return self._manifest

    def provenance(self, path: str | os.PathLike[str]) -> Provenance:
        """Where the artefact at ``path`` (session-relative or absolute) came from."""
        return lookup(self.manifest(), self.root, self._rel(path))

    def record(self, path: str | os.PathLike[str], provenance: Provenance) -> None:
        """Say where ``path`` (a file or a folder prefix) came from, in ``provenance.json``."""
        rel = self._rel(path)
        if os.path.isabs(rel):  # _rel keeps a path outside the session absolute: no place in its manifest
            raise SessionError(f"{self.root}: {rel!r} is outside the session; its manifest names only what is inside")
        self.path(rel)
        entries = dict(self.manifest())
        entries[rel] = provenance
        payload = {"format": 1, "artefacts": {k: v.to_dict() for k, v in sorted(entries.items())}}
        write_atomic(self.root / MANIFEST, json.dumps(payload, indent=1, sort_keys=True) + "\n", prefix=".provenance.")
        self._manifest = entries

    def audit(self, *parts: str, traces: bool = False, compare: bool = False, source: str | None = None):
        """``kit.audit.audit`` over this session's artefacts (``parts``: sub-folders or files; default every
        folder but ``engine``, ``model`` and ``traces``; ``traces=True`` adds the trace health checks).
        ``source`` (relative to the session) names the function that overrode an ignored setting."""
        if parts:
            paths = [self.path(p) for p in parts]
        else:
            skip = {"engine", "model"} | ({"traces"} if not traces else set())
            paths = sorted(p for p in self.root.iterdir() if p.is_dir() and p.name not in skip
                           and not p.name.startswith("."))
        return audit_paths(paths, compare=compare, traces=traces, source=str(self.path(source)) if source else None)

    def configurations(self, configs: Iterable[Mapping[str, Any]]):
        """One row per serving configuration, read from its files in this session: ``configs`` are dicts
        with ``name``, ``bench`` (benchmark result), ``log`` (server log), ``version`` (the engine's, or
        None: read from the log) and ``nccl`` (an NCCL_DEBUG=INFO log, or None: not captured). Columns:
        benchmark and log tok/s, ms/token, the settings the log shows (None where the log names none,
        e.g. vLLM's attention backend), the NCCL variables the ranks echoed, whether the engine said it
        disabled its custom all-reduce (with the log line), and the benchmark's provenance."""
        return pd.DataFrame([self._configuration(c) for c in configs])

    def _configuration(self, c: Mapping[str, Any]) -> dict[str, Any]:
        bench = read(self.path(c["bench"])).bench.iloc[0]  # decode_tok_s: per request, normalised across tools
        log = read(self.path(c["log"]), version=c.get("version"))
        args = log.server_args
        nccl_env = read(self.path(c["nccl"])).nccl_info["env"] if c.get("nccl") else {}
        off = [w.split(":", 1)[0] for w in log.warnings if "custom all-reduce" in w]
        return {"config": c["name"], "engine": log.engine, "version": log.version,
                "tok/s (bench)": float(bench["decode_tok_s"]), "tok/s (log)": log.decode_tok_s(),
                "ms/token": 1000.0 / float(bench["decode_tok_s"]),
                "attention": _arg(args, "attention_backend"), "speculative": _arg(args, "speculative_algorithm"),
                "overlap scheduler": None if "disable_overlap_schedule" not in args
                else not args["disable_overlap_schedule"],
                "NCCL env": (" ".join(f"{k}={v}" for k, v in nccl_env.items())
                             or ("default" if c.get("nccl") else "not captured")),
                "custom all-reduce": f"off (log {off[0]})" if off else "not reported off",
                "source": self.provenance(c["bench"]).label}

    def __repr__(self) -> str:
        return f"Session({self.root.as_posix()!r})"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td>{v._repr_html_()}</td></tr>"
                       for k, v in sorted(self.manifest().items()))
        return (f"<div><b>session</b> <code>{html.escape(self.root.as_posix())}</code>"
                f"<table><tr><th>artefact</th><th>provenance</th></tr>{rows}</table></div>")


@dataclass
class StepTimes:
    """A scenario's step times measured outside the profiler (CUDA events, ``measured.json``), the
    decoder configuration it ran, and where the record came from (``evidence``)."""

    scenario: str
    variant: str | None
    world_size: int
    batch: int
    context: int | None
    unprofiled_ms: float     # median decode step without the profiler
    profiled_ms: float       # median decode step while profiling
    profiled_mean_ms: float
    record: dict[str, Any]   # rank 0's record as written, for fields this class does not name
    evidence: Evidence

    @classmethod
    def from_record(cls, scenario: str, r0: dict[str, Any], evidence: Evidence) -> "StepTimes":
        return cls(scenario=scenario, variant=r0.get("variant"), world_size=int(r0.get("world_size", 1)),
                   batch=int(r0.get("batch", 1)), context=r0.get("max_len"),
                   unprofiled_ms=float(r0["unprofiled"]["decode"]["median_ms"]),
                   profiled_ms=float(r0["profiled"]["decode"]["median_ms"]),
                   profiled_mean_ms=float(r0["profiled"]["decode"]["mean_ms"]), record=r0, evidence=evidence)

    @property
    def known(self) -> dict[str, Any]:
        """What the recorder changed on purpose between two runs (e.g. ``per_step_us`` of an extra GEMM)."""
        return dict(self.record.get("known", {}))

    def model_config(self) -> dict[str, Any] | None:
        """The decoder's shape as a Hugging Face ``config.json`` dict (for :func:`kit.models.model_shape`),
        or None where the record has no shape or ran weights the config cannot describe (an extra GEMM)."""
        r = self.record
        if "hidden" not in r or r.get("extra_gemm"):
            return None
        return {"model_type": "llama", "hidden_size": r["hidden"], "num_hidden_layers": r["layers"],
                "num_attention_heads": r["heads"], "num_key_value_heads": r["kv_heads"],
                "intermediate_size": r["intermediate"], "vocab_size": r.get("vocab", 32000),
                "torch_dtype": r.get("dtype", "bfloat16")}

    def row(self) -> dict[str, Any]:
        """One table row: variant, world size, unprofiled and profiled step, source."""
        return {"variant": self.variant, "world_size": self.world_size, "unprofiled step (ms)": self.unprofiled_ms,
                "profiled step (ms)": self.profiled_ms, "source": self.evidence.label}


@dataclass
class Captures:
    """The captures of one machine in a session folder: ``gpus`` (``nvidia-smi --query-gpu`` table),
    ``topology`` (``nvidia-smi topo -m``), ``header`` (driver and CUDA of ``nvidia-smi``), each None
    where not captured, and the :class:`Evidence` of each file read."""

    folder: str
    gpus: Any = None
    topology: Any = None
    header: dict[str, Any] | None = None
    evidence: list[Evidence] | None = None

    @classmethod
    def read(cls, session: "Session", folder: str) -> "Captures":
        out = cls(folder=folder, evidence=[])
        for name, (file, parse, role) in _CAPTURES.items():
            path = session.path(folder, file)
            if path.is_file():
                setattr(out, name, parse(path.read_text(encoding="utf-8", errors="replace"), source=str(path)))
                out.evidence.append(session.evidence(f"{folder}/{file}", f"{role} ({folder}/)"))
        return out

    @property
    def found(self) -> bool:
        return bool(self.evidence)

    def fingerprint(self, host: str | None = None):
        """A :class:`kit.env.Fingerprint` of these captures (for :func:`kit.models.gpu_spec`)."""
        return env.Fingerprint(host=host or self.folder, gpus=self.gpus, topology=self.topology,
                           driver=(self.header or {}).get("driver"), cuda_driver=(self.header or {}).get("cuda"))

    def __repr__(self) -> str:
        n = 0 if self.gpus is None else len(self.gpus)
        return f"Captures({self.folder!r}: {n} GPU(s), {len(self.evidence or [])} file(s))"


# what a machine's captures hold: field -> (file, its parser, its role in words)
_CAPTURES = {"gpus": ("nvidia-smi-query-gpu.csv", env.parse_gpu_query, "GPUs"),
             "topology": ("nvidia-smi-topo.txt", env.parse_topology, "link matrix"),
             "header": ("nvidia-smi.txt", env.parse_nvidia_smi_header, "driver and CUDA")}


def _arg(args: Mapping[str, Any], key: str) -> Any:
    """A server argument as a table shows it: its value, "none" where the engine printed it unset,
    None (missing) where its log does not name it."""
    if key not in args:
        return None
    return "none" if args[key] is None else args[key]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def open(root: str | os.PathLike[str]) -> Session:  # noqa: A001 - kit.session.open reads naturally
    """Open the session directory ``root``."""
    return Session(root)
