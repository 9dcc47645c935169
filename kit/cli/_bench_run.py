"""``kit bench run``: the kit's benchmark client from the command line (``kit.bench`` does the work).

    kit bench run URL                                  # single stream: concurrency 1, 2, 4, 3 repeats
    kit bench run URL --concurrency 1 8 32 --requests 200
    kit bench run URL --rate 2 4 8 --slo ttft_ms=500 --out load.json --plot load.png
    kit bench run URL --users 4 --turns 6              # multi-turn sessions
    kit bench run URL --trace mooncake.jsonl --time-scale 1 0.5
    kit bench run URL --saturation --start 1 --step 2  # the rate where goodput stops rising
    kit bench run --serve tinyserve                    # start the engine, benchmark it, stop it

The table at the end gives one row per level; ``--out FILE`` saves the whole result (every request) as
``kit.bench.LoadResult`` saves it, written atomically (a Ctrl-C leaves no file, or the previous one),
and ``kit audit``, ``kit bench parse``/``compare``/``reconcile`` and the catalogue read it as it is.
``--json`` prints that same result on stdout.
"""
from __future__ import annotations

import math
import os
import shlex
import sys

from kit.errors import UsageError

# table columns: (summary key, header, decimals)
_TABLE = (("level", "level", None), ("requests_ok", "ok", 0), ("requests_failed", "failed", 0),
          ("request_throughput", "req/s", 2), ("output_tok_s", "out tok/s", 1), ("decode_tok_s", "decode tok/s", 1),
          ("ttft_ms_p50", "TTFT p50 ms", 1), ("ttft_ms_p99", "TTFT p99 ms", 1), ("itl_ms_p50", "ITL p50 ms", 2),
          ("itl_ms_p99", "ITL p99 ms", 2), ("tpot_ms_p50", "TPOT p50 ms", 2), ("e2e_ms_p50", "E2E p50 ms", 0),
          ("goodput", "goodput req/s", 2))


def register_run(bsub) -> None:
    from kit.cli._serve import add_engine_options, engine_names  # deferred: start-up

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
    r.set_defaults(func=_run)


def _slo(items: list[str]) -> dict | None:
    slo = {}
    for item in items:
        name, eq, value = item.partition("=")
        try:
            slo[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--slo {item!r}: expected METRIC=MS (ttft_ms=500)") from None
        if not eq:
            raise UsageError(f"--slo {item!r}: expected METRIC=MS (ttft_ms=500)")
    return slo or None


def _kwargs(args) -> dict:
    """The library call's keywords from the options given (the library's defaults otherwise)."""
    kw = {"warmup": args.warmup, "prompts": args.prompts, "model": args.model, "chat": args.chat,
          "timeout": args.timeout}
    for opt in ("requests", "repeats", "prompt_tokens", "max_tokens", "seed"):
        if getattr(args, opt) is not None:
            kw[opt] = getattr(args, opt)
    return kw


def measure(args, url: str):
    """Run the benchmark the options ask for against ``url``: a :class:`kit.bench.LoadResult`."""
    from kit import bench  # deferred: start-up (the command's work loads only when it runs)

    kw = _kwargs(args)
    slo = _slo(args.slo)
    loads = [x for x in (args.concurrency, args.rate, args.users, args.trace) if x]
    if args.saturation:
        if loads:
            raise UsageError("--saturation searches request rates itself: give no --concurrency/--rate/--users/--trace")
        return bench.saturation(url, start=args.start, step=args.step, max_levels=args.max_levels, slo=slo,
                                arrival=args.arrival, **kw)
    if not loads:
        if slo:
            raise UsageError("--slo needs a load (--concurrency, --rate, --users, --trace)")
        kw.setdefault("timeout", 120.0)
        single = {k: v for k, v in kw.items() if k in ("model", "chat", "prompt_tokens", "max_tokens", "requests",
                                                       "warmup", "repeats", "timeout", "prompts", "seed")}
        return bench.single_stream(url, **single)
    return bench.sweep(url, concurrencies=args.concurrency, rates=args.rate, users=args.users, trace=args.trace,
                       time_scales=args.time_scale, arrival=args.arrival, turns=args.turns, slo=slo, **kw)


def table(res) -> str:
    """The result as a fixed-width table, one row per level, with the definitions underneath."""
    from kit.bench import DEFINITIONS  # deferred: start-up (the command's work loads only when it runs)

    rows = res.summary()
    cols = [c for c in _TABLE if any(r.get(c[0]) is not None for r in rows)]
    cells = [[h for _, h, _ in cols]]
    for r in rows:
        line = []
        for key, _, nd in cols:
            v = r.get(key)
            line.append("-" if v is None or (isinstance(v, float) and math.isnan(v)) else
                        str(v) if nd is None else f"{v:,.{nd}f}")
        cells.append(line)
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    text = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in cells]
    notes = list(res.data.get("notes") or [])
    sat = res.data.get("saturation")
    if sat:
        notes.append(f"saturation: knee at {sat['knee_rate']:g} req/s ({sat['figure']} {sat['knee_value']:.2f}); "
                     f"{sat['stopped']}")
    flags = (res.data.get("validity") or {}).get("flags") or []
    notes += [f"NOT VALID: {f}" for f in flags]
    return "\n".join(text + [f"note: {n}" for n in notes] + [DEFINITIONS])


def _run(args) -> int:
    if args.serve and args.url:
        raise UsageError("kit bench run: give a URL or --serve ENGINE, not both")
    if not args.serve and not args.url:
        raise UsageError("kit bench run: give the server's URL, or --serve ENGINE to start one")
    if args.engine_args and not args.serve:
        raise UsageError("--engine-args goes with --serve")
    if args.out:
        _check_writable(args.out)
    if args.serve:
        from kit.cli._serve import ready_line, start_engine  # deferred: start-up

        with start_engine(args, args.serve, shlex.split(args.engine_args)) as srv:
            print(ready_line(srv, args.serve), file=sys.stderr, flush=True)
            res = measure(args, srv.url)
            res.data["engine"], res.data["server"] = args.serve, srv.describe()  # what was measured, started how
    else:
        res = measure(args, args.url)
    if args.out:
        res.save(args.out)
        print(f"kit: saved {args.out}", file=sys.stderr)
    if args.plot:
        res.plot().savefig(args.plot, dpi=120)
        print(f"kit: plotted {args.plot}", file=sys.stderr)
    if args.json:
        sys.stdout.write(res.to_json() + "\n")
    else:
        print(table(res))
    return 0


def _check_writable(path: str) -> None:
    """Refuse an output path that cannot be written before the benchmark, not after it."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise UsageError(f"--out {path}: is a directory")
    if not os.path.isdir(d) or not os.access(d, os.W_OK):
        raise UsageError(f"--out {path}: cannot write in {d}")
