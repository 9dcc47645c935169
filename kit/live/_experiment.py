"""experiment: start, bench (and optionally profile), stop a server for each configuration; compare.

Variants come from ``matrix`` (environment variables) and ``flags`` (command-line flags), each a
name -> list of values whose **first value is the baseline**. ``mode="ofat"`` (one factor at a time)
runs the baseline and every other value of one factor with the rest at baseline; ``mode="grid"``
runs every combination. A value of None (or False for a flag) means "not set"; True means a bare
flag (``--disable-cuda-graph``).

Everything lands in the session under ``experiments/<name>/``: ``plan.json`` (the variants),
one folder per variant with ``variant.json`` (exact command and environment), ``server.log``,
``bench.json`` (every request), ``traces/`` (with ``profile=True``) and ``result.json``, written
last and atomically. A variant whose ``result.json`` exists with the same command and environment
is not run again, so an interrupted experiment resumes where it stopped.

Statistics: each repeat is one batch-1 ``single_stream`` repeat (median decode tok/s of its
requests); a variant's tok/s is the mean of its repeats with a 95 % Student-t interval; it differs
**significantly** from the baseline when Welch's t-test gives p < ``alpha`` *and* the speed-up is at
least ``min_effect`` away from 1 (a difference too small to matter is not reported as a finding).
"""
from __future__ import annotations

import html
import itertools
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Callable

from kit.bench import BenchResult, mean_ci, single_stream, welch
from kit.errors import ExperimentError, KitError
from kit.live._server import Server, _open_session
from kit.util import quote as _q
from kit.util import write_atomic


def _flag_text(flag: str, value) -> str:
    if value is None or value is False:
        return ""
    if value is True:
        return flag
    return f"{flag} {_q(str(value))}"


def _setting_text(kind: str, key: str, value) -> str:
    if kind == "env":
        return f"{key}={value}" if value is not None else f"{key} unset"
    if value is True:
        return key
    if value is None or value is False:
        return f"no {key}"
    return f"{key} {value}"


def plan(base_cmd: str, matrix: dict | None = None, flags: dict | None = None, *, mode: str = "ofat",
         env: dict | None = None) -> list[dict]:
    """The variants an experiment runs: label, slug, command, environment, settings (no side effects)."""
    factors = [("env", k, list(v)) for k, v in (matrix or {}).items()] + \
              [("flag", k, list(v)) for k, v in (flags or {}).items()]
    for kind, key, values in factors:
        if not values:
            raise ExperimentError(f"experiment: {key} has no values")
        if kind == "env" and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ExperimentError(f"experiment: {key!r} is not an environment variable name")
        if kind == "flag" and not key.startswith("-"):
            raise ExperimentError(f"experiment: flag {key!r} must start with '-'")
    base = tuple(v[0] for _, _, v in factors)
    if mode == "ofat":
        combos = [base] + [base[:i] + (val,) + base[i + 1:] for i, (_, _, vals) in enumerate(factors) for val in vals[1:]]
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
        base_vals = [x["decode_tok_s"] for x in base["repeats"]] if base and base.get("status") == "ok" else []
        base_mean = mean_ci(base_vals)[0] if base_vals else math.nan
        rows = []
        for v, r in zip(self.variants, results):
            row = {"variant": v["label"], "slug": v["slug"], "status": r["status"] if r else "not run"}
            vals = [x["decode_tok_s"] for x in r["repeats"]] if r and r.get("status") == "ok" else []
            m, lo, hi = mean_ci(vals)
            row.update(tok_s=m, tok_s_lo=lo, tok_s_hi=hi, n=len(vals),
                       ttft_ms=mean_ci([x["ttft_ms"] for x in r["repeats"]])[0] if vals else math.nan,
                       itl_ms=mean_ci([x["itl_ms"] for x in r["repeats"]])[0] if vals else math.nan,
                       ready_s=(r or {}).get("server", {}).get("ready_s"))
            row["speedup"] = m / base_mean if vals and base_mean and not math.isnan(base_mean) else math.nan
            if v["baseline"] or not vals or not base_vals:
                row["p_value"], row["significant"] = math.nan, False
            else:
                _, p = welch(base_vals, vals)
                row["p_value"] = p
                row["significant"] = bool(p < self.alpha and abs(row["speedup"] - 1.0) >= self.min_effect)
            row["error"] = (r or {}).get("error", "")
            rows.append(row)
        return rows

    @property
    def table(self):
        import pandas as pd

        return pd.DataFrame(self.rows())

    def row(self, variant: str) -> dict:
        for r in self.rows():
            if r["variant"] == variant or r["slug"] == variant:
                return r
        raise ExperimentError(f"experiment {self.name}: no variant {variant!r} "
                              f"(have: {', '.join(v['label'] for v in self.variants)})")

    def plot(self, *, title: str | None = None):
        """A/B bars of batch-1 decode tok/s against the baseline, with 95 % intervals; * = significant."""
        import pandas as pd

        from kit.plots import ab_plot

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
        from kit.ledger import confirmed_if

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

    def __repr__(self) -> str:
        parts = []
        for r in self.rows():
            s = f"{r['variant']}: {r['status']}"
            if r["n"]:
                s += f" {r['tok_s']:.1f} tok/s x{r['speedup']:.3f}" + (" *" if r["significant"] else "")
            parts.append(s)
        return f"Experiment({self.name!r}; " + "; ".join(parts) + ")"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("variant", "status", "decode tok/s (95% CI)", "TTFT ms", "ITL ms",
                                                   "speed-up", "p", "significant"))
        body = ""
        for r in self.rows():
            ci = (f"{r['tok_s']:.1f} [{r['tok_s_lo']:.1f}, {r['tok_s_hi']:.1f}]" if r["n"] > 1 else
                  f"{r['tok_s']:.1f}" if r["n"] else "")
            body += (f"<tr><td>{html.escape(r['variant'])}</td><td>{html.escape(r['status'])}</td><td>{ci}</td>"
                     f"<td>{r['ttft_ms']:.1f}</td><td>{r['itl_ms']:.2f}</td><td>{r['speedup']:.3f}</td>"
                     f"<td>{_p(r['p_value'])}</td>"
                     f"<td>{'yes' if r['significant'] else ''}</td></tr>")
        return f"<div><b>experiment</b> <code>{html.escape(self.name)}</code><table><tr>{head}</tr>{body}</table></div>"


def _p(p: float) -> str:
    return "" if math.isnan(p) else f"{p:.3g}"


def experiment(base_cmd: str, *, matrix: dict | None = None, flags: dict | None = None, host="local",
               mode: str = "ofat", repeats: int = 3, profile: bool = False, profile_steps: int = 20,
               session=None, name: str = "experiment", env: dict | None = None, port: int | None = None,
               engine: str | None = None, bench: dict | None = None, ready_timeout: float = 900.0,
               progress: bool = True, alpha: float = 0.05, min_effect: float = 0.02, url: str | None = None,
               cwd: str | None = None, workdir: str | None = None,
               on_variant: Callable[[dict, dict], None] | None = None) -> Experiment:
    """Run every variant of ``base_cmd`` (see the module doc) and return the :class:`Experiment`.

    Per variant: start the server (:func:`kit.live.server`), ``repeats`` batch-1 repeats of
    ``kit.bench.single_stream`` (options in ``bench``), a profile of ``profile_steps`` steps if
    ``profile``, stop. A variant that fails to start or to bench is stored as failed with its
    error and log tail; the others still run. ``on_variant(variant, result)`` is called after each
    stored variant (e.g. to report progress). Finished variants are skipped on a re-run.
    """
    from kit.remote import Host, connect
    from kit.session import Provenance

    sess = _open_session(session)
    variants = plan(base_cmd, matrix, flags, mode=mode, env=env)
    h = host if isinstance(host, Host) else connect(host)
    d = sess.path("experiments", name)
    d.mkdir(parents=True, exist_ok=True)
    meta = {"name": name, "base_cmd": base_cmd, "matrix": matrix or {}, "flags": flags or {}, "mode": mode,
            "repeats": repeats, "host": h.name, "bench": bench or {}, "profile": profile, "variants": variants,
            "statistics": {"alpha": alpha, "min_effect": min_effect, "test": "Welch t-test on per-repeat "
                           "median decode tok/s; CI: Student t 95 %"}}
    old = d / "plan.json"
    if old.is_file():
        prev = json.loads(old.read_text(encoding="utf-8"))
        if [v["cmd"] for v in prev.get("variants", [])] != [v["cmd"] for v in variants] or \
                [v["env"] for v in prev.get("variants", [])] != [v["env"] for v in variants]:
            raise ExperimentError(f"{old}: a different experiment is stored under the name {name!r}; "
                                  f"choose another name or remove that folder")
    _write_json(old, meta)
    sess.record(f"experiments/{name}", Provenance.measured(
        host=h.name, how=f"kit.experiment ({mode}, {repeats} repeats): {base_cmd}",
        note="per-variant command and environment in variant.json"))
    bench_kw = {"requests": 6, "warmup": 2, "max_tokens": 64, "prompt_tokens": 32}
    bench_kw.update(bench or {})
    bench_kw["concurrency"] = (1,)
    bench_kw["repeats"] = repeats
    exp = Experiment(sess, name, alpha=alpha, min_effect=min_effect)
    for v in variants:
        vdir = d / v["slug"]
        done = exp.result(v)
        if done is not None and done.get("cmd") == v["cmd"] and done.get("env") == v["env"]:
            continue
        vdir.mkdir(parents=True, exist_ok=True)
        _write_json(vdir / "variant.json", {k: v[k] for k in ("label", "cmd", "env", "settings")})
        result: dict[str, Any] = {"label": v["label"], "cmd": v["cmd"], "env": v["env"], "host": h.name,
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S"), "status": "failed", "repeats": []}
        srv = Server(h, v["cmd"], env=v["env"], port=port, engine=engine, session=sess,
                     name=f"{name}-{v['slug']}", ready_timeout=ready_timeout, progress=progress, url=url,
                     cwd=cwd, workdir=workdir, log=vdir / "server.log")
        try:
            with srv:
                res: BenchResult = single_stream(srv.url, save=vdir / "bench.json", **bench_kw)
                result["repeats"] = [{k: r[k] for k in ("decode_tok_s", "ttft_ms", "itl_ms", "tpot_ms", "output_tok_s",
                                                        "ok", "failed")} for r in res.repeats]
                if profile:
                    srv.profile(steps=profile_steps, name=f"{name}-{v['slug']}", parse=False,
                                into=vdir / "traces")
                result["status"] = "ok"
        except KitError as exc:
            result["error"] = str(exc)
            result["log_tail"] = getattr(exc, "tail", "") or srv.tail(15) if srv.job else ""
        result["server"] = srv.describe()
        result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        _write_json(vdir / "result.json", result)
        if on_variant is not None:
            on_variant(v, result)
    return exp
