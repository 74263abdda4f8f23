"""Eight shard processes ingesting at once, distinct and overlapping runs: none lost, none twice.

For SQLite the file does not exist yet, so the eight also race to create and migrate it.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from compilewatch.core.results_file import save_results
from compilewatch.db import connect, ingest_files
from compilewatch.db.engine import create, resolve_url
from tests.factories import model_result, run_results

PROCESSES = 8
MODELS = 10
SAMPLES = 10


def _ingest_all(args: tuple[str, list[str]]) -> list[bool]:
    url, paths = args
    with connect(url) as db:
        return [o.stored for o in ingest_files(db, paths)]


def test_eight_processes_lose_and_duplicate_nothing(db_url: str, tmp_path: Path,
                                                    counts) -> None:  # type: ignore[no-untyped-def]
    files = []
    for i in range(2 * PROCESSES):
        run = run_results([model_result(f"m{j}", n=SAMPLES, seed=i) for j in range(MODELS)],
                          commit=f"{i:040x}")
        files.append(str(tmp_path / f"run{i}.json"))
        save_results(run, files[-1])
    # each process: its own file, a file shared by all, and its neighbour's own file
    shared = files[PROCESSES:]
    work = [(db_url, [files[p], shared[0], files[(p + 1) % PROCESSES], shared[1 + p % 3]])
            for p in range(PROCESSES)]
    with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
        stored = pool.map(_ingest_all, work)

    distinct = PROCESSES + 4  # own files + shared[0..3]
    assert sum(map(sum, stored)) == distinct  # each run stored by exactly one process
    with create(resolve_url(db_url)) as db:
        n = counts(db)
    assert n["runs"] == distinct and n["environments"] == 1
    assert n["model_results"] == distinct * MODELS
    assert n["timing_samples"] == distinct * MODELS * 2 * SAMPLES
