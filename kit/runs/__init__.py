"""The run catalogue: every summary, comparison, benchmark, experiment, log parse and audit the kit
makes, recorded in a local store that SQL can query.

Why DuckDB over Parquet: a run is written once and read many times, by one person on one machine or
by colleagues who were handed a copy. Parquet files are immutable, columnar, self-describing, and read
by pandas, DuckDB, Spark and Perfetto-era tools alike, so a store is a directory that can be copied,
tarred or synced with no server and no migration; each process writes its own file, so concurrent runs
never contend for a lock (SQLite would need one writer at a time and a binary file that copies badly
while written). DuckDB answers SQL over those files in place (``read_parquet`` of a glob: 1,000 runs in
well under a second, BENCHMARKS.md) from an in-memory connection, so reading never writes to a store.

Where: ``$KIT_RUNS_DIR`` (default ``~/.local/share/decode-kit/runs``); ``KIT_RUNS=off`` turns recording
off; ``$KIT_RUNS_SHARED`` (paths joined by ``:``) adds colleagues' stores, read only. What a run holds:
who, when, the machine, the host its inputs lie on, the command, inputs by sha256 (files and folders
here; ``host:/path`` inputs named only), settings, headline figures (``figures``: name, value, unit,
item), facts (verdicts, engines), warnings, and its tables as Parquet. Everything textual goes through
``kit.redact`` before it is written.

Its files (the store, the schema, recording, queries, the two regression gates, baselines and exports): the
map in CONTRIBUTING; the queries, gates and baselines load on first use.
"""
from __future__ import annotations

from kit.runs._record import Recorded, failures, file_hash, prehash, record, record_call, set_command
from kit.runs._record import hold_store as _hold_store
from kit.runs._store import compact, store_dir
from kit.util import lazy_names, publish, recorded, set_writer

__all__ = ["BenchGate", "Gate", "Recorded", "baseline", "baselines", "bench_gate", "bench_rows", "compact", "connect",
           "export", "failures", "file_hash", "gate", "get", "prehash", "profile_gate", "query", "record",
           "record_call", "recorded", "rows", "runs", "set_baseline", "set_command", "store_dir", "table"]

# Loaded on first use: the ``kit`` command imports this package after its answer, to install the writer of the
# run it recorded (below), so what a query or a gate needs (DuckDB, the trace and log readers) is not imported then.
_WHERE = {"BenchGate": "_bench_gate", "bench_gate": "_bench_gate", "bench_rows": "_bench_gate", "Gate": "_gate",
          "gate": "_gate", "profile_gate": "_gate", "connect": "_query", "get": "_query", "query": "_query",
          "rows": "_query", "runs": "_query", "table": "_query", "baseline": "_share", "baselines": "_share",
          "export": "_share", "set_baseline": "_share"}

__getattr__, __dir__ = lazy_names(globals(), _WHERE)
publish(globals(), [n for n in __all__ if n not in _WHERE])
set_writer(record_call, _hold_store)   # the catalogue registers itself: recorded calls are written here
