"""Run validity: can a benchmark run be trusted? GPU clocks and throttle reasons sampled during the run
(``ClockSampler``: ``nvidia-smi --query-gpu=... -lms N`` beside it; ``parse_clocks``: a recorded query), warm-up
done, failed requests, outputs shorter than asked, prompts seeded (``check_run`` -> :class:`Validity`).
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import KitError
from kit.logs import is_kit_result, kit_requests, read_kit_result
from kit.remote import connect
from kit.util import quote

CLOCK_QUERY = ("timestamp,index,name,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,clocks_throttle_reasons.active,"
               "power.draw,power.limit,temperature.gpu,utilization.gpu")
# clocks_event_reasons (formerly clocks_throttle_reasons) bits that mean the GPU slowed itself down
THROTTLE_BITS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal slowdown",
                 0x40: "HW thermal slowdown", 0x80: "HW power brake"}
IDLE_BIT = 0x1
SLOW_CLOCK = 0.90  # SM clock below this share of its maximum while busy counts as throttled


def _num(x: str) -> float | None:
    x = (x or "").strip().split(" ")[0]
    if x in ("", "[N/A]", "N/A", "[Not", "Supported]"):
        return None
    try:
        return float(int(x, 16)) if x.lower().startswith("0x") else float(x)
    except ValueError:
        return None


def parse_clocks(text: str, source: str = "<text>") -> list[dict]:
    """Samples of ``nvidia-smi --query-gpu=<CLOCK_QUERY> --format=csv`` (header or not, units or not)
    -> dicts with gpu, sm_mhz, max_sm_mhz, reasons (int bitmask), util, temp_c, power_w."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        return []
    names = CLOCK_QUERY.split(",")
    if any("clocks" in c or "index" in c for c in rows[0]):
        names = [c.strip().split(" [")[0] for c in rows[0]]
        rows = rows[1:]
    alias = {"clocks.current.sm": "clocks.sm", "clocks_throttle_reasons.active": "clocks_event_reasons.active"}
    names = [alias.get(n, n) for n in names]
    out = []
    for r in rows:
        d = dict(zip(names, (c.strip() for c in r)))
        reasons = _num(d.get("clocks_event_reasons.active", ""))
        out.append({"time": d.get("timestamp"), "gpu": int(_num(d.get("index", "0")) or 0),
                    "sm_mhz": _num(d.get("clocks.sm", "")), "max_sm_mhz": _num(d.get("clocks.max.sm", "")),
                    "reasons": int(reasons) if reasons is not None else None,
                    "util": _num(d.get("utilization.gpu", "")), "temp_c": _num(d.get("temperature.gpu", "")),
                    "power_w": _num(d.get("power.draw", ""))})
    return out


def throttle(samples: list[dict]) -> dict:
    """Summary of clock samples: busy samples, the lowest busy SM clock against its maximum, the
    throttle reasons seen while busy, and ``throttled`` (True/False, None without busy samples)."""
    busy = [s for s in samples if (s["util"] is None or s["util"] > 0) and not ((s["reasons"] or 0) & IDLE_BIT)]
    reasons = dict(Counter(name for s in busy for bit, name in THROTTLE_BITS.items() if (s["reasons"] or 0) & bit))
    slow = sum(1 for s in busy if s["sm_mhz"] and s["max_sm_mhz"] and s["sm_mhz"] < SLOW_CLOCK * s["max_sm_mhz"])
    clocks = [s["sm_mhz"] for s in busy if s["sm_mhz"]]
    top = max((s["max_sm_mhz"] for s in busy if s["max_sm_mhz"]), default=None)
    return {"samples": len(samples), "busy_samples": len(busy), "min_sm_mhz": min(clocks, default=None),
            "median_sm_mhz": sorted(clocks)[len(clocks) // 2] if clocks else None, "max_sm_mhz": top,
            "slow_samples": slow, "reasons": reasons,
            "throttled": (bool(reasons) or slow > 0) if busy else None}


class ClockSampler:
    """Samples GPU clocks and throttle reasons with ``nvidia-smi`` while a run goes on (a context
    manager), on this machine or, with ``host=`` (a ``kit.remote`` Host), on the host where the engine
    runs. Where there is no ``nvidia-smi`` it records why in ``missing`` and samples nothing."""

    def __init__(self, host=None, interval_ms: int = 500, nvidia_smi: str = "nvidia-smi") -> None:
        self.host, self.local = connect("local") if host is None else host, host is None
        self.interval_ms = int(interval_ms)
        self.nvidia_smi = nvidia_smi
        self.missing: str | None = None
        self.samples: list[dict] = []
        self._job = self._log = None

    def __enter__(self) -> "ClockSampler":
        name = getattr(self.host, "name", "host")
        args = [self.nvidia_smi, f"--query-gpu={CLOCK_QUERY}", "--format=csv,noheader,nounits",
                f"-lms={self.interval_ms}"]
        try:
            found = shutil.which(self.nvidia_smi) if self.local else \
                self.host.run(f"command -v {quote(self.nvidia_smi)}", timeout=30).stdout.strip()
            if not found:
                self.missing = (f"{self.nvidia_smi} not found on this machine" if self.local else
                                f"{name}: {self.nvidia_smi} not found") + ": clocks not sampled"
                return self
            self._log = self.host.private_dir() + f"/clocks-{uuid.uuid4().hex[:12]}.csv"  # 0700: not /tmp
            self._job = self.host.spawn(" ".join(quote(a) for a in args), log=self._log)
        except KitError as exc:
            self.missing = f"{name}: clock sampler not started ({exc})"
        return self

    def __exit__(self, *exc) -> None:
        if self._job is None:
            return
        try:
            self._job.stop(grace=5)
            text = self.host.read_bytes(self._log).decode("utf-8", "replace")
            self.host.run(f"rm -f -- {quote(self._log)}", timeout=30)
        except KitError as exc:
            text = ""
            self.missing = f"{getattr(self.host, 'name', 'host')}: clock samples not read ({exc})"
        self.samples = parse_clocks(text, "nvidia-smi")
        if not self.samples and self.missing is None:
            self.missing = "nvidia-smi printed no samples (no GPU visible?)"

    def summary(self) -> dict:
        return {**throttle(self.samples), "source": "nvidia-smi sampled during the run" if self.samples else None,
                "missing": self.missing}


@dataclass
class Validity:
    """The validity checks of one run: ``checks`` (check, ok True/False/None, detail), ``valid``
    (no check failed), ``flags`` (one line per failed check)."""

    run: str
    checks: list[dict] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not any(c["ok"] is False for c in self.checks)

    @property
    def flags(self) -> list[str]:
        return [f"{c['check']}: {c['detail']}" for c in self.checks if c["ok"] is False]

    def to_dict(self) -> dict:
        return {"run": self.run, "valid": self.valid, "flags": self.flags, "checks": list(self.checks)}

    def __repr__(self) -> str:
        return f"Validity({self.run}: " + ("valid" if self.valid else "; ".join(self.flags)) + ")"


def _check_failed(record: dict, reqs: list | None, clocks) -> tuple:
    """Failed requests: from the per-request list, the totals, or the repeats."""
    if reqs is not None:
        failed = sum(1 for r in reqs if not r.get("ok", True))
        return failed == 0, f"{failed} of {len(reqs)} requests failed"
    if "failed" in record or ("completed" in record and "num_prompts" in record):
        failed = (int(record.get("failed") or 0)
                  or max(0, int(record.get("num_prompts", 0)) - int(record.get("completed", 0))))
        return failed == 0, f"{failed} failed ({record.get('completed')} completed)"
    if isinstance(record.get("repeats"), list) and record["repeats"] and "failed" in record["repeats"][0]:
        failed = sum(int(r.get("failed") or 0) for r in record["repeats"])
        return failed == 0, f"{failed} failed over {len(record['repeats'])} repeats"
    return None, "the record does not say how many requests failed"


def _check_outputs(record: dict, reqs: list | None, clocks) -> tuple:
    """Outputs shorter than asked."""
    asked = (record.get("max_tokens") or record.get("random_output_len")
             or (record.get("bench") or {}).get("max_tokens"))
    if reqs is not None and asked:
        short = [r for r in reqs if r.get("ok", True) and (r.get("output_tokens") or 0) < asked]
        return not short, (f"{len(short)} of {len(reqs)} requests produced fewer than the {asked} tokens asked "
                           f"(min {min((r.get('output_tokens') or 0) for r in short)})" if short
                           else f"every request produced the {asked} tokens asked")
    if asked and record.get("output_lens"):
        short = [n for n in record["output_lens"] if n < asked]
        return not short, f"{len(short)} of {len(record['output_lens'])} outputs shorter than {asked}"
    if asked and record.get("completed") and record.get("total_output_tokens") is not None:
        got = int(record["total_output_tokens"])
        return got >= asked * int(record["completed"]), \
            f"{got} output tokens for {record['completed']} requests of {asked}"
    return None, "the record does not say how many tokens were asked or produced"


def _check_warmup(record: dict, reqs, clocks) -> tuple:
    warm = record.get("warmup", (record.get("bench") or {}).get("warmup", record.get("num_warmups")))
    if warm is None:
        return None, "the record does not say whether warm-up requests were sent"
    return int(warm) > 0, f"{warm} warm-up request(s) before measuring"


def _check_seeded(record: dict, reqs, clocks) -> tuple:
    """Prompts seeded: a fixed prompt, or random prompts with a recorded seed."""
    kind = record.get("prompts")
    if kind == "same" or (kind is None and "prompt_words" in record):
        return True, "one fixed prompt text for every request"
    if kind in ("random", "random-ids") and "seed" not in record:
        return None, "random prompts; the record does not say their seed"
    if kind in ("random", "random-ids"):
        return record["seed"] is not None, f"random prompts, seed {record['seed']}"
    if kind is not None:
        return True, f"a fixed prompt set ({kind})"
    if "seed" in record:
        return record["seed"] is not None, f"seed {record['seed']}"
    return None, "the record does not say how prompts were drawn"


def _check_clocks(record: dict, reqs, clocks) -> tuple:
    """GPU clocks: the ``throttle`` summary of ``clocks`` (a file, samples or a summary), else the record's own."""
    if isinstance(clocks, (str, Path)):
        summary = {**throttle(parse_clocks(Path(clocks).read_text(encoding="utf-8", errors="replace"), str(clocks))),
                   "source": f"recorded query {clocks}"}
    elif isinstance(clocks, list):
        summary = throttle(clocks)
    else:
        summary = clocks if isinstance(clocks, dict) else record.get("clocks")
        summary = summary if isinstance(summary, dict) else None
    if summary is None or summary.get("throttled") is None:
        return None, (summary or {}).get("missing") or "no GPU clock samples for this run"
    if summary["throttled"]:
        reasons = ", ".join(f"{k} ({n} samples)" for k, n in summary.get("reasons", {}).items())
        return False, (f"throttled: SM clock down to {summary.get('min_sm_mhz'):.0f} of "
                       f"{summary.get('max_sm_mhz') or float('nan'):.0f} MHz" + (f"; {reasons}" if reasons else ""))
    return True, (f"no throttling in {summary['busy_samples']} busy samples "
                  f"(SM clock median {summary.get('median_sm_mhz'):.0f} MHz)")


# each check: (name, function of (record, per-request records, clocks) -> (ok True/False/None, detail))
_CHECKS = (("failed requests", _check_failed), ("output length", _check_outputs), ("warm-up", _check_warmup),
           ("prompts seeded", _check_seeded), ("GPU clocks", _check_clocks))


def check_run(record: dict | str | Path, clocks: list[dict] | dict | str | Path | None = None, *,
              run: str | None = None) -> Validity:
    """Validity of one benchmark record: ``kit.bench`` results (``bench.json`` / an experiment's
    ``result.json``), ``vllm bench serve --save-result`` JSON or SGLang ``bench_serving`` JSONL
    records. ``clocks``: samples (``parse_clocks``), a ``throttle`` summary, or a file with the
    recorded query; else the record's own ``clocks`` entry."""
    name = run or (str(record) if isinstance(record, (str, Path)) else "record")
    if isinstance(record, (str, Path)):
        text = Path(record).read_text(encoding="utf-8", errors="replace").strip()
        try:
            record = json.loads(text)
        except ValueError:
            record = json.loads(text.splitlines()[-1])
    # the per-request records: a kit result's (every level's) or a tool's ``requests`` list
    reqs = kit_requests(record) if is_kit_result(record) else \
        record.get("requests") if isinstance(record.get("requests"), list) else None
    return Validity(name, [dict(zip(("check", "ok", "detail"), (check, *fn(record, reqs, clocks))))
                           for check, fn in _CHECKS])


def records(path: str | Path) -> list[tuple[str, dict]]:
    """Benchmark records in a JSON / JSONL file, each with a label (file or file#N); a kit result
    through the kit's one reader of its own results (:func:`kit.logs.read_kit_result`)."""
    own = read_kit_result(path)
    if own is not None:
        return [(str(path), own)]
    text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    try:
        obj = json.loads(text)
        return [(str(path), obj)] if isinstance(obj, dict) else []
    except ValueError:
        out = []
        for i, line in enumerate(text.splitlines(), 1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append((f"{path}:{i}", obj))
        return out
