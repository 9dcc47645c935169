"""``kit bench run URL [--concurrency N...|--rate R...|--users U...|--trace F|--saturation] [--out F] [--plot F]``:
a benchmark by the kit's client (``kit.bench.sweep`` and its presets; ``--serve ENGINE`` starts the engine
first and stops it after), a table at the end, the result saved as every other command reads it.
``kit bench parse FILE [--json]``: benchmark text blocks or JSON/JSONL results, one row per run.
``kit bench reconcile CLIENT ENGINE_LOG [--trace T] [--json]``: where the saved client records' inter-token
latency goes (``kit.bench.reconcile``).
``kit bench compare FILE --baseline NAME [--fail-on-regression] [--threshold F] [--json]``: the result against a
named baseline benchmark (``kit.runs.bench_gate``: per metric, two standard errors of the files' own spread and
a threshold; TTFT/TPOT/ITL means and percentiles, throughputs, the share of failed requests); with
``--fail-on-regression`` exit 3 on a regression and 4 when a metric of the baseline could not be compared
(not a number, missing, a latency of zero: named in the output). Results of different loads are refused.

A text block without a ``Backend:`` line says nothing about its engine; the engine is then guessed
from the block's labels. Such rows carry ``"engine_inferred": true`` in ``--json`` output and get a
warning on stderr naming their line, so a guess is never shown as a fact."""
from __future__ import annotations

import sys

from kit.cli._logs import dump
from kit.util import frame_records


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="run a benchmark; parse, reconcile and compare benchmark output")
    bsub = bench.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    from kit.cli._bench_run import register_run  # deferred: start-up (the command's work loads only when it runs)

    register_run(bsub)
    b = bsub.add_parser("parse", help="benchmark text blocks or JSON/JSONL results -> one row per run")
    b.add_argument("file", help="benchmark output: text blocks, a JSON result or JSONL results")
    b.add_argument("--json", action="store_true", help="print every row as JSON")
    b.set_defaults(func=_bench)
    r = bsub.add_parser("reconcile", help="split a saved run's inter-token latency: HTTP, output, scheduler, GPU")
    r.add_argument("client", help="the kit's saved load or single-stream result (JSON with per-request records)")
    r.add_argument("engine_log", help="the engine's own records: its log (tinyserve step records, SGLang request "
                                      "stats or decode lines, vLLM throughput lines), a vLLM OTLP span export "
                                      "(JSON) or TensorRT-LLM /metrics iteration statistics (JSON)")
    r.add_argument("--trace", help="a trace of this run or one at the same load: splits the forward into GPU busy/idle")
    r.add_argument("--json", action="store_true", help="print the reconciliation as JSON")
    r.set_defaults(func=_reconcile)
    c = bsub.add_parser("compare", help="a benchmark result against a named baseline benchmark (regression gate)")
    c.add_argument("file", help="benchmark output, as for 'kit bench parse'")
    c.add_argument("--baseline", required=True, metavar="NAME",
                   help="a baseline named with 'kit runs baseline NAME RUN_ID' (a 'kit bench parse' run)")
    c.add_argument("--fail-on-regression", action="store_true",
                   help="exit 3 when a metric regressed, 4 when one could not be compared")
    c.add_argument("--threshold", type=float, default=0.02,
                   help="the smallest change that counts, as a fraction of the baseline (default 0.02)")
    c.add_argument("--json", action="store_true", help="print the verdict as JSON")
    c.set_defaults(func=_compare)
    bench.set_defaults(func=lambda a: (bench.print_help(), 2)[1])


def _compare(args) -> int:
    from kit import runs  # deferred: start-up (a command loads its work only when it runs)

    g = runs.bench_gate(args.baseline, args.file, threshold=args.threshold)
    if args.json:
        dump(g.to_dict())
    else:
        print(repr(g))
    return g.exit_code(args.fail_on_regression)


def _bench(args) -> int:
    from kit.runs import bench_rows  # deferred: start-up (a command loads its work only when it runs)

    df = bench_rows(args.file)  # other tools' output and the kit's own results alike
    for w in df.attrs.get("warnings", []):  # what was dropped on the way; the engine guess is said per row below
        if "inferred from the line format" in w:
            continue
        print(f"kit: warning: {args.file}: {w}", file=sys.stderr)
    stated = df["backend"].notna() if "backend" in df.columns else df["engine"].isna()
    df["engine_inferred"] = df["engine"].notna() & ~stated & df["tool"].isin(("sglang.bench_serving",
                                                                             "vllm bench serve", "bench serve"))
    for row in df[df["engine_inferred"]].itertuples():
        print(f"kit: warning: {args.file}: line {row.line}: engine {row.engine!r} guessed from the block's labels "
              "(no Backend line)", file=sys.stderr)
    if args.json:
        dump(frame_records(df))
        return 0
    df.loc[df["engine_inferred"], "engine"] = df.loc[df["engine_inferred"], "engine"] + "?"
    cols = [c for c in ("tool", "engine", "level", "completed", "output_throughput", "median_tpot_ms", "median_ttft_ms",
                        "median_itl_ms", "accept_length") if c in df.columns and df[c].notna().any()]
    print(df[cols].to_string(index=False))
    return 0


def _reconcile(args) -> int:
    from kit import bench  # deferred: start-up (a command loads its work only when it runs)

    rec = bench.reconcile(args.client, args.engine_log, trace=args.trace)
    for w in rec.warnings:
        print(f"kit: warning: {w}", file=sys.stderr)
    if args.json:
        dump(rec.to_dict())
        return 0 if not rec.refused else 1
    if rec.refused:
        print(f"kit: reconciliation refused: {rec.refused}", file=sys.stderr)
        return 1
    if rec.level == "token":
        print(f"{rec.table.attrs['tokens']} gaps; clock offset (engine - client) {rec.offset_ms:+.2f} "
              f"+/- {rec.offset_bound_ms:.2f} ms; times in ms per token")
    else:   # the engine records less than each token: the level is said first
        n = rec.table.attrs["tokens"]
        print({"request": f"per request: {n} requests", "interval": f"per interval: {n} intervals"}.get(
            rec.level, f"as distributions: {n} client gaps against the engine's periods") + "; times in ms per token")
    print(rec.table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0
