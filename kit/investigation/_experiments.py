"""The experiment that would confirm a cause: a ``kit.experiment`` call the user can run as printed (checked by
``kit.live.plan``, which builds its variants without running anything), its repeats and what decides it."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import kit.live

# a cause with no setting of its own: what to swap to test it (the node's family or the ITL part)
SWAP = {"attention": "the attention backend (the kernels B runs in A)", "norm": "the norm implementation (B's norm "
        "kernels, fused or not, in A)", "cuda_graph": "CUDA graphs (--disable-cuda-graph on the graph side)",
        "all-reduce": "the all-reduce path (custom all-reduce, NCCL protocol)",
        "output": "the detokenizer / output path (B's output settings in A)",
        "http": "the HTTP path between client and engine (a proxy, the network: bench the engine's own port)",
        "host": "the host work before each forward (blocking copies; the overlap scheduler)",
        "sched": "the scheduler between steps (overlap scheduling, CPU load)"}
# ITL part -> settings whose name says they act on it
PART_SETTINGS = {"output": r"detok|tokeniz|stream_interval|skip_special", "http": r"proxy|url",
                 "host": r"host_copy|overlap|pin_memory", "sched": r"overlap|schedul", "prefill": r"chunked|prefill",
                 "forward": r"cuda_graph|attention|compile|quant", "gpu_busy": r"attention|compile|quant",
                 "gpu_idle": r"cuda_graph|overlap"}


@dataclass
class Experiment:
    """``call``: the code to run; ``variant``: what it swaps; ``repeats``; ``confirm`` / ``refute``: what result
    decides the cause; ``runnable``: whether ``call`` runs as printed (False: it names what the user must give)."""

    call: str
    variant: str
    repeats: int
    confirm: str
    refute: str
    runnable: bool = True

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        return (f"{self.call}\n      variant: {self.variant}; repeats {self.repeats}\n      confirms: {self.confirm}"
                f"\n      refutes: {self.refute}" + ("" if self.runnable else "\n      (not runnable as printed: "
                                                         "fill in what <...> names)"))


def _value(v):
    return None if v in (None, "None", False, "False") else (True if v in (True, "True") else v)


def build(cause: dict, runs, asked: list[dict]) -> Experiment:
    """The confirming experiment of one candidate cause (see the module docstring)."""
    setting = next(iter(cause.get("settings") or []), None)
    if setting is None and cause["source"] == "itl":
        rx = PART_SETTINGS.get(cause["key"])
        setting = next((a for a in asked if rx and re.search(rx, a["setting"], re.I)), None)
    a, b = runs
    # runs per variant for two standard errors to stay under half the effect (3 to 20; 5: the noise is unknown)
    d, e = cause["delta"], cause["noise"]
    n = int(min(20, max(3, math.ceil(3 * (2.0 * e / abs(d)) ** 2)))) if d and e == e and e > 0 else 5
    if cause.get("ignored"):
        confirm, refute = ("the two values give the same effective setting and tok/s within noise",
                           "the engine reports a different value, or tok/s moves beyond noise")
    elif cause.get("unmeasured"):
        confirm = (f"switching it moves decode tok/s toward {b.label if cause.get('base_side', 0) == 0 else a.label}"
                   " beyond noise (p < 0.05); its share of the gap is then the change it makes")
        refute = "tok/s moves within noise"
    else:
        confirm = (f"the variant moves {cause.get('gap_name') or 'the figure'} by at least {cause['delta'] / 2.0:+.2f} "
                   f"{cause.get('unit', '')} toward {b.label} (p < 0.05)")
        refute = "the change is within noise, or under half of that"
    if cause["key"] == "http" and setting is None:
        urls = [str(x) for x in cause.get("urls", ()) if x]
        call = (f"for url in {tuple(urls)!r}: kit.bench.load_test(url, concurrency=1, requests=20)" if len(urls) == 2
                else "kit.bench.load_test(<the engine's own URL>) vs kit.bench.load_test(<the URL the client used>)")
        return Experiment(call, SWAP["http"], n, confirm, refute, len(urls) == 2)
    if setting is not None:
        name = setting["setting"]
        values = [_value(setting.get("a")), _value(setting.get("b"))]
        kind = "flags" if name.startswith("-") else "matrix"
        if kind == "matrix" and not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):  # a setting's name, not a variable
            name, kind = "--" + name.replace("_", "-"), "flags"
        side = runs[cause.get("base_side", 0)]
        base = side.command or f"<{side.label}'s engine command>"
        call = f"kit.experiment({base!r}, {kind}={{{name!r}: {values!r}}}, repeats={n})"
        runnable = side.command is not None
        if runnable:
            try:
                kit.live.plan(base, **{kind: {name: values}})
            except Exception as exc:  # noqa: BLE001  the plan says why the call would not run
                runnable, call = False, call + f"  # kit.live.plan refused it: {exc}"
        variant = f"{name}: {values[0]!r} vs {values[1]!r} on {side.label}'s engine"
        return Experiment(call, variant, n, confirm, refute, runnable)
    swap = SWAP.get(cause["key"], f"the implementation of '{cause['key']}' ({b.label}'s in {a.label})")
    call = (f"kit.experiment({(a.command or '<A engine command>')!r}, flags={{<the flag that selects {cause['key']}>: "
            f"[<{a.label}'s>, <{b.label}'s>]}}, repeats={n})")
    return Experiment(call, swap, n, confirm, refute, False)
