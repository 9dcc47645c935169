"""The ``kit bench`` commands whose work is ``kit.bench``'s (the benchmark client, loaded only when one of them
runs; their options are in ``_bench.py``): ``run`` and ``reconcile``.

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

from kit import bench
from kit.bench import DEFINITIONS
from kit.cli._logs import dump
from kit.cli._serve import ready_line, start_engine
from kit.errors import UsageError

# table columns: (summary key, header, decimals)
_TABLE = (("level", "level", None), ("requests_ok", "ok", 0), ("requests_failed", "failed", 0),
          ("request_throughput", "req/s", 2), ("output_tok_s", "out tok/s", 1), ("decode_tok_s", "decode tok/s", 1),
          ("ttft_ms_p50", "TTFT p50 ms", 1), ("ttft_ms_p99", "TTFT p99 ms", 1), ("itl_ms_p50", "ITL p50 ms", 2),
          ("itl_ms_p99", "ITL p99 ms", 2), ("tpot_ms_p50", "TPOT p50 ms", 2), ("e2e_ms_p50", "E2E p50 ms", 0),
          ("goodput", "goodput req/s", 2))


def _slo(items: list[str]) -> dict | None:
    slo = {}
    for item in items:
        name, _, value = item.partition("=")   # no '=': no value, refused below
        try:
            slo[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--slo {item!r}: expected METRIC=MS (ttft_ms=500)") from None
    return slo or None


def _kwargs(args) -> dict:
    """The library call's keywords from the options given (the library's defaults otherwise)."""
    kw = {"warmup": args.warmup, "prompts": args.prompts, "model": args.model, "chat": args.chat,
          "timeout": args.timeout}
    for opt in ("requests", "repeats", "prompt_tokens", "max_tokens", "seed"):
        if getattr(args, opt) is not None:
            kw[opt] = getattr(args, opt)
    return kw


def _measure(args, url: str):
    """Run the benchmark the options ask for against ``url``: a :class:`kit.bench.LoadResult`."""
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
        return bench.single_stream(url, **kw)
    return bench.sweep(url, concurrencies=args.concurrency, rates=args.rate, users=args.users, trace=args.trace,
                       time_scales=args.time_scale, arrival=args.arrival, turns=args.turns, slo=slo, **kw)


def _table(res) -> str:
    """The result as a fixed-width table, one row per level, with the definitions underneath."""
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


def run(args) -> int:
    """``kit bench run`` (its options: ``kit.cli._bench``)."""
    if args.serve and args.url:
        raise UsageError("kit bench run: give a URL or --serve ENGINE, not both")
    if not args.serve and not args.url:
        raise UsageError("kit bench run: give the server's URL, or --serve ENGINE to start one")
    if args.engine_args and not args.serve:
        raise UsageError("--engine-args goes with --serve")
    if args.out:
        _check_writable(args.out)
    if args.serve:
        with start_engine(args, args.serve, shlex.split(args.engine_args)) as srv:
            print(ready_line(srv, args.serve), file=sys.stderr, flush=True)
            res = _measure(args, srv.url)
            res.data["engine"], res.data["server"] = args.serve, srv.describe()  # what was measured, started how
    else:
        res = _measure(args, args.url)
    if args.out:
        res.save(args.out)
        print(f"kit: saved {args.out}", file=sys.stderr)
    if args.plot:
        res.plot().savefig(args.plot, dpi=120)
        print(f"kit: plotted {args.plot}", file=sys.stderr)
    if args.json:
        sys.stdout.write(res.to_json() + "\n")
    else:
        print(_table(res))
    return 0


def _check_writable(path: str) -> None:
    """Refuse an output path that cannot be written before the benchmark, not after it."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise UsageError(f"--out {path}: is a directory")
    if not os.path.isdir(d) or not os.access(d, os.W_OK):
        raise UsageError(f"--out {path}: cannot write in {d}")


def reconcile(args) -> int:
    """``kit bench reconcile`` (its options: ``kit.cli._bench``)."""
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
