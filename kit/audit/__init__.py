"""Did the change take effect, and can this run be trusted? Effective settings, a slow-path audit and
run validity for every log, benchmark, experiment and trace.

    import kit
    a = kit.audit.audit(["logs/", "server/", "bench/"])   # or: kit audit PATHS... [--json]
    a.findings            # Finding: code, severity, one-line verdict, evidence (file:line: text), fix
    a.clean               # nothing flagged (info findings are context, not flags)
    kit.audit.experiment_effects("experiments/NAME", source="engine/pkg")  # took effect / ignored / unknown
    kit.audit.check_run("bench.json", "clocks.csv")   # Validity: failed, short outputs, warm-up, seeded, clocks

The settings of a run are what the engine itself reported (``kit.logs.settings``). A variant of an experiment
whose effective settings equal the baseline's is "no effect: the engine ignored X", and :func:`decider` names
the engine function that overrode it (``kit.source``). Trace trust is ``kit.profile.Profile.health()``.

Files:

- ``_findings.py``: Finding and Audit (table, JSON, text and HTML views)
- ``_rules.py``: the rules over one run's settings and over runs compared
- ``_audit.py``: audit(paths): artefacts found, grouped into runs, checked
- ``_effect.py``: effect / experiment_effects / decider: did each variant take effect
- ``_capture.py``: capture_settings: a live engine's ``/get_server_info`` and ``/proc/PID/environ`` saved for the audit
- ``_validity.py``: ClockSampler (nvidia-smi during a run), parse_clocks, check_run -> Validity
"""
from __future__ import annotations

from kit.audit._audit import audit
from kit.audit._capture import capture_settings
from kit.audit._effect import Decider, Effect, Effects, decider, effect, experiment_effects
from kit.audit._findings import SEVERITIES, Audit, Finding
from kit.audit._rules import DEBUG_VARIABLES
from kit.audit._validity import CLOCK_QUERY, ClockSampler, Validity, check_run, parse_clocks, throttle
from kit.util import publish

__all__ = ["Audit", "CLOCK_QUERY", "ClockSampler", "DEBUG_VARIABLES", "Decider", "Effect", "Effects", "Finding",
           "SEVERITIES", "Validity", "audit", "capture_settings", "check_run", "decider", "effect",
           "experiment_effects", "parse_clocks", "throttle"]

publish(globals(), __all__)
