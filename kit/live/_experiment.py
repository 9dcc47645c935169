"""experiment: start, bench (and optionally profile), stop a server for each configuration; compare.

Variants come from ``matrix`` (environment variables) and ``flags`` (command-line flags), each a
name -> list of values whose **first value is the baseline**. ``mode="ofat"`` (one factor at a time)
runs the baseline and every other value of one factor with the rest at baseline; ``mode="grid"``
runs every combination. A value of None (or False for a flag) means "not set"; True means a bare
flag (``--disable-cuda-graph``).

Each repeat is one **run**: the engine started fresh, one batch-1 ``single_stream`` repeat, the
engine stopped. Runs are **interleaved** across variants, round by round in alternating direction
(A B C, C B A, ...; :func:`run_order`), so drift of the machine does not masquerade as a speed-up;
the order is in ``plan.json``.

Everything lands in the session under ``experiments/<name>/``: ``plan.json`` (the variants, the run
order, the driver, leftovers stopped), one folder per variant with ``variant.json`` (exact command
and environment), ``result.json`` (its runs so far) and one ``rep<N>/`` per run: ``server.log``
(the engine's log byte for byte), ``engine.json`` (pid, process group, session, tag, port owner),
``bench.json`` (every request) and ``run.json``, written last and atomically; ``traces/`` with
``profile=True``. A run whose ``run.json`` exists with the same command and environment is not run
again, so an interrupted experiment resumes where it stopped; engines of the same experiment that a
killed driver left running are found by their ``KIT_ENGINE_GROUP`` and stopped first.

Statistics: a run's figure is the median decode tok/s of its requests; a variant's tok/s is the mean
of its runs with a 95 % Student-t interval (``plan.json`` ``statistics.covers`` says what it covers);
it differs **significantly** from the baseline when Welch's t-test gives p < ``alpha`` *and* the
speed-up is at least ``min_effect`` away from 1 (a difference too small to matter is not reported as
a finding). ``speedup_lo``/``speedup_hi``: the interval of the per-round ratios to the baseline.
"""
from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
import os
import platform
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from kit.audit import capture_settings, experiment_effects
from kit.bench import LoadResult, mean_ci, single_stream, welch
from kit.errors import ExperimentError, KitError
from kit.ledger import confirmed_if
from kit.live import _engine
from kit.live._server import Server, _open_session
from kit.remote import Host, connect
from kit.session import Provenance
from kit.stats import is_nan
from kit.util import call_settings, frame_figures, recorded, write_atomic
from kit.util import quote as _q

FLAG_NAME = re.compile(r"-?-[A-Za-z0-9][A-Za-z0-9_.-]*")   # --name, -tp
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(kind: str, key) -> None:
    """Flag and variable names reach a host's shell: refused unless plain (values are quoted)."""
    if kind == "flag" and not (isinstance(key, str) and FLAG_NAME.fullmatch(key)):
        raise ExperimentError(f"experiment: flag {key!r} is not a flag name (--name of letters, digits, '_', '.', "
                              f"'-'; the value goes in the list)")
    if kind == "env" and not (isinstance(key, str) and ENV_NAME.fullmatch(key)):
        raise ExperimentError(f"experiment: {key!r} is not an environment variable name")


def _flag_text(flag: str, value) -> str:
    if value is None or value is False:
        return ""
    if value is True:
        return _q(flag)
    return f"{_q(flag)} {_q(str(value))}"


def _setting_text(kind: str, key: str, value) -> str:
    if kind == "env":
        return f"{key}={value}" if value is not None else f"{key} unset"
    if value is True:
        return key
    if value is None or value is False:
        return f"no {key}"
    return f"{key} {value}"


def _as_dict(value, what: str) -> dict | None:
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ExperimentError(f"experiment: {what} is neither a dict nor JSON text ({exc}): "
                                  f"{value[:80]!r}") from None
    if not isinstance(value, dict):
        raise ExperimentError(f"experiment: {what} must map names to lists of values, not {type(value).__name__}")
    return value


def plan(base_cmd: str, matrix: dict | None = None, flags: dict | None = None, *, mode: str = "ofat",
         env: dict | None = None) -> list[dict]:
    """The variants an experiment runs: label, slug, command, environment, settings (no side effects).

    ``matrix`` and ``flags`` may also be given as JSON text (as a papermill ``-p`` parameter arrives)."""
    matrix, flags = _as_dict(matrix, "matrix"), _as_dict(flags, "flags")
    factors = [("env", k, list(v)) for k, v in (matrix or {}).items()] + \
              [("flag", k, list(v)) for k, v in (flags or {}).items()]
    for kind, key, values in factors:
        if not values:
            raise ExperimentError(f"experiment: {key} has no values")
        _check_name(kind, key)
    for key in env or {}:
        _check_name("env", key)
    base = tuple(v[0] for _, _, v in factors)
    if mode == "ofat":
        combos = [base] + [base[:i] + (val,) + base[i + 1:]
                           for i, (_, _, vals) in enumerate(factors) for val in vals[1:]]
    elif mode == "grid":
        combos = list(itertools.product(*[vals for _, _, vals in factors])) if factors else [()]
    else:
        raise ExperimentError(f"experiment: mode must be 'ofat' or 'grid', not {mode!r}")
    out = []
    for i, combo in enumerate(combos):
        e = {k: str(v) for k, v in (env or {}).items() if v is not None}
        cmd = base_cmd
        changed = []
        settings = {}
        for (kind, key, _), val, b in zip(factors, combo, base):
            settings[key] = val
            if kind == "env":
                if val is None:
                    e.pop(key, None)
                else:
                    e[key] = str(val)
            else:
                t = _flag_text(key, val)
                cmd = f"{cmd} {t}" if t else cmd
            if val != b:
                changed.append(_setting_text(kind, key, val))
        label = ", ".join(changed) if changed else "baseline"
        slug = f"v{i:02d}-" + (re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")[:60] or "baseline")
        out.append({"index": i, "label": label, "slug": slug, "cmd": cmd, "env": e, "settings": settings,
                    "baseline": not changed})
    return out


_USABLE = ("ok", "partial")


def _write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1, default=str) + "\n")


class Experiment:
    """An experiment's stored results: ``rows()`` / ``table`` (one row per variant), ``plot()``,
    ``decide()`` a ledger hypothesis. Re-open a stored one with :meth:`Experiment.open`."""

    def __init__(self, session, name: str, *, alpha: float = 0.05, min_effect: float = 0.02) -> None:
        self.session = _open_session(session)
        self.name = name
        self.dir = self.session.path("experiments", name)
        self.alpha = alpha
        self.min_effect = min_effect
        plan_path = self.dir / "plan.json"
        if not plan_path.is_file():
            raise ExperimentError(f"{plan_path}: no experiment stored here")
        try:
            self.meta = json.loads(plan_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ExperimentError(f"{plan_path}: unreadable ({exc})") from None
        self.variants = self.meta["variants"]

    @classmethod
    def open(cls, session, name: str, **kw) -> "Experiment":
        return cls(session, name, **kw)

    def result(self, variant: dict) -> dict | None:
        p = self.dir / variant["slug"] / "result.json"
        if not p.is_file():
            return None
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ExperimentError(f"{p}: unreadable result ({exc})") from None

    def rows(self) -> list[dict]:
        """One dict per variant: tok/s (mean, 95 % CI), TTFT, ITL, speed-up, p-value, significant."""
        results = [self.result(v) for v in self.variants]
        base = next((r for v, r in zip(self.variants, results) if v["baseline"]), None)
        base_vals = [x["decode_tok_s"] for x in base["repeats"]] if base and base.get("status") in _USABLE else []
        base_by_rep = {x.get("repeat"): x["decode_tok_s"] for x in base["repeats"]} if base_vals else {}
        base_mean = mean_ci(base_vals)[0] if base_vals else math.nan
        rows = []
        for v, r in zip(self.variants, results):
            row = {"variant": v["label"], "slug": v["slug"], "status": r["status"] if r else "not run"}
            vals = [x["decode_tok_s"] for x in r["repeats"]] if r and r.get("status") in _USABLE else []
            m, lo, hi = mean_ci(vals)
            row.update(tok_s=m, tok_s_lo=lo, tok_s_hi=hi, n=len(vals),
                       ttft_ms=mean_ci([x["ttft_ms"] for x in r["repeats"]])[0] if vals else math.nan,
                       itl_ms=mean_ci([x["itl_ms"] for x in r["repeats"]])[0] if vals else math.nan,
                       ready_s=(r or {}).get("server", {}).get("ready_s"))
            row["speedup"] = m / base_mean if vals and base_mean and not math.isnan(base_mean) else math.nan
            # paired by round (interleaved runs): the ratio to the baseline of the same round, with its CI
            pairs = [x["decode_tok_s"] / base_by_rep[x.get("repeat")] for x in (r or {}).get("repeats", [])
                     if vals and x.get("repeat") is not None and base_by_rep.get(x.get("repeat"))]
            _, row["speedup_lo"], row["speedup_hi"] = mean_ci(pairs) if len(pairs) > 1 else (0, math.nan, math.nan)
            if v["baseline"] or not vals or not base_vals:
                row["p_value"], row["significant"] = math.nan, False
            else:
                _, p = welch(base_vals, vals)
                row["p_value"] = p
                row["significant"] = bool(p < self.alpha and abs(row["speedup"] - 1.0) >= self.min_effect)
            row["error"] = (r or {}).get("error", "")
            bad = (r or {}).get("invalid_runs") or []
            row["valid"] = not bad if r else None  # run validity (kit.audit.check_run) of every run
            row["validity"] = "; ".join(f"run {b['repeat']}: {', '.join(b['flags'])}" for b in bad)
            rows.append(row)
        return rows

    def effects(self, source: str | None = None):
        """Did each variant take effect? ``kit.audit.experiment_effects`` on this experiment: took effect /
        ignored ("no effect: the engine ignored X") / unknown, from what each run's engine reported
        (``source``: the engine's source tree, to name the function that overrode a flag)."""
        return experiment_effects(self.dir, source=source)

    @property
    def table(self):
        return pd.DataFrame(self.rows())

    def row(self, variant: str) -> dict:
        for r in self.rows():
            if r["variant"] == variant or r["slug"] == variant:
                return r
        raise ExperimentError(f"experiment {self.name}: no variant {variant!r} "
                              f"(have: {', '.join(v['label'] for v in self.variants)})")

    def plot(self, *, title: str | None = None):
        """A/B bars of batch-1 decode tok/s against the baseline, with 95 % intervals; * = significant."""
        from kit.plots import ab_plot  # deferred: matplotlib, only for a figure

        rows = [r for r in self.rows() if r["n"] > 0]
        t = pd.DataFrame([{"config": r["variant"] + (" *" if r["significant"] else ""), "tok_s": r["tok_s"]}
                          for r in rows])
        fig = ab_plot(t, value="tok_s", label="config", baseline="baseline",
                      title=title or f"Experiment {self.name}: batch-1 decode")
        ax = fig.axes[0]
        ys = list(range(len(rows)))[::-1]
        lo = [r["tok_s"] - r["tok_s_lo"] if not math.isnan(r["tok_s_lo"]) else 0 for r in rows]
        hi = [r["tok_s_hi"] - r["tok_s"] if not math.isnan(r["tok_s_hi"]) else 0 for r in rows]
        ax.errorbar([r["tok_s"] for r in rows], ys, xerr=[lo, hi], fmt="none", ecolor="black", capsize=3, lw=1)
        ax.set_xlabel(f"decode tok/s, mean of {self.meta.get('repeats', '?')} repeats, 95 % CI; "
                      f"* p<{self.alpha} and |Δ|≥{self.min_effect:.0%} vs baseline")
        fig.tight_layout()
        return fig

    def decide(self, ledger, id: str, variant: str, *, statement: str, expect: str = "faster",
               source: str = "") -> str:
        """Record hypothesis ``id`` ("``variant`` is ``expect`` than the baseline") in ``ledger``.

        Confirmed when the difference is significant in the expected direction; rejected when it
        is not significant or goes the other way. The hypothesis carries the provenance of the
        experiment's folder in the session (measured by the kit, or a sample). Returns the verdict."""
        if expect not in ("faster", "slower"):
            raise ExperimentError("decide(): expect must be 'faster' or 'slower'")
        r = self.row(variant)
        if r["n"] == 0:
            verdict = confirmed_if(None)
        else:
            right_way = r["speedup"] > 1 if expect == "faster" else r["speedup"] < 1
            verdict = confirmed_if(bool(r["significant"] and right_way))
        ledger.record(id, statement=statement,
                      test=f"experiment {self.name}: {r['variant']} vs baseline, {r['n']} repeats each, Welch t-test "
                           f"(p<{self.alpha}, |speed-up-1|>={self.min_effect})",
                      evidence=f"{r['tok_s']:.1f} tok/s, x{r['speedup']:.3f} vs baseline, p={r['p_value']:.3g}",
                      verdict=verdict, source=source or f"experiment {self.name}",
                      numbers={"tok_s": r["tok_s"], "speedup": r["speedup"], "p_value": r["p_value"],
                               "significant": r["significant"], "repeats": r["n"]},
                      provenance=[self.session.evidence(f"experiments/{self.name}",
                                                        f"experiment {self.name}: variants, benchmarks, logs")
                                  .to_ledger()])
        return verdict

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this experiment: each variant's figures and the table."""
        table = self.table
        return {"inputs": [], "settings": call_settings(args),
                "figures": frame_figures(table, "slug" if "slug" in table else None),
                "tables": {"variants": table}, "label": self.name}

    def __repr__(self) -> str:
        parts = []
        for r in self.rows():
            s = f"{r['variant']}: {r['status']}"
            if r["n"]:
                s += f" {r['tok_s']:.1f} tok/s x{r['speedup']:.3f}" + (" *" if r["significant"] else "")
            if r.get("valid") is False:
                s += f" (NOT VALID: {r['validity']})"
            parts.append(s)
        return f"Experiment({self.name!r}; " + "; ".join(parts) + ")"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("variant", "status", "decode tok/s (95% CI)", "TTFT ms", "ITL ms",
                                                   "speed-up (95% CI by round)", "p", "significant", "not valid"))
        body = ""
        for r in self.rows():
            known = r["n"] > 1 and not is_nan(r["tok_s_lo"])
            ci = (f"{r['tok_s']:.1f} [{r['tok_s_lo']:.1f}, {r['tok_s_hi']:.1f}]" if known else
                  f"{r['tok_s']:.1f} (too few repeats for an interval)" if r["n"] > 1 else
                  f"{r['tok_s']:.1f}" if r["n"] else "")
            body += (f"<tr><td>{html.escape(r['variant'])}</td><td>{html.escape(r['status'])}</td><td>{ci}</td>"
                     f"<td>{r['ttft_ms']:.1f}</td><td>{r['itl_ms']:.2f}</td><td>{r['speedup']:.3f}"
                     + (f" [{r['speedup_lo']:.3f}, {r['speedup_hi']:.3f}]"
                        if not math.isnan(r.get("speedup_lo", math.nan)) else "") + "</td>"
                     f"<td>{'' if math.isnan(r['p_value']) else format(r['p_value'], '.3g')}</td>"
                     f"<td>{'yes' if r['significant'] else ''}</td>"
                     f"<td>{html.escape(r['validity']) if r.get('valid') is False else ''}</td></tr>")
        covers = (self.meta.get("statistics") or {}).get("covers", "")
        return (f"<div><b>experiment</b> <code>{html.escape(self.name)}</code><table><tr>{head}</tr>{body}</table>"
                + (f"<small>95 % intervals: {html.escape(covers)}</small>" if covers else "") + "</div>")


def _group_id(sess, name: str) -> str:
    """The experiment's identity on the host (``KIT_ENGINE_GROUP``): the same on every re-run of
    this experiment in this session, so a re-run finds the engines an earlier, killed driver left."""
    key = f"{sess.root.resolve()}::{name}"
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)[:40]}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"


def _driver_alive(rec: dict) -> bool:
    drv = rec.get("driver") or {}
    if drv.get("host") != socket.gethostname() or not drv.get("pid") or drv["pid"] == os.getpid():
        return False
    try:
        os.kill(int(drv["pid"]), 0)
    except (OSError, ValueError):
        return False
    try:  # a reused pid is not a driver: it must still be a Python
        return "python" in Path(f"/proc/{int(drv['pid'])}/cmdline").read_bytes().decode(errors="replace").lower()
    except OSError:
        return True


def _clean_leftovers(h, group: str, d: Path) -> list[dict]:
    """Engines of this experiment still running on the host (a driver killed by ``kill -9``, a closed
    laptop): stop them, or raise naming them when their driver is still alive on this machine."""
    pids = _engine.tagged_pids(h, _engine.GROUP_VAR, group)
    if not pids:
        return []
    recs = []
    for f in sorted(d.glob("*/*/engine.json")):
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if rec.get("group") == group and not rec.get("stopped"):
            recs.append(dict(rec, file=str(f.relative_to(d))))
    busy = [r for r in recs if _driver_alive(r)]
    if busy:
        raise ExperimentError(
            f"experiment {d.name}: engines {pids} on {h.name} belong to a run still in progress (driver pid "
            f"{busy[0]['driver']['pid']}, {busy[0]['file']}); stop that run first, or wait for it")
    found, how = _engine.kill_tagged(h, _engine.GROUP_VAR, group, grace=10)
    return [{"pids": found, "stopped": how, "records": [r["file"] for r in recs],
             "at": time.strftime("%Y-%m-%d %H:%M:%S")}]


def run_order(variants: list[dict], repeats: int, interleave: bool = True) -> list[tuple[int, int]]:
    """(variant index, repeat) in the order they run. Interleaved: round r runs every variant, in
    plan order on even rounds and reversed on odd ones (A B C, C B A, ...), so a slow drift of the
    machine falls on every variant alike instead of on whichever ran last; blocks: A A A B B B."""
    n = len(variants)
    if not interleave:
        return [(i, r) for i in range(n) for r in range(repeats)]
    return [(i, r) for r in range(repeats) for i in (range(n) if r % 2 == 0 else range(n - 1, -1, -1))]


def _aggregate(v: dict, runs: list[dict | None], h_name: str) -> dict:
    done = [r for r in runs if r is not None]
    ok = [r for r in done if r["status"] == "ok"]
    failed = [r for r in done if r["status"] != "ok"]
    status = ("not run" if not done else "failed" if not ok else "ok" if len(done) == len(runs) else "partial")
    out: dict[str, Any] = {"label": v["label"], "cmd": v["cmd"], "env": v["env"], "host": h_name, "status": status,
                           "repeats": [dict(r["bench"], repeat=r["repeat"], order=r["order"],
                                            engine_pid=r["engine"]["pid"], port_owner=r["engine"]["port_owner"])
                                       for r in ok],
                           "failed_runs": len(failed),
                           "invalid_runs": [{"repeat": r["repeat"], "flags": r["validity"]["flags"]} for r in ok
                                            if r.get("validity") and not r["validity"]["valid"]],
                           "runs": [{"repeat": r["repeat"], "order": r["order"], "status": r["status"],
                                     "dir": r["dir"]} for r in done],
                           "started": min((r["started"] for r in done), default=None),
                           "finished": max((r["finished"] for r in done), default=None)}
    if failed:
        out["error"] = failed[-1].get("error", "")
        out["log_tail"] = failed[-1].get("log_tail", "")
    if done:
        out["server"] = done[-1]["server"]
    return out


@recorded("experiment")
def experiment(base_cmd: str, *, matrix: dict | None = None, flags: dict | None = None, host="local",
               mode: str = "ofat", repeats: int = 3, profile: bool = False, profile_steps: int = 20,
               session=None, name: str = "experiment", env: dict | None = None, port: int | str | None = None,
               engine: str | None = None, bench: dict | None = None, ready_timeout: float = 900.0,
               progress: bool = True, alpha: float = 0.05, min_effect: float = 0.02, url: str | None = None,
               cwd: str | None = None, workdir: str | None = None,
               on_variant: Callable[[dict, dict], None] | None = None, interleave: bool = True) -> Experiment:
    """Run every variant of ``base_cmd`` (see the module doc) and return the :class:`Experiment`.

    Each repeat of each variant is one run on a freshly started engine (:func:`kit.live.server`):
    start, one batch-1 ``kit.bench.single_stream`` repeat (options in ``bench``), a profile of
    ``profile_steps`` steps if ``profile`` (first repeat), stop. With ``interleave`` (default) the
    runs go round by round, alternating direction (:func:`run_order`), and the order is recorded.
    A run that fails to start or to bench is stored as failed with its error and log tail; the
    others still run. ``on_variant(variant, result)`` is called after each stored run with the
    variant's results so far. Finished runs are skipped on a re-run; engines of this experiment
    that an earlier driver left running are stopped first (``plan.json`` ``leftovers``).
    ``port``: a number, None (the command's or the engine's default) or ``"free"`` (a free port
    for each engine).
    """
    sess = _open_session(session)
    matrix, flags, bench = _as_dict(matrix, "matrix"), _as_dict(flags, "flags"), _as_dict(bench, "bench")
    variants = plan(base_cmd, matrix, flags, mode=mode, env=env)
    h = host if isinstance(host, Host) else connect(host)
    d = sess.path("experiments", name)
    d.mkdir(parents=True, exist_ok=True)
    group = _group_id(sess, name)
    order = run_order(variants, repeats, interleave)
    covers = ("each repeat is a fresh engine start; " + (
        "repeats interleaved across variants (rounds alternate direction), so the 95 % interval covers "
        "engine restarts, run-to-run noise and slow drift of the machine during the experiment"
        if interleave else "repeats of a variant run back to back, so the 95 % interval covers engine "
        "restarts and run-to-run noise but not drift between variants (a drift shows as a difference)")
        + "; not other machines, days or software versions")
    meta = {"name": name, "base_cmd": base_cmd, "matrix": matrix or {}, "flags": flags or {}, "mode": mode,
            "repeats": repeats, "host": h.name, "bench": bench or {}, "profile": profile, "variants": variants,
            "interleave": interleave, "group": group,
            "order": [{"variant": variants[i]["slug"], "repeat": r} for i, r in order],
            "driver": {"host": socket.gethostname(), "pid": os.getpid(),
                       "python": sys.version.split()[0], "platform": platform.platform()},
            "statistics": {"alpha": alpha, "min_effect": min_effect, "test": "Welch t-test on per-repeat "
                           "median decode tok/s; CI: Student t 95 %", "covers": covers}}
    old = d / "plan.json"
    leftovers: list = []
    if old.is_file():
        prev = json.loads(old.read_text(encoding="utf-8"))
        if [(v["cmd"], v["env"]) for v in prev.get("variants", [])] != [(v["cmd"], v["env"]) for v in variants]:
            raise ExperimentError(f"{old}: a different experiment is stored under the name {name!r}; "
                                  f"choose another name or remove that folder")
        leftovers = list(prev.get("leftovers", []))
    leftovers += _clean_leftovers(h, group, d)
    meta["leftovers"] = leftovers
    _write_json(old, meta)
    sess.record(f"experiments/{name}", Provenance.measured(
        host=h.name, how=f"kit.experiment ({mode}, {repeats} repeats{', interleaved' if interleave else ''}): "
                         f"{base_cmd}", note="per-variant command and environment in variant.json"))
    bench_kw = {"requests": 6, "warmup": 2, "max_tokens": 64, "prompt_tokens": 32, **(bench or {}),
                "concurrency": (1,), "repeats": 1}
    server_kw = dict(port=port, engine=engine, ready_timeout=ready_timeout, progress=progress, url=url, cwd=cwd,
                     group=group, **({"workdir": workdir} if workdir else {}))  # None: the Server's default
    exp = Experiment(sess, name, alpha=alpha, min_effect=min_effect)
    runs: dict[int, list[dict | None]] = {i: [None] * repeats for i in range(len(variants))}
    for i, v in enumerate(variants):
        vdir = d / v["slug"]
        vdir.mkdir(parents=True, exist_ok=True)
        _write_json(vdir / "variant.json", {k: v[k] for k in ("label", "cmd", "env", "settings")})
        for r in range(repeats):
            f = vdir / f"rep{r}" / "run.json"
            if f.is_file():
                try:
                    rec = json.loads(f.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if rec.get("cmd") == v["cmd"] and rec.get("env") == v["env"]:
                    runs[i][r] = rec
    for k, (i, r) in enumerate(order):
        v = variants[i]
        if runs[i][r] is not None:
            continue
        runs[i][r] = _one_run(h, sess, d, v, r, k, name, server_kw, bench_kw, profile and r == 0, profile_steps)
        result = _aggregate(v, runs[i], h.name)
        _write_json(d / v["slug"] / "result.json", result)
        if on_variant is not None:
            on_variant(v, dict(result, repeat=r))
    return exp


def _bench_row(res: LoadResult) -> dict:
    """The figures a run keeps from its batch-1 repeat (medians per request; output tok/s of the run)."""
    lv = res.levels[0]
    rep, reqs = lv["per_repeat"][0], [q for q in lv["requests"] if q.get("ok")]
    med = {k: float(sorted(q.get(k, 0) for q in reqs)[len(reqs) // 2]) if reqs else None
           for k in ("reasoning_tokens", "answer_tokens")}
    return {"decode_tok_s": rep["decode_tok_s"], "ttft_ms": rep["ttft_ms_p50"], "itl_ms": rep["itl_ms_p50"],
            "tpot_ms": rep["tpot_ms_p50"], "output_tok_s": rep["output_tok_s"], **med, "ok": rep["requests_ok"],
            "failed": rep["requests_failed"]}


def _one_run(h, sess, d: Path, v: dict, r: int, k: int, name: str, server_kw: dict, bench_kw: dict, profile: bool,
             profile_steps: int) -> dict:
    """One engine start, one bench repeat (and a profile), stop; ``rep<r>/run.json`` written last."""
    rdir = d / v["slug"] / f"rep{r}"
    rdir.mkdir(parents=True, exist_ok=True)
    run: dict[str, Any] = {"label": v["label"], "cmd": v["cmd"], "env": v["env"], "host": h.name, "repeat": r,
                           "order": k, "dir": f"{v['slug']}/rep{r}", "status": "failed",
                           "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    srv = None
    try:
        srv = Server(h, v["cmd"], env=v["env"], session=sess, name=f"{name}-{v['slug']}-r{r}",
                     log=rdir / "server.log", record=rdir / "engine.json", **server_kw)
        with srv:
            # what the engine reports about itself (get_server_info, /proc/PID/environ), for kit.audit
            run["settings"] = capture_settings(srv.url, rdir, host=h, pid=srv.job.pid if srv.job else None)
            res: LoadResult = single_stream(srv.url, save=rdir / "bench.json", clocks=h, **bench_kw)
            run["validity"] = res.data.get("validity")  # kit.audit.check_run: failed, short, warm-up, seeded, clocks
            run["bench"] = _bench_row(res)
            if profile:
                srv.profile(steps=profile_steps, name=f"{name}-{v['slug']}", parse=False, into=d / v["slug"] / "traces")
            run["status"] = "ok"
    except KitError as exc:
        run["error"] = str(exc)
        try:
            run["log_tail"] = getattr(exc, "tail", "") or (srv.tail(15) if srv is not None and srv.job else "")
        except KitError:  # the host went away too: the error says what happened
            run["log_tail"] = ""
    run["server"] = srv.describe() if srv is not None else {}
    run["engine"] = ({"pid": srv.job.pid if srv.job else None, "tag": srv.tag, "port": srv.port,
                      "port_owner": srv.owner, "stopped": srv.stopped} if srv is not None else
                     {"pid": None, "tag": None, "port": server_kw["port"], "port_owner": "not started",
                      "stopped": None})
    run["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    _write_json(rdir / "run.json", run)
    return run
