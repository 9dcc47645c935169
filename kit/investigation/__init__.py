"""Why is A slower than B? Two runs -> ranked, evidenced causes and the experiment that would confirm each.

    import kit
    inv = kit.investigate("runs/vllm", "runs/sglang")      # or: kit investigate A B [--json] [--ledger L]
    inv                    # the pipeline's steps, the ranked causes, what is not explained
    inv.causes             # Cause: what, share of the gap, evidence (numbers and files), trust, setting, experiment
    inv.record(ledger)     # each cause as an open hypothesis with its evidence

A run is a folder (or a file, or several joined by ``,``) holding what was captured: traces (a ``reference/``
folder beside graph replays places their kernels), engine logs and settings captures, benchmark results, the
model's ``config.json`` and ``nvidia-smi --query-gpu`` output. Each step calls one of the kit's analyses and
says which: ``inputs`` (``kit.audit``), ``validity`` (``kit.audit``: an invalid run is said first, nothing it
affects is ranked), ``gap`` (decode tok/s with 95 % intervals and Welch's test, ITL p50/p99), ``itl``
(``kit.bench.reconcile``, part by part), ``structure`` (``kit.profile.diff_structure``), ``settings``
(``kit.logs.settings``, ``kit.audit.effect``), ``floor`` (``kit.models.decode_floor``).

Files:

- ``_inputs.py``: a run's files by what they hold (``RunInputs``)
- ``_steps.py``: the pipeline's steps, each a :class:`Step` (ran / skipped with the reason)
- ``_causes.py``: causes from the steps, ranked by share of their gap beyond noise; the unexplained remainder
- ``_experiments.py``: the confirming experiment of a cause (a ``kit.experiment`` call checked by ``kit.live.plan``)
- ``_result.py``: :class:`Investigation` (text, HTML, JSON; ``record`` into the ledger) and ``investigate``
"""
from __future__ import annotations

from kit.investigation._causes import Cause
from kit.investigation._experiments import Experiment
from kit.investigation._result import Investigation, investigate
from kit.investigation._steps import Step
from kit.util import publish

__all__ = ["Cause", "Experiment", "Investigation", "Step", "investigate"]

publish(globals(), __all__)
