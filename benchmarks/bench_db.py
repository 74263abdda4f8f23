"""Storage benchmark: a year of nightlies of a 100-model suite (about 1,000,000 timing samples).

Ingests the runs one file's worth at a time, as the nightly does, then reports the database's
size and times the queries that trend charts and compare ask: one model's metric history, its
A/A noise, the latest run of a commit. The target is the history query in at most 100 ms on
SQLite and on Postgres.

Each model compiles two graphs, and each graph's FX and AOTAutograd keys carry ``--components``
components (64 ``example_inputs[i]`` with their values, as a real CPU run records), for the
cold and the warm compile; a model's graph changes every week or so. That is what makes a
nightly large, and what storing each distinct component set once saves.

    python benchmarks/bench_db.py                      # SQLite in a temp dir + local Postgres
    python benchmarks/bench_db.py --db sqlite:///x.db  # one backend
    python benchmarks/bench_db.py --days 30 --skip-queries   # the size of a month, quickly

Not part of the test suite; the numbers are written up in docs/storage.md.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from factories import model_result, run_results

from compilewatch.core.results_file import dumps_results
from compilewatch.core.schema import CacheKey
from compilewatch.db import (
    Database,
    aa_noise,
    connect,
    ingest,
    latest_run,
    metric_history,
    result_keys,
    results_history,
)

sys.path.insert(0, str(Path(__file__).parent))
from _postgres import scratch_postgres

TREND_METRICS = ("speedup", "cold_s", "warm_s", "warm_start_s", "graph_breaks", "recompiles")


def graph_keys(model: int, day: int, n_components: int) -> tuple[list[Any], list[Any]]:
    """FX and AOT keys of a model's two graphs, cold and warm; graph ``g`` changes every
    ``7 + model % 5`` nights (a PR landed), everything else stays."""
    fx, aot = [], []
    for g in range(2):
        version = day // (7 + model % 5) if g == 0 else 0
        comps = {"gm": f"gm{model:03d}{g}{version:08d}",
                 **{f"example_inputs[{i}]": f"ex{model:03d}{i:04d}{g}"
                    for i in range(max(0, n_components - 6))},
                 "fx_kwargs[is_inference]": "isinf000000000", "inductor_config[cpp]": "cpp0000",
                 "torch_version": "torch000000000", "system_info": "sys0000000000"}
        values = {f"example_inputs[{i}]": f"TensorMetadata(dtype=torch.float32, shape=(8, {i}))"
                  for i in range(max(0, n_components - 6))}
        for kind, out in (("f", fx), ("a", aot)):
            key = kind + hashlib.sha256(repr(comps).encode()).hexdigest()[:40]
            cold = CacheKey(key=key, components=comps, values=values, hit=False, state="miss")
            out += [cold, cold.model_copy(update={"phase": "warm", "hit": True,
                                                  "state": "hit"})]
    return fx, aot


def nightly(day: int, models: int, samples: int,
            n_components: int):  # type: ignore[no-untyped-def]
    """One night's run: every model with ``samples`` eager and ``samples`` compiled times."""
    when = date(2026, 1, 1) + timedelta(days=day)
    results = [model_result(f"model_{j:03d}", n=samples, seed=day,
                            compiled_us=50.0 + j, graph_breaks=["print"] * (j % 3))
               for j in range(models)]
    for j, r in enumerate(results):
        fx, aot = graph_keys(j, day, n_components)
        r.cache = r.cache.model_copy(update={"fx": fx, "aot": aot})
    run = run_results(results, commit=f"{day:040x}", ref="main",
                      created_at=f"{when.isoformat()}T03:00:00+00:00")
    run.settings.trigger = "nightly"
    return run


def timed(fn: Callable[[], object], repeat: int = 20) -> tuple[float, float]:
    """(first call, median of the next ``repeat``) in milliseconds."""
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return first, statistics.median(times)


def size_bytes(db: Database) -> int:
    """The database's size on disk: the SQLite file after a WAL checkpoint, or Postgres'
    ``pg_database_size``."""
    if db.is_sqlite:  # outside a transaction: a checkpoint cannot run inside one
        raw = db.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = cur.execute("PRAGMA page_count").fetchone()[0]
            return int(pages * cur.execute("PRAGMA page_size").fetchone()[0])
        finally:
            raw.close()
    with db.read() as conn:
        return int(conn.exec_driver_sql(
            "SELECT pg_database_size(current_database())").scalar_one())


def bench(url: str, days: int, models: int, samples: int, n_components: int,
          queries_too: bool = True) -> None:
    build = ingest_s = 0.0
    n_samples = file_bytes = 0
    with connect(url) as db:
        empty = size_bytes(db)
        for day in range(days):
            t0 = time.perf_counter()
            run = nightly(day, models, samples, n_components)
            t1 = time.perf_counter()
            ingest(db, run)
            t2 = time.perf_counter()
            build, ingest_s = build + t1 - t0, ingest_s + t2 - t1
            n_samples += models * 2 * samples
            file_bytes += len(dumps_results(run).encode())
        print(f"{db.url}\n  ingested {days} runs, {days * models} results, {n_samples:,} "
              f"timing samples in {ingest_s:.1f} s ({n_samples / ingest_s:,.0f} samples/s, "
              f"{ingest_s / days * 1e3:.0f} ms per run; building the runs took {build:.1f} s)")
        size = size_bytes(db) - empty
        print(f"  database size: {size / 2**20:,.1f} MiB for {days} runs, "
              f"{size / days / 2**20:.2f} MiB per run (the results files: "
              f"{file_bytes / days / 2**20:.2f} MiB per run)")
        if not queries_too:
            return
        mid = f"{days // 2:040x}"
        queries = {
            "metric_history(compiled_median_us, ref=main)": lambda: metric_history(
                db, model="model_042", metric="compiled_median_us", ref="main"),
            "metric_history(speedup)": lambda: metric_history(
                db, model="model_042", metric="speedup", suite="micro",
                config_slug="cpu-default-float32-auto"),
            "aa_noise(cold_s)": lambda: aa_noise(db, model="model_042", commit=mid,
                                                 metric="cold_s"),
            "latest_run": lambda: latest_run(db, commit=mid, suite="micro",
                                             fingerprint="f" * 32),
            # what `compilewatch trends` runs: the pages (every model config), then each
            # page's history, one model's year of nightlies
            "result_keys(ref=main), the pages of trends": lambda: result_keys(db, ref="main"),
            "results_history, one page (what trends asks)": lambda: results_history(
                db, ref="main", suite="micro", model="model_042",
                config_slug="cpu-default-float32-auto", metrics=TREND_METRICS),
            # the whole year at once (what trends asked before 0004): 36,500 rows to build
            "results_history(ref=main), every model at once": lambda: results_history(
                db, ref="main"),
        }
        points = len(metric_history(db, model="model_042", metric="compiled_median_us"))
        print(f"  history of one model and metric: {points} points")
        for name, fn in queries.items():
            first, median = timed(fn)
            print(f"  {name:48s} first {first:7.1f} ms, median {median:7.1f} ms")
        if not db.is_sqlite:
            # Fresh tables have no planner statistics until autovacuum's ANALYZE runs.
            with db.write() as conn:
                conn.exec_driver_sql("ANALYZE")
            print("  after ANALYZE:")
            for name, fn in queries.items():
                first, median = timed(fn)
                print(f"  {name:48s} first {first:7.1f} ms, median {median:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", help="URL (repeatable); default: both")
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--samples", type=int, default=14, help="per side per result")
    parser.add_argument("--components", type=int, default=70,
                        help="components per cache key (a real CPU graph records about 70)")
    parser.add_argument("--skip-queries", action="store_true",
                        help="ingest and report the size only")
    args = parser.parse_args()
    run = (args.days, args.models, args.samples, args.components, not args.skip_queries)
    if args.db:
        for url in args.db:
            bench(url, *run)
        return
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{tmp}/bench.db", *run)
    with scratch_postgres() as url:
        bench(url, *run)


if __name__ == "__main__":
    main()
