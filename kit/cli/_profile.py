"""``kit profile summary|compare|ranks|diff|check|capture``: traces from a shell (each option in its ``--help``).

``diff`` is ``kit.profile.diff_structure`` (node by node, layer kind x operation family, with the settings that
differ in the two runs' logs beside the nodes they can explain); ``compare`` is ``kit.profile.compare`` (the
step-time difference split into parts that add up to it, then the CPU side of both runs; ``--json`` prints
``Comparison.to_dict()``, README). With ``--baseline NAME`` run A is the named baseline of the run catalogue
(``kit runs baseline``) and the answer is the regression gate's verdict (``kit.runs.profile_gate``, whose module
says how it decides); ``--fail-on-regression`` exits 3 on a regression and 4 when the gate could not decide,
``--html FILE`` writes the one-page diff, ``--json`` prints ``Gate.to_dict()``.

``--json`` (summary) prints ``{"files", "ranks", "kernel_time_us", "wall_time_us", "steps", "categories":
[{"category", "time_us", "share_of_kernel", "share_of_wall"}], "warnings"}`` (shares as fractions;
the ``idle`` row has ``share_of_kernel: null``), then ``decided_by`` (kernel time per kind of
evidence that decided the categories), ``cpu`` (the CPU side of the phase: ``verdict`` GPU-bound /
launch-bound / host-bound / undecided with its figures, ``per_rank``, the longest CPU-caused
``gaps``), ``categories_unavailable`` and ``collectives`` where they apply; the text output ends
with the verdict line and those gaps. ``--by module`` / ``--by layer`` print (or add as ``modules`` /
``layers`` in JSON) the kernel time per module class / per layer index (with each layer's kind:
attention, ssm, moe, mlp) of traces recorded with module frames. ``--check-attribution`` attributes
the traces again from their CPU ops alone (module and function frames left out) and prints how much
kernel time gets the same category and each category's share both ways (JSON: ``check_attribution``
with ``agreement``, ``categories`` [{"category", "with_frames", "without_frames", "difference"}],
``moves``, ``undecided_without``, ``warnings``). ``--reference REF...`` (summary, check; compare:
``--reference-a``/``--reference-b``, one per side) places the kernels of graph replays and traces
without stack by alignment with a run of the same model and configuration (``kit.profile.load(...,
reference=)``): the text output adds the placement line (score, placed and unplaced shares, or why the
reference was refused), JSON a ``placement`` object. ``--by layer`` on a trace with no layers (no
module frames, no reference) finds them by repetition of the kernel sequence and says how sure.
"""
from __future__ import annotations

import argparse
import os
import sys

from kit import profile
from kit.errors import KitError
from kit.stats import is_nan
from kit.util import frame_records, print_json, print_result, progress

_STEP_MARKER = ("the name of the range that is one step of the serving loop (numbers in names match any number: "
                "ProfilerStep finds ProfilerStep#3; a module class finds its calls); default: the engines' markers, "
                "else a repeated range that tiles the run, ProfilerStep#N, graph launches")


class _EngineNames:
    """``capture --engine``'s choices, read from the engine registry when argparse first asks (a help, an
    ``--engine`` given; the option names a ``metavar``, so adding it lists nothing): building the ``kit profile``
    parser then loads no engine, and a summary's parse starts sooner."""

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())

    @staticmethod
    def _names() -> list[str]:
        import kit.engines  # deferred: the engines load only when capture runs or lists them (see the class)

        return kit.engines.names()


def register(prof) -> None:
    psub = prof.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    s = psub.add_parser("summary", help="kernel-category shares, idle, comm and AllReduce spread of traces")
    s.add_argument("traces", nargs="+", metavar="TRACE",
                   help="one trace file per rank (.json, .json.gz, nsys csv/sqlite)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--phase", choices=("decode", "prefill", "all"), default="all",
                   help="which steps: decode, prefill or all (default all)")
    s.add_argument("--rules", help="TOML file of extra category rules ([[rule]] category/pattern)")
    s.add_argument("--top", type=int, default=5, help="top kernels per category (text output)")
    s.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-trace cache")
    s.add_argument("--by", choices=("category", "module", "layer"), default="category",
                   help="module: kernel time per module class; layer: per layer index (traces with module frames)")
    s.add_argument("--reference", nargs="+", metavar="REF",
                   help="a run of the same model and configuration with CPU ops (ideally with_stack): places "
                        "graph-replayed kernels and kernels of traces without stack by alignment")
    s.add_argument("--step-marker", metavar="NAME", help=_STEP_MARKER)
    s.add_argument("--check-attribution", action="store_true",
                   help="also attribute without the Python frames and report how much kernel time agrees "
                        "(traces recorded with with_stack=True)")
    s.set_defaults(func=_summary)
    c = psub.add_parser("compare", help="where the step-time difference of two runs goes (A... -- B...)")
    c.add_argument("traces", nargs=argparse.REMAINDER, metavar="A... -- B...",
                   help="run A's trace files (one per rank), then --, then run B's")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.add_argument("--phase", choices=("decode", "prefill", "all"), default="decode",
                   help="which steps to compare: decode, prefill or all (default decode)")
    c.add_argument("--labels", nargs=2, metavar=("A", "B"), help="names of the two runs")
    c.add_argument("--step-ms", nargs=2, type=float, metavar=("A_MS", "B_MS"),
                   help="step times measured outside the profiler (ms): the difference to explain; with --baseline "
                   "the baseline's and this run's, which the gate judges")
    c.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-trace cache")
    c.add_argument("--step-marker", metavar="NAME", help=_STEP_MARKER)
    c.add_argument("--baseline", metavar="NAME", help="run A is this named baseline of the run catalogue "
                   "(kit runs baseline): give run B's traces only; prints the regression gate's verdict")
    c.add_argument("--fail-on-regression", action="store_true", help="with --baseline: exit 3 on a regression, "
                   "4 when the gate cannot decide (inconclusive: it says why)")
    c.add_argument("--threshold", type=float, default=0.02, help="with --baseline: the smallest regression that "
                   "counts, as a fraction of the baseline's step time (default 0.02)")
    c.add_argument("--html", metavar="FILE", help="with --baseline: write the one-page HTML diff here")
    c.set_defaults(func=_compare)
    _register_diff(psub)
    r = psub.add_parser("ranks", help="many ranks of one job: per-rank step time, the straggler and where, "
                        "collective wait skew")
    r.add_argument("traces", nargs="+", metavar="TRACE", help="one trace per rank: files, or HOST:/path/rank*.json.gz "
                   "(parsed on the host, hosts in parallel)")
    r.add_argument("--phase", choices=("decode", "prefill", "all"), default="decode",
                   help="which steps (default decode)")
    r.add_argument("--json", action="store_true", help="print per_rank, straggler, where and collective_skew as JSON")
    r.set_defaults(func=_ranks)
    c = psub.add_parser("check", help="can this trace be trusted? capture mode and per-metric health")
    c.add_argument("traces", nargs="+", metavar="TRACE", help="one trace file per rank")
    c.add_argument("--json", action="store_true", help="print Profile.health() as JSON")
    c.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-trace cache")
    c.add_argument("--reference", nargs="+", metavar="REF",
                   help="a run of the same model and configuration with CPU ops: places graph-replayed kernels")
    c.set_defaults(func=_check)
    _register_capture(psub)


def _summary(args) -> int:
    # start parsing big traces in worker processes first: the pandas import below then overlaps it
    with profile.prefetch(args.traces, cache=not args.no_cache, rules=args.rules) as pending:
        with progress("parsing", _bytes(args.traces)) as bar:
            p = profile.load(args.traces, rules=args.rules, cache=not args.no_cache, prefetched=pending,
                             reference=args.reference, step_marker=args.step_marker)
            bar.update(bar.total or 0)
    by = args.by
    found = p.find_layers() if by == "layer" and not (p.kernels["layer"] >= 0).any() else None
    s = p.summary(args.phase, top=args.top)
    check = None
    if args.check_attribution:
        check = profile.check_attribution(args.traces, rules=args.rules, phase=args.phase, cache=not args.no_cache)
    if args.json:
        d = s.to_dict()
        if check is not None:
            d["check_attribution"] = check.to_dict()
        if p.placement is not None:
            d["placement"] = _placement_dict(p.placement)
        if found is not None:
            d["layers_found"] = {"layers": found.layers, "confidence": found.confidence, "how": found.how}
        if by != "category":
            d["modules" if by == "module" else "layers"] = frame_records(s.modules if by == "module" else s.layers)
        print_json(d)
        return 0
    if p.placement is not None and (not p.placement.refused or by != "category"):
        # a refusal is one of the summary's warnings, printed below with it: said once
        print(p.placement.provenance if not p.placement.refused else repr(p.placement))
    if found is not None:
        print(f"layers by repetition of the kernel sequence (no module frames, no reference): {found!r}")
    if by != "category":
        rc = _print_modules(s, by)
        if check is not None:
            print(repr(check))
        return rc
    if p.placement is not None and not p.placement.refused:   # a refusal was printed above, once
        print(repr(p.placement))
    print(repr(s))
    if len(s.top):
        print("top kernels:")
        for r in s.top.itertuples():
            print(f"  {r.category:<18} {r.time_us:>12,.1f} us x{r.calls:<6} {r.name[:100]}")
    if check is not None:
        print(repr(check))
    return 0


def _bytes(paths) -> int | None:
    """The traces' total size for the progress bar (None when one is not a local file)."""
    try:
        return sum(os.path.getsize(p) for p in paths)
    except OSError:
        return None


# compare's options given after its traces (argparse reads none after the first trace): attribute, values, type
_LATE = {"--json": ("json", 0, None), "--no-cache": ("no_cache", 0, None),
         "--fail-on-regression": ("fail_on_regression", 0, None), "--phase": ("phase", 1, str),
         "--baseline": ("baseline", 1, str), "--html": ("html", 1, str), "--threshold": ("threshold", 1, float),
         "--reference-a": ("reference_a", 1, str), "--reference-b": ("reference_b", 1, str),
         "--labels": ("labels", 2, str), "--step-ms": ("step_ms", 2, float)}


def _split(tokens: list[str], args) -> tuple[list[str], list[str]] | None:
    """Traces of A and B from ``A... -- B...``; options given after the traces (:data:`_LATE`) are read here too."""
    rest, i = [], 0
    while i < len(tokens):
        attr, n, kind = _LATE.get(tokens[i], (None, 0, None))
        if attr is None or i + n >= len(tokens):
            rest.append(tokens[i])
            i += 1
            continue
        values = [kind(v) for v in tokens[i + 1:i + 1 + n]]
        setattr(args, attr, True if n == 0 else values[0] if n == 1 else values)
        i += n + 1
    if args.baseline:
        return ([], rest) if rest and "--" not in rest else None
    if rest.count("--") != 1:
        return None
    k = rest.index("--")
    a, b = rest[:k], rest[k + 1:]
    return (a, b) if a and b else None


def _compare(args) -> int:
    ab = _split(list(args.traces), args)
    if ab is not None and args.baseline:
        return _gate(args, ab[1])
    if ab is None and args.baseline:
        print("kit profile compare --baseline NAME: give this run's traces only (no --)", file=sys.stderr)
        return 2
    if ab is None:
        print("kit profile compare: give run A's traces, then --, then run B's (kit profile compare a.json.gz -- "
              "b.json.gz)", file=sys.stderr)
        return 2
    if args.phase not in ("decode", "prefill", "all"):
        print(f"kit profile compare: --phase must be decode, prefill or all, not {args.phase!r}", file=sys.stderr)
        return 2

    try:
        with progress("parsing", _bytes(ab[0] + ab[1])) as bar:
            pa = profile.load(ab[0], cache=not args.no_cache, reference=getattr(args, "reference_a", None),
                              step_marker=args.step_marker)
            bar.update(_bytes(ab[0]) or 0)
            pb = profile.load(ab[1], cache=not args.no_cache, reference=getattr(args, "reference_b", None),
                              step_marker=args.step_marker)
            bar.update(_bytes(ab[1]) or 0)
        cmp = profile.compare(pa, pb, phase=args.phase, labels=tuple(args.labels) if args.labels else None,
                              step_ms=tuple(args.step_ms) if args.step_ms else None,
                              measured_source="--step-ms" if args.step_ms else None)
    except KitError as exc:
        print(f"kit profile compare: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json(cmp.to_dict())
    else:
        for side, p in (("A", pa), ("B", pb)):
            if p.placement is not None:
                print(f"{side}: {p.placement!r}")
        print(repr(cmp))
    return 0


def _placement_dict(pl) -> dict:
    """A placement as JSON: reference, score, shares, reasons, refused, per-layer scores."""
    layers = [] if pl.layers is None or not len(pl.layers) else [
        {"layer": int(r.layer), "score": round(float(r.score), 4), "time_us": round(float(r.time_us), 3)}
        for r in pl.layers.itertuples()]
    return {"reference": pl.reference, "score": round(pl.score, 4), "placed_share": round(pl.placed_share, 4),
            "unplaced_share": round(pl.unplaced_share, 4), "reasons": {k: round(v, 4) for k, v in pl.reasons.items()},
            "refused": pl.refused, "how": pl.how, "provenance": pl.provenance if not pl.refused else None,
            "layers": layers}


def _print_modules(s, by: str) -> int:
    t = s.modules if by == "module" else s.layers
    print(s._head())
    if t.empty or (by == "module" and set(t["block"]) <= {"(no module)"}):
        print("no module frames in this trace: record it with torch.profiler.profile(with_stack=True) to see "
              "kernel time per module")
        return 0
    if s.categories_unavailable:
        print(f"module times unavailable: {s.categories_unavailable}")
    key = ["block", "module"] if by == "module" else ["layer", "block"]
    head = "module" if by == "module" else "layer  kind            module"
    print(f"{head:<56}{'time_us':>14}{'%kernel':>9}{'calls':>8}")
    for r in t.itertuples():
        a, b = (getattr(r, key[0]), getattr(r, key[1]))
        label = (a if a == b else f"{a} > {b}") if by == "module" else f"{a:<6} {getattr(r, 'kind', ''):<15} {b}"
        tu = "n/a" if is_nan(r.time_us) else f"{r.time_us:,.1f}"
        sh = "" if is_nan(r.share_of_kernel) else f"{100 * r.share_of_kernel:.1f}%"
        print(f"{str(label)[:55]:<56}{tu:>14}{sh:>9}{r.calls:>8}")
    return 0


def _register_diff(psub) -> None:
    d = psub.add_parser("diff", help="two runs (two engines) by layer kind x operation family, with their settings")
    d.add_argument("a", metavar="A_TRACE", help="run A's trace (one rank)")
    d.add_argument("b", metavar="B_TRACE", help="run B's trace (one rank)")
    d.add_argument("--phase", choices=("decode", "prefill", "all"), default="decode",
                   help="which steps to compare (default decode)")
    d.add_argument("--basis", choices=("kernel", "wall"), default="kernel",
                   help="kernel: GPU time per node, idle as its own node; wall: launch gaps go to the node after them")
    d.add_argument("--labels", nargs=2, metavar=("A", "B"), help="names of the two runs")
    d.add_argument("--settings", nargs=2, metavar=("A_LOG", "B_LOG"),
                   help="each run's engine log (or settings dump): the settings that differ, beside the nodes")
    d.add_argument("--reference-a", metavar="REF", help="a reference run (eager, with stack) placing A's kernels")
    d.add_argument("--reference-b", metavar="REF", help="a reference run (eager, with stack) placing B's kernels")
    d.add_argument("--step-marker", metavar="NAME", help=_STEP_MARKER)
    d.add_argument("--json", action="store_true", help="print the diff as JSON")
    d.set_defaults(func=_diff)


def _diff(args) -> int:
    from kit import logs  # deferred: it loads pandas, which a summary imports only after its parse has started

    try:
        settings = (logs.settings([args.settings[0]]), logs.settings([args.settings[1]])) if args.settings else None
        a, b = args.a, args.b
        if args.step_marker:   # both sides (and their references) read with the same step rule
            a, b = (profile.load(x, reference=r, step_marker=args.step_marker)
                    for x, r in ((a, args.reference_a), (b, args.reference_b)))
        diff = profile.diff_structure(a, b, phase=args.phase, basis=args.basis, settings=settings,
                                      labels=tuple(args.labels) if args.labels else None,
                                      references=(args.reference_a, args.reference_b))
    except KitError as exc:
        print(f"kit profile diff: {exc}", file=sys.stderr)
        return 1
    for w in diff.warnings:
        print(f"kit: warning: {w}", file=sys.stderr)
    print_result(diff, args.json)
    return 0


def _gate(args, traces: list[str]) -> int:
    from kit import runs  # deferred: the catalogue loads (before the answer) only for a gate

    g = runs.profile_gate(args.baseline, traces, phase=args.phase, threshold=args.threshold, cache=not args.no_cache,
                          step_ms=tuple(args.step_ms) if args.step_ms else None)
    if args.html:
        g.html(args.html)
    print_result(g, args.json)
    if args.html and not args.json:
        print(f"diff: {args.html}")
    return g.exit_code(args.fail_on_regression)


def _ranks(args) -> int:
    v = profile.ranks(args.traces, phase=args.phase)
    if args.json:
        print_json({"phase": v.phase, "per_rank": frame_records(v.per_rank), "straggler": v.straggler,
                    "where": frame_records(v.where), "collective_skew": v.collective_skew, "warnings": v.warnings})
    else:
        print(repr(v))
    return 0


def _check(args) -> int:
    p = profile.load(args.traces, cache=not args.no_cache, reference=args.reference)
    h = p.health()
    if p.placement is not None and not args.json:
        print(repr(p.placement))
    print_result(h, args.json)
    return 0


def _register_capture(psub) -> None:
    c = psub.add_parser("capture", help="record a running engine's torch profile through its profiler endpoints")
    c.add_argument("url", help="the engine's base URL, on this machine (http://127.0.0.1:PORT)")
    c.add_argument("--steps", type=int, help="forward steps to record (SGLang, tinyserve: the engine stops itself)")
    c.add_argument("--seconds", type=float, help="record this long, then /stop_profile (vLLM: needed)")
    c.add_argument("--out", default="traces/capture", metavar="DIR",
                   help="where the traces go (default ./traces/capture; files rank<N>.trace.json.gz)")

    c.add_argument("--engine", choices=_EngineNames(), default="sglang", metavar="ENGINE",
                   help="the engine, for its profiler protocol: %(choices)s (default sglang: SGLang's "
                   "/start_profile, which tinyserve speaks too)")
    c.add_argument("--trace-dir", metavar="DIR", help="vLLM: its VLLM_TORCH_PROFILER_DIR, where it writes traces")
    c.add_argument("--no-load", action="store_true",
                   help="send no requests while recording (the engine's own traffic is profiled)")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for complete traces (default 300)")
    c.set_defaults(func="kit.live._profiling:capture")   # its module (the HTTP client) loads only when it runs
