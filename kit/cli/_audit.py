"""``kit audit PATHS... [--json] [--compare] [--no-traces] [--source DIR] [--fail-on high|medium|low]``.

``audit`` reads logs, server-args dumps, ``/get_server_info`` JSON, environment captures, topology,
benchmark results with clock captures, stored experiments and traces (files or folders) and lists
silent slow paths and doubtful settings: severity, one-line verdict, evidence (file:line). ``--json``
prints ``Audit.to_dict()`` (fields in the README). Exit 0, or 3 with ``--fail-on`` when a finding is at
least that severe.
"""
from __future__ import annotations

from kit.audit import SEVERITIES, audit
from kit.util import print_result, progress


def register(a) -> None:
    a.add_argument("paths", nargs="+", metavar="PATH", help="files or folders: logs, dumps, env captures, "
                   "benchmark results, experiments, traces")
    a.add_argument("--json", action="store_true", help="print the audit as JSON")
    a.add_argument("--compare", action="store_true", help="also flag settings that differ between the runs")
    a.add_argument("--no-traces", action="store_true", help="do not parse trace files")
    a.add_argument("--source", help="the engine's source tree (local): name the function that overrode a setting")
    a.add_argument("--fail-on", choices=("high", "medium", "low"), help="exit 3 when a finding is this severe or more")
    a.set_defaults(func=_audit)


def _audit(args) -> int:
    with progress("auditing", None, unit="run"):
        a = audit(args.paths, compare=args.compare, traces=not args.no_traces, source=args.source)
    print_result(a, args.json)
    if args.fail_on:
        worst = SEVERITIES.index(args.fail_on)
        if any(SEVERITIES.index(f.severity) <= worst for f in a.findings):
            return 3
    return 0
