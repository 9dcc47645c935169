"""An investigation session: where its artefacts live, and where each one came from.

A session is a directory. Its layout is fixed here, once, so notebooks stop building paths::

    traces/<scenario>/rank*.trace.json.gz   profiler traces, one folder per scenario
    traces/<scenario>/measured.json         truth recorded outside the profiler (CUDA-event step times)
    logs/                                   serving logs, NCCL_DEBUG logs
    bench/                                  benchmark results
    env/                                    captures of the machine the traces were recorded on
    server/                                 captures of the serving host under investigation
    model/                                  the model's config.json
    experiments/<name>/                     configuration sweeps (one folder per variant)
    ledger.json                             the hypotheses and their verdicts
    provenance.json                         where each artefact came from

Every artefact has a :class:`Provenance`: **measured** (by this kit or the project's recorder, on
which host, when, how), **third-party** (a public artefact and its source), **sample** (written by
hand or by a script to a documented format: not measured) or **project-written** (code or text the
project wrote). ``provenance.json`` maps session-relative paths or folder prefixes to provenances;
the longest matching prefix wins. A file no entry covers is read for the marks the sample writers
leave (a first line starting ``# SAMPLE``, ``"sample": true`` in JSON); otherwise it is
``unknown``, never assumed measured.

    s = kit.session.open("notebooks/sample")
    s.path("logs", "sglang.log")           # Path inside the session
    s.provenance("logs/sglang.log")        # Provenance(kind='sample', ...)
    s.provenance("logs/sglang.log").label  # 'sample written to the SGLang 0.5.9 format (not measured)'
    s.record("traces/tp1_eager", Provenance.measured(host="h200", how="tools/record_decode_traces.py"))
    s.ledger()                             # the Ledger notebooks record into ($KIT_LEDGER honoured)
    s.evidence("logs/sglang.log", role="step time")  # an Evidence for a ledger entry or a plot caption
    kit.session.provenance_of("notebooks/sample/logs/sglang.log")  # for parsers: no session needed

A session whose manifest marks ``ledger.json`` as ``project-written`` keeps it as posed: notebooks
run by hand record into ``.kit/ledger.json`` beside it (seeded from the posed file, git-ignored),
so running a notebook never rewrites a tracked ledger. ``kit report`` points ``$KIT_LEDGER`` at the
report's own copy.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from kit.errors import SessionError
from kit.util import write_atomic

__all__ = ["KINDS", "LAYOUT", "Captures", "Evidence", "Provenance", "Session", "StepTimes", "open", "provenance_of",
           "caption"]

KINDS = ("measured", "third-party", "sample", "project-written", "unknown")
LAYOUT = {"traces": "traces", "logs": "logs", "bench": "bench", "env": "env", "server": "server",
          "model": "model", "experiments": "experiments"}
MANIFEST = "provenance.json"
_SNIFF_BYTES = 4096
_WORK = ".kit"            # per-checkout working copies (git-ignored): the ledger of hand-run notebooks
_MAX_UP = 12              # provenance_of: how many parent directories are searched for a manifest


@dataclass(frozen=True)
class Provenance:
    """Where one artefact came from. ``kind`` is one of :data:`KINDS`; the rest says who, where,
    when and how, as far as it is known."""

    kind: str
    host: str | None = None      # measured: the machine it was measured on
    when: str | None = None      # measured: ISO date/time
    how: str | None = None       # the command, tool or script that produced it
    source: str | None = None    # third-party: repository/URL; sample: the format it was written to
    note: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"provenance kind {self.kind!r} is not one of {KINDS}")

    @classmethod
    def measured(cls, *, host: str, how: str, when: str | None = None, note: str | None = None) -> "Provenance":
        """Measured on ``host`` by ``how`` (now, unless ``when`` is given)."""
        when = when or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return cls("measured", host=host, when=when, how=how, note=note)

    @classmethod
    def sample(cls, *, source: str, how: str | None = None, note: str | None = None) -> "Provenance":
        """Written to the format ``source`` describes; its numbers were not measured."""
        return cls("sample", source=source, how=how, note=note)

    @property
    def is_measured(self) -> bool:
        return self.kind == "measured"

    @property
    def label(self) -> str:
        """One line for a table cell or a plot caption; says 'measured' only for measured data."""
        if self.kind == "measured":
            bits = [f"measured on {self.host}" if self.host else "measured"]
            if self.when:
                bits.append(self.when)
            if self.how:
                bits.append(f"by {self.how}")
            return ", ".join(bits)
        if self.kind == "third-party":
            return f"third-party artefact ({self.source})" if self.source else "third-party artefact"
        if self.kind == "sample":
            what = f"sample written to the {self.source} format" if self.source else "sample written by hand"
            return what + " (not measured)"
        if self.kind == "project-written":
            return "written by the project" + (f" ({self.note})" if self.note else "")
        return "provenance unknown (not shown to be measured)"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "provenance") -> "Provenance":
        try:
            return cls(**{k: d.get(k) for k in ("kind", "host", "when", "how", "source", "note")})
        except (TypeError, ValueError) as exc:
            raise SessionError(f"{where}: bad provenance entry {d!r} ({exc})") from None

    def __repr__(self) -> str:
        return f"Provenance({self.label!r})"

    def _repr_html_(self) -> str:
        colour = {"measured": "#1a7f37", "third-party": "#0969da", "sample": "#9a6700"}.get(self.kind, "#6e7781")
        return f'<span style="color:{colour}">{html.escape(self.label)}</span>'


UNKNOWN = Provenance("unknown")


@dataclass(frozen=True)
class Evidence:
    """One artefact a result rests on: its session-relative path, its provenance and its role in
    the argument ("step time", "kernel traces"). ``to_ledger()`` is what a ledger entry stores."""

    artefact: str
    provenance: Provenance
    role: str | None = None

    @property
    def kind(self) -> str:
        return self.provenance.kind

    @property
    def label(self) -> str:
        return self.provenance.label

    def to_ledger(self) -> dict[str, str]:
        d = {"artefact": self.artefact, "kind": self.kind, "label": self.label}
        if self.role:
            d["role"] = self.role
        return d

    def __repr__(self) -> str:
        role = f"{self.role}: " if self.role else ""
        return f"Evidence({role}{self.artefact} -- {self.label})"

    def _repr_html_(self) -> str:
        role = f"{html.escape(self.role)}: " if self.role else ""
        return f"{role}<code>{html.escape(self.artefact)}</code> &mdash; {self.provenance._repr_html_()}"


def caption(items: Iterable[Evidence | Provenance]) -> str:
    """One line for under a plot or table: the distinct provenances of what it was drawn from
    (``"Source: sample written to the ... format (not measured)"``)."""
    labels: list[str] = []
    for it in items:
        lab = it.label
        if lab not in labels:
            labels.append(lab)
    return "Source: " + ("; ".join(labels) if labels else "provenance not stated")


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
        from kit.ledger import LEDGER_ENV, Ledger

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
        p = Path(path)
        if not p.is_absolute() and not (self.root / p).exists() and p.exists():
            p = p.resolve()  # a path built from the session's own root (s.path(...)), relative to the cwd
        if p.is_absolute():
            try:
                p = p.resolve().relative_to(self.root.resolve())
            except ValueError:
                return p.as_posix()
        return p.as_posix().strip("/")

    def manifest(self) -> dict[str, Provenance]:
        """The entries of ``provenance.json`` (path or folder prefix -> Provenance)."""
        if self._manifest is None:
            p = self.root / MANIFEST
            entries: dict[str, Provenance] = {}
            if p.is_file():
                try:
                    raw = json.loads(p.read_text(encoding="utf-8"))
                except (OSError, ValueError, UnicodeDecodeError) as exc:
                    raise SessionError(f"{p}: unreadable provenance manifest ({exc})") from None
                if not isinstance(raw, dict) or not isinstance(raw.get("artefacts", {}), dict):
                    raise SessionError(f"{p}: expected {{\"artefacts\": {{path: provenance}}}}")
                for key, d in raw.get("artefacts", {}).items():
                    entries[key.strip("/")] = Provenance.from_dict(d, where=str(p))
            self._manifest = entries
        return self._manifest

    def provenance(self, path: str | os.PathLike[str]) -> Provenance:
        """Where the artefact at ``path`` (session-relative or absolute) came from."""
        rel = self._rel(path)
        entries = self.manifest()
        parts = rel.split("/")
        for i in range(len(parts), 0, -1):
            hit = entries.get("/".join(parts[:i]))
            if hit is not None:
                return hit
        return _sniff(self.root / rel)

    def provenances(self, paths: Iterable[str | os.PathLike[str]]) -> list[Provenance]:
        """The distinct provenances of several artefacts, in first-seen order."""
        out: list[Provenance] = []
        for p in paths:
            pv = self.provenance(p)
            if pv not in out:
                out.append(pv)
        return out

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
        from kit.audit import audit

        if parts:
            paths = [self.path(p) for p in parts]
        else:
            skip = {"engine", "model"} | ({"traces"} if not traces else set())
            paths = sorted(p for p in self.root.iterdir() if p.is_dir() and p.name not in skip
                           and not p.name.startswith("."))
        return audit(paths, compare=compare, traces=traces, source=str(self.path(source)) if source else None)

    def configurations(self, configs: Iterable[Mapping[str, Any]]):
        """One row per serving configuration, read from its files in this session: ``configs`` are dicts
        with ``name``, ``bench`` (benchmark result), ``log`` (server log), ``version`` (the engine's, or
        None: read from the log) and ``nccl`` (an NCCL_DEBUG=INFO log, or None: not captured). Columns:
        benchmark and log tok/s, ms/token, the settings the log shows (None where the log names none,
        e.g. vLLM's attention backend), the NCCL variables the ranks echoed, whether the engine said it
        disabled its custom all-reduce (with the log line), and the benchmark's provenance."""
        import pandas as pd

        return pd.DataFrame([self._configuration(c) for c in configs])

    def _configuration(self, c: Mapping[str, Any]) -> dict[str, Any]:
        from kit.logs import read

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

    FILES = {"gpus": "nvidia-smi-query-gpu.csv", "topology": "nvidia-smi-topo.txt", "header": "nvidia-smi.txt"}

    @classmethod
    def read(cls, session: "Session", folder: str) -> "Captures":
        from kit import env

        out = cls(folder=folder, evidence=[])
        parsers = {"gpus": env.parse_gpu_query, "topology": env.parse_topology,
                   "header": env.parse_nvidia_smi_header}
        roles = {"gpus": "GPUs", "topology": "link matrix", "header": "driver and CUDA"}
        for name, file in cls.FILES.items():
            path = session.path(folder, file)
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            setattr(out, name, parsers[name](text, source=str(path)))
            out.evidence.append(session.evidence(f"{folder}/{file}", f"{roles[name]} ({folder}/)"))
        return out

    @property
    def found(self) -> bool:
        return bool(self.evidence)

    def fingerprint(self, host: str | None = None):
        """A :class:`kit.env.Fingerprint` of these captures (for :func:`kit.models.gpu_spec`)."""
        from kit.env import Fingerprint

        return Fingerprint(host=host or self.folder, gpus=self.gpus, topology=self.topology,
                           driver=(self.header or {}).get("driver"), cuda_driver=(self.header or {}).get("cuda"))

    def __repr__(self) -> str:
        n = 0 if self.gpus is None else len(self.gpus)
        return f"Captures({self.folder!r}: {n} GPU(s), {len(self.evidence or [])} file(s))"


def _arg(args: Mapping[str, Any], key: str) -> Any:
    """A server argument as a table shows it: its value, "none" where the engine printed it unset,
    None (missing) where its log does not name it."""
    if key not in args:
        return None
    return "none" if args[key] is None else args[key]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def provenance_of(path: str | os.PathLike[str]) -> Provenance:
    """Where the file at ``path`` came from, without a session in hand (for parsers): the nearest
    parent directory holding a ``provenance.json`` answers; else the marks inside the file; else
    ``unknown``. A path that is not a local file (``host:path``, ``<text>``) is ``unknown``."""
    p = Path(path)
    try:
        p = p.resolve()
    except (OSError, RuntimeError):
        return UNKNOWN
    if not p.exists():
        return UNKNOWN
    for parent in list(p.parents)[:_MAX_UP]:
        if (parent / MANIFEST).is_file():
            try:
                return _session_for(parent).provenance(p)
            except SessionError:
                return UNKNOWN
    return _sniff(p)


_SESSIONS: dict[tuple[str, float], Session] = {}


def _session_for(root: Path) -> Session:
    """One Session per manifest version (parsers may ask for hundreds of files)."""
    key = (str(root), (root / MANIFEST).stat().st_mtime)
    if key not in _SESSIONS:
        if len(_SESSIONS) > 64:
            _SESSIONS.clear()
        _SESSIONS[key] = Session(root)
    return _SESSIONS[key]


def _sniff(path: Path) -> Provenance:
    """Provenance from the marks sample writers leave inside a file; ``unknown`` otherwise."""
    if not path.is_file():
        return UNKNOWN
    try:
        with path.open("rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return UNKNOWN
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"# SAMPLE"):
        return Provenance("sample", note=first.decode("utf-8", "replace")[2:].strip())
    if b'"sample": true' in head or b'"sample":true' in head:
        return Provenance("sample")
    return UNKNOWN


def open(root: str | os.PathLike[str]) -> Session:  # noqa: A001 - kit.session.open reads naturally
    """Open the session directory ``root``."""
    return Session(root)
