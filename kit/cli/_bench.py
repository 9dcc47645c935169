"""``kit bench run URL [--concurrency N...|--rate R...|--users U...|--trace F|--saturation] [--out F] [--plot F]``:
a benchmark by the kit's client (``kit.bench.sweep`` and its presets; ``--serve ENGINE`` starts the engine
first and stops it after), a table at the end, the result saved as every other command reads it.
``kit bench parse FILE [--json]``: benchmark text blocks or JSON/JSONL results, one row per run.
``kit bench reconcile CLIENT ENGINE_LOG [--trace T] [--json]``: where the saved client records' inter-token
latency goes (``kit.bench.reconcile``).
``kit bench compare FILE --baseline NAME [--fail-on-regression] [--threshold F] [--json]``: the result against a
named baseline benchmark (``kit.runs.bench_gate``, whose module says how it decides and when it exits 3 or 4).

A text block without a ``Backend:`` line says nothing about its engine; the engine is then guessed
from the block's labels. Such rows carry ``"engine_inferred": true`` in ``--json`` output and get a
warning on stderr naming their line, so a guess is never shown as a fact."""
from __future__ import annotations

import sys

from kit import runs
from kit.cli._logs import dump
from kit.cli._serve import add_engine_options, engine_names
from kit.util import frame_records, print_result


def register(bench) -> None:
    bsub = bench.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    _register_run(bsub)
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
    r.set_defaults(func="kit.cli._bench_run:reconcile")
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


def _compare(args) -> int:
    g = runs.bench_gate(args.baseline, args.file, threshold=args.threshold)
    print_result(g, args.json, indent=2, allow_nan=False, default=None)
    return g.exit_code(args.fail_on_regression)


def _bench(args) -> int:
    df = runs.bench_rows(args.file)  # other tools' output and the kit's own results alike
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


def _register_run(bsub) -> None:
    r = bsub.add_parser("run", help="benchmark a live server: single stream, concurrencies, rates, sessions, "
                        "trace replay, saturation")
    r.add_argument("url", nargs="?", help="the server's base URL (http://host:port); not with --serve")
    load = r.add_argument_group("load (default: single stream, concurrency 1 2 4, 3 repeats)")
    load.add_argument("--concurrency", type=int, nargs="+", metavar="N", help="closed-loop levels: N workers each")
    load.add_argument("--rate", type=float, nargs="+", metavar="R", help="open-loop levels: R requests per second")
    load.add_argument("--arrival", choices=("poisson", "constant"), default="poisson",
                      help="open-loop arrivals (default poisson)")
    load.add_argument("--users", type=int, nargs="+", metavar="U", help="multi-turn levels: U concurrent users")
    load.add_argument("--turns", type=int, default=4, help="turns per user session (default 4)")
    load.add_argument("--trace", metavar="FILE", help="replay a trace (Mooncake or WEKA JSONL): its arrivals, lengths")
    load.add_argument("--time-scale", type=float, nargs="+", default=[1.0], metavar="S",
                      help="trace replay speed per level: 0.5 = twice as fast (default 1)")
    load.add_argument("--saturation", action="store_true",
                      help="raise the request rate until goodput stops rising (the knee)")
    load.add_argument("--start", type=float, default=1.0, help="saturation: first rate, req/s (default 1)")
    load.add_argument("--step", type=float, default=1.0, help="saturation: rate step, req/s (default 1)")
    load.add_argument("--max-levels", type=int, default=12, help="saturation: most rates tried (default 12)")
    req = r.add_argument_group("requests")
    req.add_argument("--requests", type=int, help="requests per level and repeat (default 100; single stream 8)")
    req.add_argument("--repeats", type=int, help="runs of every level, in rounds (default 1; single stream 3)")
    req.add_argument("--warmup", type=int, default=2, help="unmeasured requests first (default 2)")
    req.add_argument("--prompt-tokens", type=int, help="prompt length in words (default 128; single stream 32)")
    req.add_argument("--max-tokens", type=int, help="tokens generated per request (default 128; single stream 64)")
    req.add_argument("--prompts", default="random",
                     help="random (default), random-ids, same, or a dataset file (ShareGPT, JSONL)")
    req.add_argument("--seed", type=int, help="prompt seed (default: a new one, recorded; single stream 0)")
    req.add_argument("--model", help="the model name to ask for (default: the first the server lists)")
    req.add_argument("--chat", action="store_true", help="use /v1/chat/completions instead of /v1/completions")
    req.add_argument("--slo", action="append", default=[], metavar="METRIC=MS",
                     help="a service-level objective for goodput: ttft_ms, tpot_ms, itl_ms or e2e_ms (repeatable)")
    req.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    out = r.add_argument_group("output")
    out.add_argument("--out", metavar="FILE", help="save the result (every request) as JSON, atomically")
    out.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    out.add_argument("--plot", metavar="FILE", help="save the throughput-latency figure (PNG, SVG or PDF)")
    srv = r.add_argument_group("starting the engine (--serve)")
    srv.add_argument("--serve", choices=engine_names(), metavar="ENGINE",
                     help=f"start ENGINE first ({', '.join(engine_names())}), benchmark it, stop it")
    srv.add_argument("--engine-args", default="", metavar="'ARGS'",
                     help="the engine's own arguments, one quoted string (with --serve)")
    add_engine_options(srv)
    r.set_defaults(func="kit.cli._bench_run:run")   # its module (the benchmark client) loads only when it runs
