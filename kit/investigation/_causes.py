"""Causes from the pipeline's candidates: ranked by the share of their gap they explain (beyond noise only),
each with its evidence, trust, setting and confirming experiment; what no cause explains is a line of its own."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from kit.investigation._experiments import Experiment, build
from kit.util import jsonable


@dataclass
class Cause:
    """One cause: ``what``, ``share`` of ``gap_name`` (None: not measured; 0 for an ignored setting), ``delta``
    in ``unit`` beside its ``noise``, ``evidence`` (numbers and the files they came from), ``trust``,
    ``setting`` (the setting that explains it, or ``""``), ``experiment``, ``step`` it came from."""

    what: str
    share: float | None
    delta: float
    noise: float
    unit: str
    gap_name: str
    evidence: list[str]
    trust: str
    setting: str
    experiment: Experiment
    step: str
    files: list[str] = field(default_factory=list)
    key: str = ""

    def to_dict(self) -> dict:
        return jsonable({**{k: v for k, v in self.__dict__.items() if k != "experiment"},
                         "experiment": self.experiment.to_dict()})


def rank(steps: dict, runs) -> tuple[list[Cause], list[dict]]:
    """(causes, best first: measured shares, then settings whose share no step measured, then ignored settings;
    the unexplained remainder per gap)."""
    asked = steps["settings"].data.get("asked", []) if "settings" in steps else []
    urls = steps["gap"].data.get("urls") if "gap" in steps else None
    measured, unmeasured, ignored = [], [], []
    for name in ("itl", "structure", "settings"):
        st = steps.get(name)
        for c in (st.candidates if st is not None else []):
            if urls:
                c.setdefault("urls", urls)
            exp = build(c, runs, asked)
            sets = c.get("settings") or []
            if not sets and c["source"] == "itl" and not exp.call.startswith(("kit.bench", "for url")):
                sets = [s for s in asked if s["setting"] in exp.variant]
            said = "; ".join(f"{s['setting']}: {s.get('a')!r} -> {s.get('b')!r} ({s.get('status', '')})" for s in sets)
            share = None if c.get("unmeasured") else 0.0 if c.get("ignored") else \
                c["delta"] / c["gap"] if c["gap"] else math.nan
            cause = Cause(c["what"], share, c["delta"], c["noise"], c["unit"], c["gap_name"], list(c["evidence"]),
                          c["trust"], said, exp, name, list(c.get("files", [])), c["key"])
            (ignored if c.get("ignored") else unmeasured if share is None else measured).append(cause)
    measured.sort(key=lambda c: -abs(c.share))
    remainder = []
    for name in ("itl", "structure"):
        st = steps.get(name)
        if st is None or st.status != "ran" or st.data.get("compared") is False:
            continue
        mine = [c.share for c in measured if c.step == name]
        remainder.append({"gap": st.data.get("gap") or "client ITL (mean)", "step": name,
                          "share": 1.0 - sum(mine) if mine else 1.0, "causes": len(mine)})
    gap = steps.get("gap")
    if not remainder and gap is not None and gap.status == "ran" and gap.data.get("beyond_noise") is not False:
        remainder.append({"gap": "decode tok/s", "step": "gap", "share": 1.0, "causes": 0,
                          "why": "no trace or engine step records on both sides to apportion it"})
    return measured + unmeasured + ignored, remainder
