"""``audit(paths)``: read every artefact given, group them into runs, apply the rules."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

import kit.profile
from kit.audit import _rules
from kit.audit._effect import experiment_effects
from kit.audit._findings import Audit, Finding, order
from kit.audit._validity import check_run, parse_clocks, records, throttle
from kit.errors import KitError, UsageError
from kit.logs import settings as read_settings
from kit.util import recorded

_MAX_FILES = 2000
_TRACE_SUFFIXES = (".json.gz", ".trace.json", ".pt.trace.json", ".sqlite")
_SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints", "engine", "model"}


def _kind(path: Path) -> str:
    name = path.name
    if name == "plan.json":
        return "experiment"
    if name.endswith(_TRACE_SUFFIXES):
        return "trace"
    if name.endswith((".json", ".jsonl")):
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
        if '"traceEvents"' in head or '"schemaVersion"' in head:
            return "trace"
        if any(k in head for k in ('"requests"', '"completed"', '"output_throughput"', '"repeats"')):
            return "bench"
        if name in ("variant.json", "server.json", "measured.json", "provenance.json", "ledger.json",
                    "versions.json", "config.json"):
            return "skip"
        return "settings"
    if name.endswith(".csv"):
        head = path.read_text(encoding="utf-8", errors="replace")[:512]
        return "clocks" if "clocks" in head or re.search(r"\d MHz,.*0x[0-9A-Fa-f]+", head) else "skip"
    if name.endswith((".md", ".py", ".ipynb", ".png", ".html", ".toml", ".whl", ".parquet")):
        return "skip"
    return "settings"


def _classify(paths: Iterable) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """The files under ``paths`` by kind (:func:`_kind`), and the inputs table that names them."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                out += [Path(root) / f for f in sorted(files)]
                if len(out) > _MAX_FILES:
                    raise UsageError(f"kit audit: more than {_MAX_FILES} files under {p}; give narrower paths")
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"kit audit: {p}: no such file or directory")
    by_kind, inputs = {}, {}   # kind -> files; file -> kind
    for f in out:
        try:
            k = _kind(f)
        except OSError as exc:
            raise UsageError(f"kit audit: {f}: unreadable ({exc.strerror or exc})") from None
        by_kind.setdefault(k, []).append(f)
        inputs[str(f)] = k
    return by_kind, inputs


def _baselines(exp_dirs: list[Path], notes: list[str]) -> list[Path]:
    """The folders of the experiments' baseline variants (a note for each unreadable plan)."""
    baselines = []
    for d in exp_dirs:
        try:
            plan = json.loads((d / "plan.json").read_text(encoding="utf-8"))
            baselines += [d / v["slug"] for v in plan.get("variants", []) if v.get("baseline")]
        except (OSError, ValueError, KeyError, TypeError):
            notes.append(f"{d}/plan.json: unreadable; its runs are not audited one by one")
    return baselines


def _settings_runs(settings_files: list[Path], inputs: dict[str, str], exp_dirs: list[Path],
                   baselines: list[Path]) -> tuple[dict, list[Finding]]:
    """Engine logs are runs; a folder's other files are their context when the folder holds one
    engine log (else a run of their own); a single topology capture describes every run's host."""
    runs, findings, folders = {}, [], {}
    for f in settings_files:
        folders.setdefault(f.parent, []).append(f)
    parsed = {f: read_settings(f) for fs in folders.values() for f in fs}
    topos = [f for f, s in parsed.items() if s.get("topology") is not None]
    shared = topos if len(topos) == 1 else []
    for _folder, fs in folders.items():  # in the order given: the first run is the reference
        engine = [f for f in fs if parsed[f].args or parsed[f].get("decode_batch_max") is not None
                  or parsed[f].get("attention_backend") is not None]
        context = [f for f in fs if f not in engine and f not in shared]
        inputs.update({str(f): ("engine log" if f in engine else "context") + ": "
                       + next(iter(parsed[f].sources.values())) for f in fs})
        groups = [engine + context] if len(engine) == 1 else [[f] for f in engine] + [[f] for f in context]
        for g in groups:
            name = str(g[0])
            runs[name] = s = read_settings(g + [t for t in shared if t not in g])
            # a run of an experiment's variant: its differences from the baseline are the experiment's subject
            # (reported as effects); the baseline's own runs are audited like any run
            if not any(d in g[0].parents for d in exp_dirs) or any(b in g[0].parents for b in baselines):
                findings += _rules.run_findings(name, s)
    return runs, findings


def _experiment_findings(exp_dirs: list[Path], host, source: str | None, notes: list[str]) -> Iterator[Finding]:
    """Experiments: did each variant take effect?"""
    for d in exp_dirs:
        try:
            eff = experiment_effects(d, host=host, source=source)
        except (KitError, OSError, ValueError) as exc:
            notes.append(f"{d}: experiment not read ({exc})")
            continue
        for e in eff.effects:
            if e.status == "ignored":
                yield Finding("ignored-setting", "high", e.verdict, f"{d}: {e.variant}", e.evidence,
                              "drop the variant, or find the predicate that overrides it "
                              "(kit.audit.decider with the engine source)")
            elif e.status == "unknown":
                yield Finding("ignored-setting", "info", e.verdict, f"{d}: {e.variant}", e.evidence, "")
        notes += eff.notes


_VALIDITY_CODES = {"failed requests": "failed-requests", "output length": "short-outputs",
                   "warm-up": "no-warmup", "prompts seeded": "unseeded-prompts", "GPU clocks": "throttled"}


def _bench_findings(by_kind: dict[str, list[Path]], notes: list[str]) -> Iterator[Finding]:
    """Benchmark validity: each record's failed checks."""
    clocks_by_dir = {f.parent: f for f in by_kind.get("clocks", [])}
    for f in by_kind.get("bench", []):
        if f.name == "result.json" and (f.parent / "bench.json").is_file():
            continue  # the same requests as bench.json
        for label, rec in records(f):
            try:
                v = check_run(rec, clocks_by_dir.get(f.parent), run=label)
            except (ValueError, TypeError, KeyError) as exc:
                notes.append(f"{label}: not a benchmark record the kit can check ({exc})")
                continue
            for c in v.checks:
                if c["ok"] is False:
                    code = _VALIDITY_CODES[c["check"]]
                    sev = "medium" if code in ("no-warmup", "unseeded-prompts") else "high"
                    yield Finding(code, sev, f"{c['check']}: {c['detail']}", label, (f"{label}: {c['detail']}",),
                                  "re-run the benchmark; its figures do not measure what was asked")


def _clock_findings(by_kind: dict[str, list[Path]]) -> Iterator[Finding]:
    """Clock captures without a benchmark beside them: throttled or not."""
    for f in by_kind.get("clocks", []):
        if not any(b.parent == f.parent for b in by_kind.get("bench", [])):
            t = throttle(parse_clocks(f.read_text(encoding="utf-8", errors="replace"), str(f)))
            if t["throttled"]:
                yield Finding("throttled", "high", f"GPU throttled during the capture: SM clock down to "
                              f"{t['min_sm_mhz']:.0f} of {t['max_sm_mhz'] or float('nan'):.0f} MHz; "
                              f"reasons {t['reasons'] or 'clock below 90% of max'}", str(f),
                              (f"{f}: {t['slow_samples']} slow of {t['busy_samples']} busy samples",),
                              "cool/unpower-cap the GPU, lock clocks, and re-run")


def _trace_findings(trace_files: list[Path], notes: list[str]) -> Iterator[Finding]:
    """Traces: metrics that cannot be trusted."""
    for f in trace_files:
        try:
            h = kit.profile.load([f]).health()
        except (KitError, OSError, ValueError) as exc:
            notes.append(f"{f}: trace not read ({exc})")
            continue
        if h.capture["mode"] == "no GPU kernels":
            yield Finding("trace-metric", "info", "the trace has no GPU kernels (a CPU-only profile): no GPU metric "
                          "can be read from it", str(f), (f"{f}: {h.capture['kernels']} kernels",),
                          "profile with CUDA activities on")
            continue
        bad = [m for m, v in h.metrics.items()
               if v["status"] == "unreliable" and m in ("category_shares", "step_time", "allreduce_share")]
        if bad:
            v = h.metrics[bad[0]]
            yield Finding("trace-metric", "medium", f"{', '.join(bad)} of this trace unreliable: {v['reason']}",
                          str(f), (f"{f}: capture mode {h.capture['mode']}",), v["fix"])


@recorded("audit")
def audit(paths, *, compare: bool = False, traces: bool = True, host=None, source: str | None = None) -> Audit:
    """Audit the artefacts of one or more engine runs: logs, server-args dumps, ``/get_server_info``
    JSON, environment captures, ``nvidia-smi topo -m``, benchmark results with clock captures,
    stored experiments and traces. Each engine log is a run; files of the same folder that are not
    engine logs (environment, topology, NCCL logs) are read with every run of that folder.
    ``compare=True`` also flags settings that differ between the runs (the first is the reference);
    ``traces=False`` skips trace files (their health check parses them); ``source``: the engine's source
    tree (on ``host``) to name the function that decided an ignored experiment setting."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    by_kind, inputs = _classify(paths)
    notes: list[str] = []
    exp_dirs = [f.parent for f in by_kind.get("experiment", [])]
    baselines = _baselines(exp_dirs, notes)
    runs, findings = _settings_runs(by_kind.get("settings", []), inputs, exp_dirs, baselines)
    if compare:
        findings += _rules.comparison_findings(runs)
    findings += _experiment_findings(exp_dirs, host, source, notes)
    findings += _bench_findings(by_kind, notes)
    findings += _clock_findings(by_kind)
    if traces:
        findings += _trace_findings(by_kind.get("trace", []), notes)
    elif by_kind.get("trace"):
        notes.append(f"{len(by_kind['trace'])} trace file(s) not checked (traces=False)")
    return Audit(order(findings), runs, inputs, notes)

