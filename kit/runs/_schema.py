"""The catalogue's one table: the Arrow schema of a run row (``runs/*.parquet``) and the SQL views over it."""
from __future__ import annotations

import pyarrow as pa

_INPUT = pa.struct([("path", pa.string()), ("host", pa.string()), ("sha256", pa.string()), ("bytes", pa.int64()),
                    ("role", pa.string())])
_FIGURE = pa.struct([("name", pa.string()), ("value", pa.float64()), ("unit", pa.string()), ("item", pa.string())])
_FACT = pa.struct([("name", pa.string()), ("value", pa.string())])

RUN_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("kind", pa.string()), ("created", pa.timestamp("us", tz="UTC")),
    ("user", pa.string()), ("machine", pa.string()), ("host", pa.string()), ("command", pa.string()),
    ("label", pa.string()), ("kit_version", pa.string()), ("input_hash", pa.string()),
    ("inputs", pa.list_(_INPUT)), ("settings", pa.string()), ("figures", pa.list_(_FIGURE)),
    ("facts", pa.list_(_FACT)), ("tables", pa.list_(pa.string())), ("warnings", pa.list_(pa.string())),
    ("provenance", pa.string()), ("schema", pa.int32()),
])

# The views every query sees (``{runs}``: the run files of every store read, a DuckDB list of globs).
VIEWS = {
    # stores read together may hold the same run (a copy of a copy): one row per run id
    "runs": "SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY filename) AS rn "
            "FROM ({runs})) WHERE rn = 1",
    "figures": "SELECT run_id, kind, created, label, f.name AS name, f.value AS value, f.unit AS unit, f.item AS item "
               "FROM (SELECT run_id, kind, created, label, unnest(figures) AS f FROM runs)",
    "facts": "SELECT run_id, kind, created, f.name AS name, f.value AS value "
             "FROM (SELECT run_id, kind, created, unnest(facts) AS f FROM runs)",
    "inputs": "SELECT run_id, kind, created, i.path AS path, i.host AS host, i.sha256 AS sha256, i.bytes AS bytes, "
              "i.role AS role FROM (SELECT run_id, kind, created, unnest(inputs) AS i FROM runs)",
    "run_tables": "SELECT run_id, kind, t AS name, "
                  "regexp_replace(filename, '/runs/[^/]+$', '') || '/tables/' || run_id || '/' || t || '.parquet' "
                  "AS path "
                  "FROM (SELECT run_id, kind, filename, unnest(tables) AS t FROM runs)",
}
