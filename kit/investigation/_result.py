"""``investigate(a, b)`` and :class:`Investigation`: the pipeline's steps in order, the ranked causes, what is
not explained, and the invalid runs said first."""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field

import pandas as pd

from kit.investigation import _steps
from kit.investigation._causes import Cause, rank
from kit.investigation._inputs import gather
from kit.ledger import Ledger
from kit.provenance import Evidence, provenance_of
from kit.util import call_settings, jsonable, recorded

ORDER = ("inputs", "validity", "gap", "itl", "structure", "settings", "floor")


@dataclass
class Investigation:
    """Two runs compared: ``labels``, ``steps`` (name -> :class:`Step`, in pipeline order), ``causes`` (ranked:
    measured shares first, then ignored settings), ``remainder`` (per gap, the share no cause explains),
    ``invalid`` (run -> the analyses its invalidity affects), ``headline`` (the first line said)."""

    labels: tuple[str, str]
    steps: dict
    causes: list[Cause]
    remainder: list[dict]
    invalid: dict = field(default_factory=dict)

    @property
    def ranked(self) -> list[Cause]:
        """The causes with a measured share beyond noise (ignored settings left out)."""
        return [c for c in self.causes if c.share is not None and c.share != 0 and math.isfinite(c.share)]

    @property
    def headline(self) -> str:
        a, b = self.labels
        if self.invalid:
            return "INVALID: " + "; ".join(f"{r} cannot be trusted for {', '.join(w)}"
                                           for r, w in self.invalid.items()) \
                + ": nothing those affect is ranked"
        if self.ranked:
            top = self.ranked[0]
            return (f"{b} vs {a}: top cause {top.what}: {top.share:.0%} of the {top.gap_name} gap"
                    + (f" ({top.setting})" if top.setting else ""))
        measuring = [self.steps[n] for n in ("gap", "itl", "structure") if n in self.steps]
        if measuring and all(st.status != "ran" for st in measuring):
            return (f"{b} vs {a}: nothing to compare (" + "; ".join(f"{st.name}: {st.reason}" for st in
                                                                         measuring)[:300] + ")")
        gap, said = self.steps.get("gap"), ""
        if gap is not None and gap.status == "ran":
            rel, p = gap.data["relative"], gap.data.get("p")
            said = (f" (decode tok/s {rel:+.1%}; noise not decided: one figure per side)" if p != p else
                    f" (decode tok/s {rel:+.1%}, Welch p = {p:.3g})")
        cands = [c.what for c in self.causes if c.share is None]
        if cands:
            return (f"{b} vs {a}: no cause beyond noise found{said}; candidates from the settings (share "
                    f"unknown): {'; '.join(cands[:3])}")
        return f"{b} vs {a}: no cause beyond noise{said}"

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "headline": self.headline, "invalid": self.invalid,
                "steps": [self.steps[n].to_dict() for n in ORDER if n in self.steps],
                "causes": [c.to_dict() for c in self.causes], "unexplained": self.remainder}

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this investigation: each ranked cause's share of its gap, the
        headline, the ranked table."""
        a, b = self.labels
        figs = [(f"cause_share.{c.gap_name}", c.share, c.what) for c in self.ranked]
        return {"settings": call_settings(args), "figures": figs, "label": f"{a} -> {b}",
                "facts": {"headline": self.headline, "invalid": "; ".join(self.invalid) or None},
                "tables": {"causes": self.table()}}

    def to_json(self) -> str:
        return json.dumps(jsonable(self.to_dict()), indent=1)

    def table(self):
        """The ranked causes as a DataFrame (one row per cause, then one per unexplained remainder)."""
        rows = [{"rank": i + 1, "cause": c.what, "share": c.share, "of gap": c.gap_name,
                 "delta": c.delta, "noise": c.noise, "unit": c.unit, "trust": c.trust, "setting": c.setting or "-",
                 "experiment": c.experiment.variant} for i, c in enumerate(self.causes)]
        rows += [{"rank": None, "cause": "not explained", "share": r["share"], "of gap": r["gap"]}
                 for r in self.remainder]
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        lines = [self.headline, ""]
        for n, s in ((n, self.steps[n]) for n in ORDER if n in self.steps):
            lines.append(f"[{n}] {s.status}" + (f": {s.reason}" if s.reason else "") + f"  ({s.calls})")
            lines += [f"    {x}" for x in s.lines]
        lines.append("")
        if not self.ranked and not self.invalid:
            g = self.steps.get("gap")
            within = g is not None and g.status == "ran" and g.data.get("beyond_noise") is False
            lines.append("causes: none beyond noise" + (": the gap is within noise" if within else "")
                         + ("; below: settings, with no share of the gap" if self.causes else ""))
        for i, c in enumerate(self.causes, 1):
            share = "share unknown" if c.share is None else f"{c.share:.0%} of the {c.gap_name} gap" \
                if c.share else "explains none of the gap"
            lines.append(f"{i}. {c.what}: {share} ({c.delta:+,.2f} {c.unit}, noise {c.noise:,.2f}; trust {c.trust})"
                         if c.unit else f"{i}. {c.what}: {share} (trust {c.trust})")
            if c.setting:
                lines.append(f"   setting: {c.setting}")
            lines += [f"   evidence: {e}" for e in c.evidence]
            lines.append(f"   experiment: {c.experiment}")
        for r in self.remainder:
            lines.append(f"not explained: {r['share']:.0%} of the {r['gap']} gap ({r['causes']} cause(s) beyond noise"
                         + (f"; {r['why']}" if r.get("why") else "") + ")")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(repr(self)) + "</pre>"

    def record(self, ledger, *, prefix: str = "AB", source: str = "kit investigate") -> list[str]:
        """Each cause into ``ledger`` (a :class:`kit.ledger.Ledger` or its path) as an open hypothesis with its
        evidence, numbers and files; returns the ids (``AB1``, ``AB2`` ...)."""
        led = ledger if isinstance(ledger, Ledger) else Ledger.open(ledger)
        ids = [f"{prefix}{i}" for i in range(1, len(self.causes) + 1)]
        a, b = self.labels
        for hid, c in zip(ids, self.causes):
            share = "may explain part of the gap (share unknown: no step could apportion it)" if c.share is None else \
                "explains none of the gap (ignored)" if c.share == 0 else \
                f"explains {c.share:.0%} of the {c.gap_name} gap"
            prov = [Evidence(f, provenance_of(f), c.step) for f in list(dict.fromkeys(c.files))[:20]]
            led.record(hid, statement=f"{b} vs {a}: {c.what} {share}", test=c.experiment.call,
                       evidence="; ".join(c.evidence), verdict="open", source=source, provenance=prov,
                       numbers={"share": None if c.share is None or not math.isfinite(c.share) else round(c.share, 4),
                                "delta": round(c.delta, 4), "noise": None if c.noise != c.noise else round(c.noise, 4),
                                "unit": c.unit, "trust": c.trust})
        return ids


@recorded("investigate")
def investigate(a, b, *, labels: tuple[str, str] | None = None, ledger=None) -> Investigation:
    """Why is ``b`` slower (or faster) than ``a``? Each run is a folder, a file, files joined by ``,`` or a list
    of paths (see the package docstring). Every step of the pipeline is named in the result; a step whose inputs
    are missing is skipped with the reason; an invalid run is said first and nothing it affects is ranked.
    ``ledger``: a :class:`kit.ledger.Ledger` or path: each cause is recorded there as an open hypothesis."""
    la, lb = labels or ("A", "B")
    runs = [gather(a, la), gather(b, lb)]
    pair = tuple(_steps.run_settings(r) for r in runs)
    steps = {"inputs": _steps.inputs(runs), "validity": _steps.validity(runs)}
    invalid = steps["validity"].data["invalid"]
    steps["gap"] = _steps.gap(runs, invalid)
    steps["itl"] = _steps.itl(runs, invalid, steps["gap"].data.get("ms_per_token"))
    steps["settings"] = _steps.settings(runs, pair)
    steps["structure"] = _steps.structure(runs, pair if all(p is not None for p in pair) else None, invalid)
    steps["floor"] = _steps.floor(runs, pair, steps["gap"])
    causes, remainder = rank(steps, runs)
    inv = Investigation((la, lb), steps, causes, remainder, invalid)
    if ledger is not None:
        inv.record(ledger)
    return inv
