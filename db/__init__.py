"""compilewatch.db: every run in a SQL database (SQLite by default, Postgres when shared).

Open with ``connect()``; store with ``ingest``; read back with ``load_run`` and the queries.
Documented in docs/storage.md.
"""

from compilewatch.db.artifacts import ArtifactInfo, list_artifacts, record_artifact
from compilewatch.db.connection import connect
from compilewatch.db.durations import model_durations
from compilewatch.db.engine import Database, default_sqlite_path, resolve_url
from compilewatch.db.migrate import SchemaState
from compilewatch.db.noise import load_noise_bands, save_noise_bands
from compilewatch.db.queries import (
    METRICS,
    HistoryPoint,
    NoiseStats,
    ResultPoint,
    RunInfo,
    SuitePoint,
    aa_noise,
    count_runs,
    latest_run,
    list_runs,
    metric_history,
    metric_values,
    result_keys,
    results_history,
    runs_for_pr,
    suite_history,
    timing_samples,
)
from compilewatch.db.store import (
    IngestOutcome,
    ingest,
    ingest_files,
    load_run,
    resolve_run_id,
    store_runs,
)

__all__ = [
    "METRICS",
    "ArtifactInfo",
    "Database",
    "HistoryPoint",
    "IngestOutcome",
    "NoiseStats",
    "ResultPoint",
    "RunInfo",
    "SchemaState",
    "SuitePoint",
    "aa_noise",
    "connect",
    "count_runs",
    "default_sqlite_path",
    "ingest",
    "ingest_files",
    "latest_run",
    "list_artifacts",
    "list_runs",
    "load_noise_bands",
    "load_run",
    "metric_history",
    "metric_values",
    "model_durations",
    "record_artifact",
    "resolve_run_id",
    "resolve_url",
    "result_keys",
    "results_history",
    "runs_for_pr",
    "save_noise_bands",
    "store_runs",
    "suite_history",
    "timing_samples",
]
