"""Storage benchmark: a year of nightlies of a 100-model suite (about 1,000,000 timing samples).

Ingests the runs one file's worth at a time, as the nightly does, then times the queries that
trend charts and compare ask: one model's metric history, its A/A noise, the latest run of a
commit. The target is the history query in at most 100 ms on SQLite and on Postgres.

    python benchmarks/bench_db.py                      # SQLite in a temp dir + local Postgres
    python benchmarks/bench_db.py --db sqlite:///x.db  # one backend

Not part of the test suite; the numbers are written up in docs/storage.md.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from factories import model_result, run_results

from compilewatch.db import aa_noise, connect, ingest, latest_run, metric_history, results_history
from compilewatch.db.engine import create, resolve_url
from compilewatch.db.migrate import upgrade

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


def nightly(day: int, models: int, samples: int):  # type: ignore[no-untyped-def]
    """One night's run: every model with ``samples`` eager and ``samples`` compiled times."""
    when = date(2026, 1, 1) + timedelta(days=day)
    results = [model_result(f"model_{j:03d}", n=samples, seed=day,
                            compiled_us=50.0 + j, graph_breaks=["print"] * (j % 3))
               for j in range(models)]
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


def bench(url: str, days: int, models: int, samples: int) -> None:
    build = ingest_s = 0.0
    n_samples = 0
    with connect(url) as db:
        for day in range(days):
            t0 = time.perf_counter()
            run = nightly(day, models, samples)
            t1 = time.perf_counter()
            ingest(db, run)
            t2 = time.perf_counter()
            build, ingest_s = build + t1 - t0, ingest_s + t2 - t1
            n_samples += models * 2 * samples
        print(f"{db.url}\n  ingested {days} runs, {days * models} results, {n_samples:,} "
              f"timing samples in {ingest_s:.1f} s ({n_samples / ingest_s:,.0f} samples/s, "
              f"{ingest_s / days * 1e3:.0f} ms per run; building the runs took {build:.1f} s)")
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
            # what `compilewatch trends` runs: every result of every nightly, all metrics
            "results_history(ref=main), the trends query": lambda: results_history(
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


@contextlib.contextmanager
def scratch_postgres() -> Iterator[str]:
    name = f"cw_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"
        with create(resolve_url(url)) as db:
            upgrade(db)
        yield url
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", help="URL (repeatable); default: both")
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--samples", type=int, default=14, help="per side per result")
    args = parser.parse_args()
    if args.db:
        for url in args.db:
            bench(url, args.days, args.models, args.samples)
        return
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{tmp}/bench.db", args.days, args.models, args.samples)
    with scratch_postgres() as url:
        bench(url, args.days, args.models, args.samples)


if __name__ == "__main__":
    main()
