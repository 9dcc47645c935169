"""Finding and Audit: what an audit reports, with severity, a one-line verdict and its evidence."""
from __future__ import annotations

import html
import json
import os
from dataclasses import asdict, dataclass, field

import pandas as pd

from kit.util import call_settings, clip

SEVERITIES = ("high", "medium", "low", "info")


@dataclass(frozen=True)
class Finding:
    """One silent slow path or doubtful setting: a stable ``code`` (``graph-coverage``, ``throttled`` ...: see
    ``_rules.py`` and ``_audit.py``), its ``severity`` (high: numbers measured under it are wrong for the question;
    medium: a slow path to confirm; low: worth knowing; info: context, not a defect), the ``run`` (file or folder)
    it concerns, ``evidence`` (``file:line: text``) and the ``fix`` that would remove or decide it."""

    code: str
    severity: str
    verdict: str
    run: str
    evidence: tuple[str, ...] = ()
    fix: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "evidence": list(self.evidence)}


@dataclass
class Audit:
    """The findings of one audit (most severe first), the runs read and the settings of each.

    ``flagged``: findings other than ``info``. ``to_dict()`` is the ``kit audit --json`` output."""

    findings: list[Finding]
    runs: dict = field(default_factory=dict)       # run -> kit.logs Settings
    inputs: dict = field(default_factory=dict)     # file -> what it was read as
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[Finding]:
        return [f for f in self.findings if f.severity != "info"]

    @property
    def clean(self) -> bool:
        return not self.flagged

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}

    def table(self) -> pd.DataFrame:
        rows = [{"severity": f.severity, "code": f.code, "run": f.run, "verdict": f.verdict,
                 "evidence": f.evidence[0] if f.evidence else "", "fix": f.fix} for f in self.findings]
        return pd.DataFrame(rows, columns=["severity", "code", "run", "verdict", "evidence", "fix"])

    def to_dict(self) -> dict:
        return {"clean": self.clean, "counts": self.counts,
                "findings": [f.to_dict() for f in self.findings],
                "runs": {r: s.to_dict() for r, s in self.runs.items()}, "inputs": dict(self.inputs),
                "notes": list(self.notes)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this audit: findings per severity and the findings table."""
        rows = [{"code": f.code, "severity": f.severity, "verdict": f.verdict, "run": f.run} for f in self.findings]
        paths = args.get("paths")
        return {"inputs": [paths] if isinstance(paths, str) else list(paths or []), "settings": call_settings(args),
                "figures": [(f"findings.{k}", v) for k, v in self.counts.items() if v],
                "tables": {"findings": pd.DataFrame(rows, columns=["code", "severity", "verdict", "run"])}}

    def __repr__(self) -> str:
        head = (f"Audit: {len(self.runs)} run(s), {len(self.inputs)} file(s): "
                + ("nothing flagged" if self.clean else ", ".join(f"{n} {s}" for s, n in self.counts.items() if n)))
        lines = [head]
        for run, st in self.runs.items():   # what each run was read as: its engine and what each file held
            read = "; ".join(f"{os.path.basename(k)}: {v}" for k, v in st.sources.items())
            lines.append(clip(f"run {os.path.basename(run) or run}: engine {st.engine or 'not named'} ({read})", 160))
        for f in self.findings:
            lines.append(f"[{f.severity}] {f.code}: {f.verdict}")
            lines += [f"    {e}" for e in f.evidence[:3]]
            if f.fix:
                lines.append(f"    fix: {f.fix}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colour = {"high": "#ef9a9a", "medium": "#ffe0b2", "low": "#fff9c4", "info": "#eeeeee"}
        rows = "".join(
            f"<tr style='background:{colour[f.severity]}'><td>{f.severity}</td><td>{html.escape(f.code)}</td>"
            f"<td>{html.escape(f.verdict)}</td><td><code>{'<br>'.join(html.escape(e) for e in f.evidence[:3])}"
            f"</code></td><td>{html.escape(f.fix)}</td></tr>" for f in self.findings)
        head = html.escape(repr(self).splitlines()[0])
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        table = (f"<table><thead><tr><th>severity</th><th>code</th><th>verdict</th><th>evidence</th><th>fix</th>"
                 f"</tr></thead><tbody>{rows}</tbody></table>") if rows else ""
        return f"<div><b>{head}</b>{table}{'<ul>' + notes + '</ul>' if notes else ''}</div>"


def order(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.run, f.code))
