"""``kit audit PATHS... [--json]`` and ``kit profile check TRACE... [--json]`` (registered by ``kit.cli``).

    kit audit PATHS... [--json] [--compare] [--no-traces] [--source DIR] [--fail-on high|medium|low]
    kit profile check TRACE... [--json] [--no-cache]

``audit`` reads logs, server-args dumps, ``/get_server_info`` JSON, environment captures, topology,
benchmark results with clock captures, stored experiments and traces (files or folders) and lists
silent slow paths and doubtful settings: severity, one-line verdict, evidence (file:line). ``--json``
prints ``Audit.to_dict()`` (fields in the README). Exit 0, or 3 with ``--fail-on`` when a finding is at
least that severe.

``profile check`` prints ``Profile.health()``: capture mode, linked shares, launch APIs, communication
kernels, dropped events, mixed phases, profiler overhead, and per metric usable / degraded / unreliable.
"""
from __future__ import annotations

from kit.util import print_result, progress


def register(subparsers) -> None:
    a = subparsers.add_parser("audit", help="silent slow paths, ignored settings and run validity of engine runs")
    a.add_argument("paths", nargs="+", metavar="PATH", help="files or folders: logs, dumps, env captures, "
                   "benchmark results, experiments, traces")
    a.add_argument("--json", action="store_true", help="print the audit as JSON")
    a.add_argument("--compare", action="store_true", help="also flag settings that differ between the runs")
    a.add_argument("--no-traces", action="store_true", help="do not parse trace files")
    a.add_argument("--source", help="the engine's source tree (local): name the function that overrode a setting")
    a.add_argument("--fail-on", choices=("high", "medium", "low"), help="exit 3 when a finding is this severe or more")
    a.set_defaults(func=_audit)


def register_check(psub) -> None:
    c = psub.add_parser("check", help="can this trace be trusted? capture mode and per-metric health")
    c.add_argument("traces", nargs="+", metavar="TRACE", help="one trace file per rank")
    c.add_argument("--json", action="store_true", help="print Profile.health() as JSON")
    c.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-trace cache")
    c.add_argument("--reference", nargs="+", metavar="REF",
                   help="a run of the same model and configuration with CPU ops: places graph-replayed kernels")
    c.set_defaults(func=_check)


def _audit(args) -> int:
    from kit.audit import SEVERITIES, audit  # deferred: start-up (a command loads its work only when it runs)

    with progress("auditing", None, unit="run"):
        a = audit(args.paths, compare=args.compare, traces=not args.no_traces, source=args.source)
    print_result(a, args.json)
    if args.fail_on:
        worst = SEVERITIES.index(args.fail_on)
        if any(SEVERITIES.index(f.severity) <= worst for f in a.findings):
            return 3
    return 0


def _check(args) -> int:
    from kit import profile  # deferred: start-up (a command loads its work only when it runs)

    p = profile.load(args.traces, cache=not args.no_cache, reference=getattr(args, "reference", None))
    h = p.health()
    if p.placement is not None and not args.json:
        print(repr(p.placement))
    print_result(h, args.json)
    return 0
