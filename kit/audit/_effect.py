"""Did a variant take effect? Each variant's effective settings against the baseline's.

For each setting a variant changes (a flag or an environment variable) the verdict is:

- ``took effect``: the engine reported a different value than in the baseline (both lines given);
- ``ignored``: the engine reported the same value in both runs: "no effect: the engine ignored X";
- ``unknown``: one of the runs did not report the setting (and which capture would).

Where the deciding evidence is a line the engine printed, :func:`decider` finds the message in
the engine's installed source with ``kit.source`` and names the function that decided it and the
condition above the line (the predicate that overrides the flag).
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import kit.profile
from kit.logs import Settings
from kit.logs import settings as read_settings
from kit.remote import connect

_PREFIX = re.compile(r"^(?:\[[^\]]*\]\s*|\([^)]*\)\s*|(?:DEBUG|INFO|WARNING|ERROR)\s+\d{2}-\d{2} [\d:]+\s*"
                     r"(?:\[[^\]]*\]\s*)?)+")
_DUMP = re.compile(r"\((?:server_args dump|vLLM engine config|get_server_info JSON|launch note|NCCL echo|"
                   r"environment capture|/proc/PID/environ)\)$")
_SENTINEL = re.compile(r"[^\w\s'.,:-]")


@dataclass(frozen=True)
class Decider:
    """Where the engine's source decides a setting: the function, the file and line of the message,
    and the condition (the nearest ``if`` above it)."""

    function: str
    path: str
    line: int
    condition: str
    predicates: tuple[str, ...] = ()

    def __str__(self) -> str:
        pred = f"; {', '.join(self.predicates)}" if self.predicates else ""
        return f"{self.function} ({self.path}:{self.line}: {self.condition}{pred})"


@dataclass
class Effect:
    """One changed setting of one variant: ``status`` (took effect / ignored / unknown), ``verdict``
    (one line), ``baseline`` and ``variant`` values, their ``evidence`` and the source ``decider``."""

    variant: str
    setting: str
    key: str | None
    status: str
    verdict: str
    baseline: object = None
    variant_value: object = None
    evidence: tuple[str, ...] = ()
    decider: Decider | None = None

    def to_dict(self) -> dict:
        return {"variant": self.variant, "setting": self.setting, "key": self.key, "status": self.status,
                "verdict": self.verdict, "baseline": _plain(self.baseline), "variant_value": _plain(self.variant_value),
                "evidence": list(self.evidence), "decider": str(self.decider) if self.decider else None}


def _plain(v):
    return sorted(v) if isinstance(v, set) else v


# normalised key -> the kernel evidence of a trace that shows the same decision
KERNEL_KEYS = {"attention_backend": "attention", "custom_all_reduce": "allreduce", "cuda_graph": "graph"}


def _by_kernels(name: str, setting: str, key: str, kb: dict, kv: dict) -> Effect:
    what = KERNEL_KEYS[key]
    a, b = kb[what], kv[what]
    show = (lambda x: "graph replay" if x else "no graph replay") if what == "graph" else \
        (lambda x: ", ".join(sorted(x)[:3]) + (" ..." if len(x) > 3 else "") if x else "none")
    ev = (f"{kb['where']}: {what} kernels: {show(a)}", f"{kv['where']}: {what} kernels: {show(b)}")
    status, verdict = ("ignored", f"no effect: the engine ignored {setting} (the same {what} kernels ran in both "
                                  f"runs: {show(a)})") if a == b else \
        ("took effect", f"took effect: {what} kernels {show(a)} -> {show(b)}")
    return Effect(name, setting, key, status, verdict, a, b, ev)


def effect(baseline, variant, setting: str, *, name: str = "variant", kernels: tuple | None = None) -> Effect:
    """The verdict for one changed ``setting`` (``--flag`` or ``ENV_NAME``) between two runs'
    :class:`kit.logs.Settings` (see the module docstring). ``kernels``: the two runs' kernel evidence
    (``_kernels``), which decides where the logs do not report the setting."""
    key = Settings.key_for(setting)
    e = _effect(baseline, variant, setting, name, key)
    if e.status == "unknown" and key in KERNEL_KEYS and kernels and all(kernels):
        return _by_kernels(name, setting, key, *kernels)
    return e


def _effect(baseline, variant, setting: str, name: str, key: str | None) -> Effect:
    if key is None:
        return Effect(name, setting, None, "unknown", f"unknown: the kit has no engine report to read for {setting}",
                      evidence=())
    eb, ev = baseline.reported(key), variant.reported(key)
    if key.startswith("env:") and eb is None and ev is not None:
        # an environment variable: the engine's own echo or the process environment is the report
        status, verdict = "took effect", (f"took effect: {setting}={ev.value} in the engine's environment, unset "
                                          "in the baseline's")
    elif eb is None or ev is None:
        status, verdict = "unknown", (f"unknown: {'the baseline' if eb is None else 'the variant'} did not report "
                                      f"{key} (capture the server log with its argument dump, /get_server_info or "
                                      "/proc/PID/environ)")
    elif eb.value == ev.value:
        status, verdict = "ignored", f"no effect: the engine ignored {setting} ({key} is {ev.value!r} in both runs)"
    else:
        status, verdict = "took effect", f"took effect: {key} {eb.value!r} -> {ev.value!r}"
    return Effect(name, setting, key, status, verdict, eb and eb.value, ev and ev.value,
                  tuple(str(e) for e in (eb, ev) if e is not None))


def decider(host, source: str, evidence_text: str) -> Decider | None:
    """Find the engine message of ``evidence_text`` in the source tree ``source`` on ``host`` and name
    the function that printed it and the condition above it; None when not found."""
    import kit.source  # deferred: its pygments is not for the clock sampler that kit.bench imports from here

    words = _PREFIX.sub("", evidence_text.strip()).split()   # the engine's message without the logger's prefix
    if len(words) < 3:
        return None
    for n in (6, 5, 4, 3):  # the longest plain-text head of the message the source holds verbatim
        head = _SENTINEL.split(" ".join(words[:n]))[0].strip()
        if len(head) < 12:
            continue
        try:
            hits = kit.source.grep(host, source, head, regex=False)
        except Exception:  # noqa: BLE001 - a missing tree or grep failure: no decider, said by the caller
            return None
        if hits:
            m = hits[0]
            scope = kit.source.enclosing(host, m.path, m.line)
            cond = ""
            lo = scope.start if scope else max(1, m.line - 15)
            sl = kit.source.slice(host, m.path, max(lo, m.line - 15), m.line)
            for _, text in reversed(sl.numbered()):
                if re.match(r"\s*(?:el)?if\b", text):
                    cond = text.strip()
                    break
            preds = []   # the functions the condition calls, each with where kit.source.definition finds it
            for name in dict.fromkeys(re.findall(r"\b([A-Za-z_]\w*)\(", cond)):
                if name in {"int", "str", "len", "bool", "float", "getattr", "isinstance", "get", "any", "all"}:
                    continue
                try:
                    d = kit.source.definition(host, name, near=m.path)
                    preds.append(f"{name}() defined at {d.path}:{d.line}")
                except Exception:  # noqa: BLE001 - a builtin or a name the source cannot resolve: named without a place
                    preds.append(f"{name}()")
            return Decider(scope.qualname if scope else "<module>", m.path, m.line, cond, tuple(preds))
    return None


@dataclass(repr=False)
class Effects:
    """The effect verdicts of every variant of a stored experiment (``table()``, ``to_dict()``)."""

    name: str
    effects: list[Effect]
    notes: list[str]

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"variant": e.variant, "setting": e.setting, "status": e.status, "verdict": e.verdict,
                              "decided by": str(e.decider) if e.decider else "",
                              "evidence": e.evidence[-1] if e.evidence else ""} for e in self.effects],
                            columns=["variant", "setting", "status", "verdict", "decided by", "evidence"])

    def to_dict(self) -> dict:
        return {"experiment": self.name, "effects": [e.to_dict() for e in self.effects], "notes": list(self.notes)}

    def __repr__(self) -> str:
        lines = [f"Effects({self.name}: {len(self.effects)} changed setting(s))"]
        lines += [f"  {e.variant}: {e.verdict}" for e in self.effects] + [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return f"<div><b>{html.escape(self.name)}</b>{self.table().to_html(index=False)}</div>"


def _variant_files(d: Path) -> list[Path]:
    """A variant's engine reports: its ``server.log`` (one engine per variant) or, with one fresh engine
    per run, the first run's (``rep0/server.log``), plus ``server_info.json`` / ``environ`` captures."""
    for where in [d] + sorted(p for p in d.glob("rep*") if p.is_dir()):
        found = [p for p in (where / "server.log", where / "server_info.json", where / "environ") if p.is_file()]
        if found:
            return found
    return []


def _kernels(vdir: Path, notes: list) -> dict | None:
    """Which attention and all-reduce kernel families ran in a variant's first trace, and whether kernels were
    replayed from CUDA graphs (``{"attention": set, "allreduce": set, "graph": bool, "where": str}``), or None."""
    traces = (sorted(vdir.glob("traces/*.json.gz")) or sorted(vdir.glob("rep*/traces/*.json.gz")))[:1]
    if not traces:
        return None
    try:
        k = kit.profile.load(traces).kernels
        if not len(k) or "category" not in k:
            return None  # a CPU-only profile: no kernel evidence
        cat, names, family = k["category"].astype(str), k["name"].astype(str), kit.profile.kernel_family
        return {"attention": {family(n)[:80] for n in names[cat == "attention"]},
                "allreduce": {family(n)[:80] for n in names[cat == "allreduce"]},
                "graph": bool(k["graph"].astype(bool).any()), "where": str(traces[0])}
    except Exception as exc:  # noqa: BLE001 - a trace that cannot be read decides nothing; said in notes
        notes.append(f"{traces[0]}: trace not read ({exc})")
        return None


def experiment_effects(directory: str | Path, *, host=None, source: str | None = None) -> Effects:
    """Effect verdicts for every variant of an experiment stored under ``directory`` (``plan.json`` and
    one folder per variant with its ``server.log``). ``source``: the engine's source tree on ``host``
    (default: local) to name the function that decided an ignored setting."""
    d = Path(directory)
    plan = json.loads((d / "plan.json").read_text(encoding="utf-8"))
    variants = plan.get("variants", [])
    base = next((v for v in variants if v.get("baseline")), None)
    notes: list[str] = []
    if base is None:
        return Effects(plan.get("name", d.name), [], ["no baseline variant in plan.json"])
    files = _variant_files(d / base["slug"])
    if not files:
        notes.append(f"{base['slug']}: no server.log stored: only traces can decide")
    sb = read_settings(files) if files else Settings()
    kb = _kernels(d / base["slug"], notes)
    out = []
    if source is not None and host is None:
        host = connect("local")
    for v in variants:
        if v.get("baseline"):
            continue
        vf = _variant_files(d / v["slug"])
        if not vf:
            notes.append(f"{v['slug']}: no server.log stored")
        sv = read_settings(vf) if vf else Settings()
        changed = [k for k, val in v.get("settings", {}).items() if val != base.get("settings", {}).get(k)]
        kv = _kernels(d / v["slug"], notes) if kb else None
        for setting in changed:
            e = effect(sb, sv, setting, name=v["label"], kernels=(kb, kv) if kb and kv else None)
            if e.status == "ignored" and source is not None:
                for text in e.evidence:
                    line = text.split(": ", 1)[1] if ": " in text else text
                    if _DUMP.search(line):
                        continue  # an argument dump says what was asked, not who decided
                    e.decider = decider(host, source, line)
                    if e.decider:
                        e.verdict += (f"; decided by {e.decider.function} ({e.decider.path}:{e.decider.line}, "
                                      f"under `{e.decider.condition}`"
                                      + (f", {'; '.join(e.decider.predicates)}" if e.decider.predicates else "") + ")")
                        break
            out.append(e)
    return Effects(plan.get("name", d.name), out, notes)
