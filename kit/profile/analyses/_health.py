"""``Profile.health()``: can this trace's numbers be trusted, metric by metric?

What the trace says about its own capture: the capture mode (eager; CUDA-graph replay with
per-kernel timing; graph replay without it, where kernels carry zero durations; graph replay as one
block per replay), the share of GPU time linked to a CPU op and to an ``nn.Module``, the launch APIs
seen, communication kernels recognised or not (and collectives the CPU called that launched no
kernel), events dropped or repaired by the reader, prefill and decode in one window, and the
profiler's overhead (GPU idle inside launch-bound eager steps, which the profiler's CPU work lengthens).

From those, each metric a summary reports gets ``usable``, ``degraded`` or ``unreliable`` with the
reason and the capture that would fix it: ``category_shares`` (share of kernel time per category),
``step_time`` (decode step wall time and the idle/wall shares), ``allreduce_share``, ``op_view``
(kernels per CPU op) and ``module_view`` (``Profile.modules()``).

The thresholds are checked on the kit's recorded fixtures against CUDA-event step times measured
without the profiler and per-module GPU times measured outside it (tests/profile/test_health.py).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kit.profile.attribution._categories import COMM
from kit.profile.attribution._evidence import UNDECIDED_WARN, undecided_detail
from kit.stats import is_nan
from kit.util import jsonable

USABLE, DEGRADED, UNRELIABLE = "usable", "degraded", "unreliable"
METRICS = ("category_shares", "step_time", "allreduce_share", "op_view", "module_view")
COMM_NAME = re.compile(r"(?i)nccl|rccl|all_?reduce|reduce_?scatter|all_?gather|all_?to_?all|cross_device_reduce|"
                       r"multimem|lamport|custom_?ar|one_?shot|two_?shot|quick_?reduce|mscclpp|deep_?ep|sendrecv")
GRAPH_BLOCK = re.compile(r"(?i)^\s*\[?cuda ?graph|graph ?launch|^graph\b")
IDLE_LAUNCH_BOUND = 0.30   # GPU idle share inside eager steps above which the profiler's CPU cost shows
LINKED_USABLE, LINKED_DEGRADED = 0.90, 0.50
OTHER_DEGRADED, OTHER_UNRELIABLE = 0.10, 0.50
UNDECIDED_DEGRADED = UNDECIDED_WARN   # the summary warns from the same share


@dataclass
class Health:
    """The trust verdict of one profile: ``capture`` facts and ``metrics`` (metric -> status, reason, fix).

    ``to_dict()`` is the ``kit profile check --json`` output."""

    files: list[str]
    capture: dict
    metrics: dict
    notes: list[str] = field(default_factory=list)

    def status(self, metric: str) -> str:
        return self.metrics[metric]["status"]

    @property
    def usable(self) -> list[str]:
        return [m for m, v in self.metrics.items() if v["status"] == USABLE]

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"metric": m, **v} for m, v in self.metrics.items()],
                            columns=["metric", "status", "reason", "fix"])

    def to_dict(self) -> dict:
        return {"files": list(self.files), "capture": _plain(self.capture), "metrics": dict(self.metrics),
                "notes": list(self.notes)}

    def __repr__(self) -> str:
        c = self.capture
        lines = [f"Health: {c['mode']}; GPU time linked to a CPU op {_pct(c['op_linked_share'])}, to a module "
                 f"{_pct(c['module_linked_share'])}; launch APIs {', '.join(c['launch_apis']) or 'none'}",
                 f"  communication kernels: {c['comm_kernels']} recognised, {c['comm_unrecognised']} not; "
                 f"events dropped/repaired: {c['events_dropped']}/{c['events_repaired']}; phases: "
                 f"{', '.join(c['phases']) or 'none'}{' (mixed window)' if c['mixed_phases'] else ''}; "
                 f"GPU idle inside steps {_pct(c['idle_in_steps'])}"]
        for m, v in self.metrics.items():
            lines.append(f"  {m:<16} {v['status']:<10} {v['reason']}" + (f" -> {v['fix']}" if v["fix"] else ""))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colour = {USABLE: "#c8e6c9", DEGRADED: "#fff9c4", UNRELIABLE: "#ef9a9a"}
        rows = "".join(f"<tr style='background:{colour[v['status']]}'><td>{m}</td><td>{v['status']}</td>"
                       f"<td>{html.escape(v['reason'])}</td><td>{html.escape(v['fix'])}</td></tr>"
                       for m, v in self.metrics.items())
        head = "<br>".join(html.escape(x) for x in repr(self).splitlines()[:2])
        return (f"<div><b>Trace health</b><br><small>{head}</small><table><thead><tr><th>metric</th><th>status</th>"
                f"<th>reason</th><th>what would fix it</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _pct(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.0f}%"


def _plain(d: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in jsonable(d).items()}


def _m(status: str, reason: str, fix: str = "") -> dict:
    return {"status": status, "reason": reason, "fix": fix}


def capture_facts(p) -> dict:
    """What the trace says about how it was captured (see the module docstring)."""
    k = p.kernels
    n = len(k)
    total = float(k["dur_us"].sum()) if n else 0.0
    graph = k["graph"].astype(bool).to_numpy() if n else np.zeros(0, bool)
    dur = k["dur_us"].to_numpy(dtype=float) if n else np.zeros(0)
    launch = k["launch"].astype(str).to_numpy() if n else np.zeros(0, object)
    n_graph = int(graph.sum())
    zero_graph = int(((dur == 0) & graph).sum())
    zero_all = int((dur == 0).sum())
    names = k["name"].astype(str) if n else pd.Series(dtype=str)
    block = names.str.contains(GRAPH_BLOCK).to_numpy() if n else np.zeros(0, bool)
    block_share = float(dur[block].sum() / total) if total else 0.0
    if n and ((n_graph / n >= 0.05 and zero_graph / max(n_graph, 1) >= 0.5) or zero_all / n >= 0.5):
        mode = "graph replay without per-kernel timing"
    elif block_share >= 0.5:
        mode = "graph replay as one block"
    elif n and n_graph / n >= 0.05:
        mode = "graph replay with per-kernel timing"
    elif n:
        mode = "eager"
    else:
        mode = "no GPU kernels"

    def share(mask) -> float:
        return float(dur[mask].sum() / total) if total else float("nan")

    # kernels placed by alignment with a reference run (_place.py) count as linked: they carry its op
    placed = (k["placed"].astype(str).to_numpy() == "aligned") if n and "placed" in k else np.zeros(n, bool)
    op_linked = share(((launch != "") & ~graph) | placed)
    module = k["module"].astype(object).to_numpy() if n else np.zeros(0, object)
    mod_mask = np.array([m is not None and not is_nan(m) and str(m) not in ("", "(no module)") for m in module], bool)
    module_linked = share(mod_mask)
    apis = k.loc[k["launch"].astype(str) != "", "launch"].astype(str).value_counts() if n else pd.Series(dtype=int)
    cat = k["category"].astype(str).to_numpy() if n else np.zeros(0, object)
    is_comm_name = names.str.contains(COMM_NAME).to_numpy() if n else np.zeros(0, bool)
    comm_cat = np.isin(cat, COMM)
    unrec = is_comm_name & ~comm_cat
    other = share(cat == "other")
    comms = p.comms
    multi_calls = int((comms["group_size"] > 1).sum()) if len(comms) and "group_size" in comms else 0
    dropped, repaired = (sum(int(m.group(1).replace(",", "")) for w in p.warnings if (m := re.search(rx, w)))
                         for rx in (r"([\d,]+) [\w \-]*?event[s]?[^;]*? dropped", r"([\d,]+) [^;]*? repaired"))
    truncated = any(r.get("truncated") for r in p.meta.get("ranks", {}).values())
    steps = p.steps
    phases = sorted(set(steps["phase"].astype(str))) if len(steps) else []
    unknown_phase = share(k["phase"].astype(str).to_numpy() == "unknown") if n else float("nan")
    idle = float("nan")
    if len(steps) and n:
        in_step = k["step"].to_numpy() >= 0
        wall = float(steps["wall_us"].sum())
        if wall > 0:
            idle = max(0.0, 1.0 - float(dur[in_step].sum()) / wall)
    world = max([int((r.get("distributed") or {}).get("world_size", 1) or 1)
                 for r in p.meta.get("ranks", {}).values()] or [1])
    from_gpu = bool(len(steps)) and set(steps["span_from"].astype(str)) == {"gpu annotation"}
    return {"mode": mode, "kernels": n, "steps_from_gpu_annotations": from_gpu, "gpu_time_us": total,
            "graph_kernels": n_graph,
            "zero_duration_kernels": zero_all, "graph_block_share": block_share,
            "op_linked_share": op_linked, "module_linked_share": module_linked,
            "launch_apis": [f"{a} ({c})" for a, c in apis.items()],
            "comm_kernels": int((is_comm_name & comm_cat).sum()), "comm_unrecognised": int(unrec.sum()),
            "comm_unrecognised_names": sorted(set(names[unrec]))[:5] if n else [],
            "cpu_collectives": int(len(comms)), "cpu_collectives_multi_rank": multi_calls,
            "other_share": other, **_flag_facts(p, total), "events_dropped": dropped, "events_repaired": repaired,
            "truncated": truncated,
            "phases": phases, "mixed_phases": len(set(phases) & {"prefill", "decode"}) == 2,
            "unknown_phase_share": unknown_phase, "idle_in_steps": idle, "steps": int(len(steps)),
            "ranks": len(p.ranks), "world_size": world}


def _flag_facts(p, total: float) -> dict:
    """The undecided share (the summary's figure, per category and unclaimed class), what a truncation
    lost, and the steps whose span is unknown."""
    k, steps = p.kernels, p.steps
    und, per, cls = undecided_detail(k, p.rules) if len(k) and total > 0 else (0.0, {}, {})
    cut = [w.split("GPU time lost: ", 1)[1].split(". Category shares", 1)[0] for w in p.warnings
           if "truncated trace" in w and "GPU time lost: " in w]
    unknown = int(steps["span_from"].astype(str).str.startswith("unknown").sum()) if len(steps) else 0
    return {"undecided_share": und, "undecided_by_category": per, "undecided_classes": cls,
            "truncation": "; ".join(cut) or None, "steps_span_unknown": unknown}


_FIX_TIMING = ("capture graph replay with per-kernel timing (a PyTorch/CUPTI that records graph kernels, or "
               "nsys --cuda-graph-trace=node), or profile an eager run for shares")


def _no_timing(c: dict) -> bool:
    return c["mode"] == "graph replay without per-kernel timing"


def _block(c: dict) -> bool:
    return c["mode"] == "graph replay as one block"


def _category_shares(c: dict) -> dict:
    """Whether the category shares can be read: kernel durations recorded and kernels categorised."""
    if _no_timing(c):
        return _m(UNRELIABLE, f"{c['zero_duration_kernels']:,} of {c['kernels']:,} kernels "
                  "have zero duration (graph replay recorded without per-kernel timing)", _FIX_TIMING)
    if _block(c):
        return _m(UNRELIABLE, f"{_pct(c['graph_block_share'])} of GPU time is whole CUDA-graph "
                  "replays shown as one block", _FIX_TIMING)
    if c["other_share"] >= OTHER_UNRELIABLE:
        return _m(UNRELIABLE, f"{_pct(c['other_share'])} of kernel time matches no category",
                  "add rules (kit.profile.load(rules=...)) for the kernel names in 'other'")
    und = c.get("undecided_share") or 0.0
    why, fix = [], []
    if c["other_share"] >= OTHER_DEGRADED:
        why.append(f"{_pct(c['other_share'])} of kernel time uncategorised")
        fix.append("add category rules for the kernel names in 'other'")
    if und >= UNDECIDED_DEGRADED:
        per = ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(c["undecided_by_category"].items(),
                                                                 key=lambda x: -x[1])[:4])
        why.append(f"{100 * und:.1f}% of kernel time undecided ({per}): a generic kernel name alone, an op "
                   f"sequence with more than one reading or the role around a class no rule claims"
                   + (f" ({', '.join(sorted(c['undecided_classes'])[:4])})" if c["undecided_classes"] else ""))
        fix.append("add a [[role]] rule for the classes named" if c["undecided_classes"] else
                   "record with torch.profiler.profile(with_stack=True) (module frames decide)"
                   if not c["module_linked_share"] or c["module_linked_share"] < 0.5 else
                   "add [[role]] rules for the enclosing classes")
    if c["comm_unrecognised"]:
        why.append(f"{c['comm_unrecognised']} communication-like kernels not recognised "
                   f"({', '.join(c['comm_unrecognised_names'][:2])})")
        fix.append("add a category rule for the communication kernels")
    if c["events_dropped"]:
        why.append(f"{c['events_dropped']:,} events dropped by the reader")
    if c["truncated"]:
        why.append("the trace file is truncated (GPU time lost: " + (c.get("truncation") or "unknown") + ")")
        fix.append("copy or re-export the complete trace (the file was cut while written or copied)")
    if why:
        return _m(DEGRADED, "; ".join(why), "; ".join(fix) or "re-export a complete trace")
    return _m(USABLE, f"per-kernel durations recorded ({c['mode']}); "
              f"{_pct(1 - c['other_share'])} of kernel time categorised, {100 * und:.1f}% undecided")


def _launch_bound(c: dict) -> bool:
    """Steps launched kernel by kernel with the GPU idle inside them: the profiler inflates them."""
    idle = c["idle_in_steps"]
    return c["op_linked_share"] > 0.3 and not is_nan(idle) and idle > IDLE_LAUNCH_BOUND


def _step_time(c: dict) -> dict:
    """Whether step times can be read: steps marked, durations recorded, not inflated by the profiler."""
    no_timing = _no_timing(c)
    idle = c["idle_in_steps"]
    if not c["steps"]:
        return _m(UNRELIABLE, "no step markers or step spans in the trace",
                  "annotate steps (record_function('decode_step_N'), the engine's profiler ranges)")
    if c.get("steps_span_unknown"):
        return _m(UNRELIABLE, f"{c['steps_span_unknown']} step(s) with no known span: kernels without durations, "
                  "no GPU-side annotation and no host wait inside the step's CPU range, so step time is unknown",
                  "annotate steps with record_function (its GPU-side copy spans the step), or measure step time "
                  "with CUDA events outside the profiler")
    if no_timing and c["steps_from_gpu_annotations"]:
        return _m(USABLE, "kernel durations are missing but every step spans a GPU-side annotation")
    if no_timing:
        return _m(DEGRADED, "step spans are built from kernels whose durations are missing",
                  "measure step time with CUDA events outside the profiler")
    if c["phases"] and set(c["phases"]) <= {"unknown"}:
        return _m(DEGRADED, f"{c['steps']} step(s) inferred from gaps between kernel bursts, phase unknown: a "
                  "step may hold prefill and decode, or several steps", "annotate the steps "
                  "(record_function('decode_step_N'), the engine's profiler ranges) or profile a decode-only window")
    if _launch_bound(c):
        return _m(DEGRADED, f"steps launched kernel by kernel are launch-bound (GPU idle {_pct(idle)} inside "
                  "steps): the profiler's CPU overhead lengthens every step, so step time and idle are inflated",
                  "measure step time with CUDA events without the profiler, or profile graph replay")
    unknown = c["unknown_phase_share"]
    if c["mixed_phases"] and not is_nan(unknown) and unknown > 0.5:
        return _m(DEGRADED, "prefill and decode in one window and most kernels in no step",
                  "profile a decode-only window")
    return _m(USABLE, f"{c['steps']} step(s); GPU idle inside steps {_pct(idle)}"
              + (" (graph replay: not inflated by the profiler's CPU work)" if "graph" in c["mode"] else ""))


def _allreduce_share(c: dict) -> dict:
    """Whether the AllReduce share can be read: communication kernels timed, recognised, every rank there."""
    if _no_timing(c) or _block(c):
        return _m(UNRELIABLE, "communication kernels inside graph replays have no durations of their own",
                  _FIX_TIMING)
    if c["cpu_collectives_multi_rank"] and not c["comm_kernels"]:
        return _m(UNRELIABLE, f"{c['cpu_collectives_multi_rank']} collective call(s) across "
                  "ranks launched no recognised GPU kernel", "add a rule for the engine's "
                  "communication kernels; check the trace has GPU activity")
    if c["comm_unrecognised"]:
        return _m(DEGRADED, f"{c['comm_unrecognised']} communication-like kernels are not "
                  "counted as communication", "add a category rule for them")
    if c["world_size"] > c["ranks"]:
        return _m(DEGRADED, f"{c['ranks']} of {c['world_size']} ranks in the trace: exposure "
                  "and the spread across ranks are unknown", "load every rank's trace")
    return _m(USABLE, f"{c['comm_kernels']} communication kernels recognised, "
              "none unrecognised" if c["comm_kernels"] else
              "no communication kernel or collective call in the trace")


def _linked_view(c: dict, key: str, what: str, fix: str) -> dict:
    """Whether a view by op or by module can be read: the share of GPU time linked to one."""
    s = c[key]
    why = f"{_pct(s)} of GPU time linked to {what}"
    if _no_timing(c) or _block(c):
        return _m(UNRELIABLE, why + "; kernel durations missing", fix)
    if s >= LINKED_USABLE:
        return _m(USABLE, why)
    if s >= LINKED_DEGRADED:
        return _m(DEGRADED, why + "; the rest is in no row of this view", fix)
    return _m(UNRELIABLE, why, fix)


def health(p) -> Health:
    """The trust verdict of a :class:`Profile` (see the module docstring)."""
    c = capture_facts(p)
    notes: list[str] = []
    if c["mode"] == "no GPU kernels":
        return Health(list(p.files), c, {m: _m(UNRELIABLE, "the trace has no GPU kernels",
                                               "profile with CUDA activities on") for m in METRICS}, notes)
    metrics = {"category_shares": _category_shares(c)}
    if c["mixed_phases"] and metrics["category_shares"]["status"] == USABLE:
        notes.append("prefill and decode steps share this window: use summary(phase='decode') or 'prefill'; the "
                     "'all' view mixes them")
    metrics["step_time"] = _step_time(c)
    metrics["allreduce_share"] = _allreduce_share(c)
    metrics["op_view"] = _linked_view(c, "op_linked_share", "a CPU op",
                                      "profile eager (graph replays carry no op), CPU activity on")
    metrics["module_view"] = _linked_view(c, "module_linked_share", "an nn.Module",
                                          "profile eager with with_stack=True (nn.Module frames)")
    if _launch_bound(c):
        notes.append(f"profiler overhead: launch-bound steps (GPU idle {_pct(c['idle_in_steps'])}); kernel "
                     "durations are unaffected, step wall time is not")
    return Health(list(p.files), c, metrics, notes)
