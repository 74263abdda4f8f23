"""Ingest: exact round trip, idempotence, atomicity, and refusal of bad input."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from compilewatch.core.errors import DatabaseError, ResultsFileError
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import Category, Config
from compilewatch.db import Database, ingest, ingest_files, load_run, store
from tests.factories import model_result, run_results

Counts = Callable[[Database], dict[str, int]]


def _rich_run(**kwargs: object):  # type: ignore[no-untyped-def]
    results = [
        model_result("mlp", n=20, graph_breaks=["print() call", "data-dependent branch"],
                     recompiles=["size mismatch at index 0"], peak_bytes=1 << 33),
        model_result("mlp", config=Config(mode="max-autotune", dynamic=True), n=20),
        model_result("convnet", category=Category.COMPILE_ERROR,
                     error="InductorError: boom"),
    ]
    return run_results(results, commit="a" * 40, ref="main", pr=12, **kwargs)


def test_round_trip_is_exact(db: Database, counts: Counts) -> None:
    run = _rich_run()
    first = run.results[0].compile  # a nightly's warm start, with its own phase breakdown
    run.results[0].compile = first.model_copy(update={
        "warm_start_s": 1.5, "warm_start_phases": {"dynamo": 0.4, "total": 1.2}})
    assert ingest(db, run) == run.run_id
    back = load_run(db, run.run_id)
    assert back == run
    assert back.model_dump_json() == run.model_dump_json()
    n = counts(db)
    assert n["runs"] == 1 and n["model_results"] == 3 and n["environments"] == 1
    assert n["timing_samples"] == 2 * 2 * 20  # two measured results, eager + compiled
    assert n["graph_breaks"] == 2 and n["recompiles"] == 1
    # four keys (fx and aot of two results) with the same six components: one set, stored once
    assert n["cache_keys"] == 4 and n["component_sets"] == 1
    assert n["component_set_items"] == 6
    assert n["compile_phases"] == 2 * 4 + 2


def test_a_kernel_profile_round_trips_in_the_results_payload(db: Database, counts: Counts,
                                                            tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A profiled model's kernels live in ``model_results.payload`` (no table of their own:
    nothing queries them across runs) and come back exactly, through a results file too."""
    from compilewatch.core.kernels import Kernel, KernelOrigin, KernelProfile
    from compilewatch.core.results_file import load_results

    kernels = [Kernel(name=f"triton_poi_fused_add_{i}", kind="generated", graph="0_forward",
                      calls=20, launches=20, total_us=123.456789 * (i + 1),
                      step_us=6.172839 * (i + 1), step_spread_us=0.25, gb=0.003,
                      origins=[KernelOrigin(node="add", aten="aten.add",
                                            location="models.py:12", code="y = x + 1 ü")])
               for i in range(3)]
    profile = KernelProfile(activity="cuda", steps=20, step_us=41.5, device_us=37.0,
                            launches_per_step=3.0, graphs=["0_forward"], kernels=kernels,
                            left_out=2, notes=["a note"])
    run = _rich_run()
    run.results[0] = run.results[0].model_copy(update={"kernels": profile})
    assert ingest(db, run) == run.run_id
    back = load_run(db, run.run_id)
    assert back == run and back.results[0].kernels == profile
    save_results(back, tmp_path / "r.json")
    assert load_results(tmp_path / "r.json").results[0].kernels == profile


def test_cache_key_components_are_stored_once_per_distinct_set(db: Database,
                                                                counts: Counts) -> None:
    """A graph compiled cold and warm, night after night, has the same components: the nightly
    of a 100-model suite must not store them again every night (docs/storage.md)."""
    from tests.factories import BASE_COMPONENTS

    many = {**BASE_COMPONENTS, **{f"example_inputs[{i}]": f"exin{i:012d}" for i in range(64)}}
    values = {f"example_inputs[{i}]": "TensorMetadata(shape=(8, 64))" for i in range(64)}

    def night(seed: int, changed: bool = False):  # type: ignore[no-untyped-def]
        comps = {**many, "gm": "gmchanged0000000"} if changed else many
        r = model_result("mlp", seed=seed, components=comps)
        r.cache.fx[0] = r.cache.fx[0].model_copy(update={"values": values})
        warm = r.cache.fx[0].model_copy(update={"phase": "warm", "state": "hit", "hit": True})
        r.cache.fx.append(warm)
        return run_results([r], commit=f"{seed:040x}")

    first = night(1)
    ingest(db, first)
    n1 = counts(db)
    assert n1["cache_keys"] == 3 and n1["component_sets"] == 2  # fx (with values) and aot
    assert n1["component_set_items"] == 2 * len(many)
    for seed in range(2, 6):
        ingest(db, night(seed))
    assert counts(db)["component_set_items"] == n1["component_set_items"]  # nothing new
    ingest(db, night(9, changed=True))  # the graph changed: one new set per kind
    assert counts(db)["component_sets"] == 4
    assert load_run(db, first.run_id) == first  # order of components and values kept


def test_same_run_twice_adds_nothing(db: Database, counts: Counts) -> None:
    run = _rich_run()
    ingest(db, run)
    before = counts(db)
    assert ingest(db, run) == run.run_id
    assert counts(db) == before


def test_same_id_different_content_is_refused(db: Database, counts: Counts) -> None:
    run = _rich_run()
    ingest(db, run)
    before = counts(db)
    other = run.model_copy(update={"finished_at": "2026-11-29T09:00:00+00:00"})
    with pytest.raises(DatabaseError, match="already stored with different content"):
        ingest(db, other)
    assert counts(db) == before


def test_environment_is_shared_between_runs(db: Database, counts: Counts) -> None:
    ingest(db, run_results(commit="b" * 40))
    ingest(db, run_results(commit="c" * 40))
    assert counts(db)["environments"] == 1 and counts(db)["runs"] == 2


def test_failure_midway_leaves_nothing(db: Database, counts: Counts,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real = store._insert_many

    def failing(conn, table, rows):  # type: ignore[no-untyped-def]
        if table.name == "cache_keys":
            raise RuntimeError("disk unplugged")
        real(conn, table, rows)

    monkeypatch.setattr(store, "_insert_many", failing)
    with pytest.raises(RuntimeError, match="disk unplugged"):
        ingest(db, _rich_run())
    assert set(counts(db).values()) == {0}


def test_load_unknown_run_names_it(db: Database) -> None:
    with pytest.raises(DatabaseError, match="no run 'nosuchrun1'"):
        load_run(db, "nosuchrun1")


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda r: setattr(r.results[0].speedup, "value", math.nan), "results.0.speedup.value"),
    (lambda r: setattr(r.results[0].latency, "compiled_us", [1.0, math.inf]),
     "results.0.latency.compiled_us.1"),
    (lambda r: setattr(r.results[0], "error", "x" * 10_000), "results.0.error"),
    (lambda r: setattr(r.results[0], "model", "bad name; DROP TABLE runs"), "results.0.model"),
    (lambda r: setattr(r, "created_at", "yesterday"), "created_at"),
    (lambda r: r.results.append(r.results[0]), "results.3: duplicate of results.0"),
])
def test_bad_results_are_refused_naming_the_field(db: Database, counts: Counts, mutate, field
                                                  ) -> None:  # type: ignore[no-untyped-def]
    run = _rich_run()
    mutate(run)
    with pytest.raises(ResultsFileError, match=field.replace(".", r"\.")):
        ingest(db, run)
    assert set(counts(db).values()) == {0}


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.update(schema_version=99), "schema_version"),
    (lambda d: d.pop("settings"), "settings"),
    (lambda d: d["results"][0].update(status=3), "results.0.status"),
    (lambda d: d["git"].update(pr="twelve"), "git.pr"),
    (lambda d: d["results"][0]["latency"].update(eager_median_us="NaN"),
     "results.0.latency.eager_median_us"),
])
def test_bad_files_are_refused_naming_file_and_field(db: Database, counts: Counts, tmp_path,
                                                     edit, field) -> None:  # type: ignore[no-untyped-def]
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    save_results(_rich_run(), good)
    data = json.loads(good.read_text())
    edit(data)
    bad.write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match=f"{bad}.*{field}"):
        ingest_files(db, [bad])
    assert set(counts(db).values()) == {0}


def test_ingest_files_reports_stored_and_already_there(db: Database, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "r.json"
    save_results(_rich_run(), path)
    first, second = ingest_files(db, [path, path])
    assert (first.stored, first.results, first.samples) == (True, 3, 80)
    assert (second.stored, second.samples) == (False, 0)


def test_a_run_stored_as_version_1_loads_as_the_current_version(db: Database) -> None:
    """Stored payloads go through the upgraders: the first schema bump must not orphan every
    run stored before it."""
    import json as _json

    from sqlalchemy import select, update

    from compilewatch.core.schema import SCHEMA_VERSION
    from compilewatch.db import load_run
    from compilewatch.db import models as m

    run = run_results([model_result("a"), model_result("b", category=Category.ACCURACY)])
    ingest(db, run)
    with db.write() as conn:  # make it what a version-1 compilewatch stored
        meta = _json.loads(conn.execute(select(m.Run.__table__.c.meta)).scalar_one())
        meta["schema_version"] = 1
        conn.execute(update(m.Run.__table__).values(meta=_json.dumps(meta), schema_version=1))
    loaded = load_run(db, run.run_id)
    assert loaded.schema_version == SCHEMA_VERSION > 1
    assert [r.model for r in loaded.results] == ["a", "b"]
    assert loaded.results == run.results
