"""The run catalogue: its latest runs (``runs_list``) and one run (``runs_get``). No SQL from the agent
(DuckDB's SQL can read any file the server can): only a kind, a count and a run id; a run whose inputs
lie outside the server's roots is not shown."""
from __future__ import annotations

from kit import runs
from kit.errors import UsageError
from kit.mcp._policy import Policy
from kit.mcp._result import Answer
from kit.util import frame_records


def _outside(policy: Policy) -> set[str]:
    """Run ids with a local input outside the server's roots (a run of another directory says where it
    was and what it read: not this server's to show)."""
    df = runs.query("SELECT run_id, path, host FROM inputs")
    out = set()
    for run_id, path, host in df.itertuples(index=False):
        if host not in (None, "", "local") or not isinstance(path, str):
            continue
        try:
            policy.local_path(path, must_exist=False)
        except UsageError:
            out.add(run_id)
    return out


def runs_list(policy: Policy, kind: str | None = None) -> Answer:
    """The run catalogue's latest 1000 runs (``kit.runs.runs``), those whose inputs lie inside the roots
    (paged by the caller's ``offset``/``limit``)."""
    hidden = _outside(policy)
    n = 1000
    df = runs.runs(kind, limit=n + len(hidden))
    df = df[~df["run_id"].isin(hidden)].head(n)
    prov = [{"kind": "catalogue", "source": str(runs.store_dir() or "recording off")}]
    warnings = [f"{len(hidden)} run(s) with inputs outside the server's roots not shown"] if hidden else []
    return Answer({"runs": frame_records(df)}, prov, "not assessed",
                  ["a catalogue row records what a run computed; each run's own trust is in its facts"], warnings,
                  table="runs")


def runs_get(policy: Policy, run_id: str) -> Answer:
    """One recorded run: who, when, inputs by hash, settings, figures, facts, warnings."""
    r = runs.get(run_id)
    if r["run_id"] in _outside(policy):
        raise UsageError(f"run {r['run_id']}: its inputs lie outside the server's roots; not shown")
    prov = [{"kind": "catalogue", "source": str(r.get("path") or runs.store_dir())}]
    return Answer(r, prov, "not assessed", ["as recorded; the inputs' hashes say whether they changed since"],
                  list(r.get("warnings") or []))
