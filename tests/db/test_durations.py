"""What a shard plan is balanced by (stored durations), and sixteen shards of one group
ingesting into one Postgres at once: no row lost or stored twice, a re-run adds nothing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from compilewatch.bot.shards.plan import ShardOptions, plan, record
from compilewatch.core.results_file import save_results
from compilewatch.db import Database, connect, ingest, ingest_files, model_durations
from compilewatch.db.engine import create, resolve_url
from tests.factories import model_result, run_results

SHARDS = 16
PER_SHARD = 5
SLUG = "cpu-default-float32-auto"


def _timed(model: str, seconds: float, at: str, run_id: str | None = None):  # type: ignore[no-untyped-def]
    r = model_result(model).model_copy(update={"duration_s": seconds})
    return run_results([r], created_at=at, run_id=run_id)


def test_the_median_of_the_newest_results(db: Database) -> None:
    for day, seconds in enumerate([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]):
        ingest(db, _timed("m", seconds, f"2026-11-{day + 1:02d}T08:00:00+00:00"))
    ingest(db, _timed("other", 7.0, "2026-11-01T08:00:00+00:00"))
    got = model_durations(db)
    assert got == {f"micro/m/{SLUG}": 4.0, f"micro/other/{SLUG}": 7.0}  # 100 s is too old


def test_the_groups_own_runs_are_left_out(db: Database) -> None:
    """A shard that plans while its group's first shards already ingest must see the same
    history as they did."""
    ingest(db, _timed("m", 10.0, "2026-11-01T08:00:00+00:00"))
    run = _timed("m", 99.0, "2026-11-02T08:00:00+00:00")
    rec = record(ShardOptions(0, 2, "gh-5-1"), "gh-5-1", [[f"micro/m/{SLUG}"], []], "count",
                 run_id=run.run_id, wall_s=1.0, models=1, finished=True)
    ingest(db, run.model_copy(update={"shards": rec}))
    assert model_durations(db)[f"micro/m/{SLUG}"] == 54.5
    assert model_durations(db, exclude_group="gh-5-1")[f"micro/m/{SLUG}"] == 10.0


def _ingest(args: tuple[str, str]) -> bool:
    url, path = args
    with connect(url) as db:
        return ingest_files(db, [path])[0].stored


@pytest.mark.postgres
def test_sixteen_shards_ingest_at_once(pg_url: str, db_url: str, tmp_path: Path,
                                       counts) -> None:  # type: ignore[no-untyped-def]
    if not db_url.startswith("postgresql"):
        pytest.skip("the Postgres case; SQLite's is tests/db/test_concurrency.py")
    models = [f"m{i:03d}" for i in range(SHARDS * PER_SHARD)]
    shards, by = plan([f"micro/{m}/{SLUG}" for m in models], SHARDS, None)
    files = []
    for k in range(SHARDS):
        mine = [m for m in models if f"micro/{m}/{SLUG}" in shards[k]]
        run = run_results([model_result(m, n=10, seed=k) for m in mine], commit="c" * 40)
        rec = record(ShardOptions(k, SHARDS, "gh-77-1"), "gh-77-1", shards, by,
                     run_id=run.run_id, wall_s=1.0, models=len(mine), finished=True)
        files.append(str(tmp_path / f"shard{k}.json"))
        save_results(run.model_copy(update={"shards": rec}), files[-1])
    with multiprocessing.get_context("spawn").Pool(SHARDS) as pool:
        stored = pool.map(_ingest, [(db_url, f) for f in files])
    assert stored == [True] * SHARDS
    with create(resolve_url(db_url)) as db:
        n = counts(db)
        assert n["runs"] == SHARDS and n["model_results"] == len(models)
        assert n["timing_samples"] == len(models) * 2 * 10
        # a shard run again (a re-run job uploading the same file) adds nothing
        with multiprocessing.get_context("spawn").Pool(4) as pool:
            again = pool.map(_ingest, [(db_url, f) for f in files[:4] * 2])
        assert again == [False] * 8
        assert counts(db) == n


def test_a_plan_name_reads_back_as_its_suite_model_and_config() -> None:
    from compilewatch.db.durations import ident_of, parts_of

    parts = ("models.vision", "vit_b-16", "cuda-max-autotune-bfloat16-auto-training")
    assert parts_of(ident_of(*parts)) == parts
