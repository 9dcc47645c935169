"""Run validity: can a benchmark run be trusted? GPU clocks and throttle reasons sampled during the run
(``nvidia-smi`` where there is one, a recorded query otherwise), warm-up done, failed requests,
outputs shorter than asked, prompts seeded.

``ClockSampler`` runs ``nvidia-smi --query-gpu=... -lms N`` beside a run and parses what it printed;
``parse_clocks`` reads the same query from a file. ``check_run(record, clocks)`` gives a
:class:`Validity`: one row per check (``ok`` True/False/None = unknown, with the detail), ``valid``
(no check failed) and ``flags`` (the failed checks, one line each).
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import KitError
from kit.logs import is_kit_result, kit_requests, read_kit_result
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
    reasons: dict[str, int] = {}
    slow = 0
    for s in busy:
        for bit, name in THROTTLE_BITS.items():
            if s["reasons"] is not None and s["reasons"] & bit:
                reasons[name] = reasons.get(name, 0) + 1
        if s["sm_mhz"] and s["max_sm_mhz"] and s["sm_mhz"] < SLOW_CLOCK * s["max_sm_mhz"]:
            slow += 1
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
        self.host = host
        self.interval_ms = int(interval_ms)
        self.nvidia_smi = nvidia_smi
        self.exe = shutil.which(nvidia_smi) if host is None else nvidia_smi
        self.missing = None if self.exe else f"{nvidia_smi} not found on this machine: clocks not sampled"
        self.samples: list[dict] = []
        self._proc = None
        self._job = None
        self._log = None
        self._out: list[str] = []
        self._thread = None

    def _args(self) -> list[str]:
        return [self.exe, f"--query-gpu={CLOCK_QUERY}", "--format=csv,noheader,nounits", f"-lms={self.interval_ms}"]

    def __enter__(self) -> "ClockSampler":
        if self.host is not None:
            return self._start_on_host()
        if self.exe:
            try:
                self._proc = subprocess.Popen(self._args(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                              text=True)
            except OSError as exc:
                self.missing = f"{self.exe}: {exc}"
                return self
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()
        return self

    def _start_on_host(self) -> "ClockSampler":
        name = getattr(self.host, "name", "host")
        try:
            found = self.host.run(f"command -v {quote(self.nvidia_smi)}", timeout=30)
            if not found.ok or not found.stdout.strip():
                self.missing = f"{name}: {self.nvidia_smi} not found: clocks not sampled"
                return self
            self._log = self.host.private_dir() + f"/clocks-{uuid.uuid4().hex[:12]}.csv"  # 0700: not /tmp
            self._job = self.host.spawn(" ".join(quote(a) for a in self._args()), log=self._log)
        except KitError as exc:
            self.missing = f"{name}: clock sampler not started ({exc})"
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            self._out.append(line)

    def __exit__(self, *exc) -> None:
        if self._job is not None:
            try:
                self._job.stop(grace=5)
                text = self.host.read_bytes(self._log).decode("utf-8", "replace")
                self.host.run(f"rm -f -- {quote(self._log)}", timeout=30)
            except KitError as exc:
                text = ""
                self.missing = f"{getattr(self.host, 'name', 'host')}: clock samples not read ({exc})"
            self.samples = parse_clocks(text, "nvidia-smi")
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
            if self._thread is not None:
                self._thread.join(timeout=5)
            self.samples = parse_clocks("".join(self._out), "nvidia-smi")
        if (self._proc is not None or self._job is not None) and not self.samples and self.missing is None:
            self.missing = "nvidia-smi printed no samples (no GPU visible?)"

    def summary(self) -> dict:
        d = throttle(self.samples)
        d["source"] = "nvidia-smi sampled during the run" if self.samples else None
        d["missing"] = self.missing
        return d


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


def _add(v: Validity, check: str, ok, detail: str) -> None:
    v.checks.append({"check": check, "ok": ok, "detail": detail})


def _check_failed(v: Validity, record: dict, reqs: list | None) -> None:
    """Failed requests: from the per-request list, the totals, or the repeats."""
    if reqs is not None:
        failed = sum(1 for r in reqs if not r.get("ok", True))
        _add(v, "failed requests", failed == 0, f"{failed} of {len(reqs)} requests failed")
    elif "failed" in record or ("completed" in record and "num_prompts" in record):
        failed = (int(record.get("failed") or 0)
                  or max(0, int(record.get("num_prompts", 0)) - int(record.get("completed", 0))))
        _add(v, "failed requests", failed == 0, f"{failed} failed ({record.get('completed')} completed)")
    elif isinstance(record.get("repeats"), list) and record["repeats"] and "failed" in record["repeats"][0]:
        failed = sum(int(r.get("failed") or 0) for r in record["repeats"])
        _add(v, "failed requests", failed == 0, f"{failed} failed over {len(record['repeats'])} repeats")
    else:
        _add(v, "failed requests", None, "the record does not say how many requests failed")


def _check_outputs(v: Validity, record: dict, reqs: list | None) -> None:
    """Outputs shorter than asked."""
    asked = (record.get("max_tokens") or record.get("random_output_len")
             or (record.get("bench") or {}).get("max_tokens"))
    if reqs is not None and asked:
        short = [r for r in reqs if r.get("ok", True) and (r.get("output_tokens") or 0) < asked]
        _add(v, "output length", not short, f"{len(short)} of {len(reqs)} requests produced fewer than the "
             f"{asked} tokens asked (min {min((r.get('output_tokens') or 0) for r in short)})" if short
             else f"every request produced the {asked} tokens asked")
    elif asked and record.get("output_lens"):
        short = [n for n in record["output_lens"] if n < asked]
        _add(v, "output length", not short,
             f"{len(short)} of {len(record['output_lens'])} outputs shorter than {asked}")
    elif asked and record.get("completed") and record.get("total_output_tokens") is not None:
        want = asked * int(record["completed"])
        got = int(record["total_output_tokens"])
        _add(v, "output length", got >= want, f"{got} output tokens for {record['completed']} requests of {asked}")
    else:
        _add(v, "output length", None, "the record does not say how many tokens were asked or produced")


def _check_warmup(v: Validity, record: dict) -> None:
    warm = record.get("warmup", (record.get("bench") or {}).get("warmup", record.get("num_warmups")))
    if warm is None:
        _add(v, "warm-up", None, "the record does not say whether warm-up requests were sent")
    else:
        _add(v, "warm-up", int(warm) > 0, f"{warm} warm-up request(s) before measuring")


def _check_seeded(v: Validity, record: dict) -> None:
    """Prompts seeded: a fixed prompt, or random prompts with a recorded seed."""
    kind = record.get("prompts")
    if kind == "same" or (kind is None and "prompt_words" in record):
        _add(v, "prompts seeded", True, "one fixed prompt text for every request")
    elif kind in ("random", "random-ids") and "seed" not in record:
        _add(v, "prompts seeded", None, "random prompts; the record does not say their seed")
    elif kind in ("random", "random-ids"):
        _add(v, "prompts seeded", record["seed"] is not None, f"random prompts, seed {record['seed']}")
    elif kind is not None:
        _add(v, "prompts seeded", True, f"a fixed prompt set ({kind})")
    elif "seed" in record:
        _add(v, "prompts seeded", record["seed"] is not None, f"seed {record['seed']}")
    else:
        _add(v, "prompts seeded", None, "the record does not say how prompts were drawn")


def _clock_summary(record: dict, clocks) -> dict | None:
    """The ``throttle`` summary from ``clocks`` (a file, samples or a summary), else the record's own."""
    if isinstance(clocks, (str, Path)):
        summary = throttle(parse_clocks(Path(clocks).read_text(encoding="utf-8", errors="replace"), str(clocks)))
        summary["source"] = f"recorded query {clocks}"
        return summary
    if isinstance(clocks, list):
        return throttle(clocks)
    if isinstance(clocks, dict):
        return clocks
    if isinstance(record.get("clocks"), dict):
        return record["clocks"]
    return None


def _check_clocks(v: Validity, summary: dict | None) -> None:
    if summary is None or summary.get("throttled") is None:
        why = (summary or {}).get("missing") or "no GPU clock samples for this run"
        _add(v, "GPU clocks", None, why)
    elif summary["throttled"]:
        reasons = ", ".join(f"{k} ({n} samples)" for k, n in summary.get("reasons", {}).items())
        _add(v, "GPU clocks", False, f"throttled: SM clock down to {summary.get('min_sm_mhz'):.0f} of "
             f"{summary.get('max_sm_mhz') or float('nan'):.0f} MHz" + (f"; {reasons}" if reasons else ""))
    else:
        _add(v, "GPU clocks", True, f"no throttling in {summary['busy_samples']} busy samples "
             f"(SM clock median {summary.get('median_sm_mhz'):.0f} MHz)")


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
    v = Validity(name)
    reqs = _requests(record)
    _check_failed(v, record, reqs)
    _check_outputs(v, record, reqs)
    _check_warmup(v, record)
    _check_seeded(v, record)
    _check_clocks(v, _clock_summary(record, clocks))
    return v


def _requests(record: dict) -> list | None:
    """The per-request records: a kit result's (every level's) or a tool's ``requests`` list."""
    if is_kit_result(record):
        return kit_requests(record)
    return record.get("requests") if isinstance(record.get("requests"), list) else None


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
