"""Migrations: up from empty and down again, models and migrations agree, and who may migrate."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import pg_database
from sqlalchemy import MetaData, Table, insert, inspect, select, text

from compilewatch.core.errors import DatabaseError
from compilewatch.core.schema import RunResults
from compilewatch.db import Database, connect, default_sqlite_path, ingest, load_run, resolve_url
from compilewatch.db import store as store_mod
from compilewatch.db.engine import create
from compilewatch.db.migrate import downgrade, state, upgrade
from compilewatch.db.models import Base
from tests.factories import BASE_COMPONENTS, model_result, run_results

TABLES = {t.name for t in Base.metadata.sorted_tables}


def _up_and_down(url: str) -> None:
    with create(resolve_url(url)) as db:
        assert state(db).current is None
        assert upgrade(db).is_current
        with db.read() as conn:
            assert set(inspect(conn).get_table_names()) >= TABLES
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        run = run_results(commit="d" * 40)
        ingest(db, run)
        assert load_run(db, run.run_id) == run
        assert downgrade(db, "base").current is None
        with db.read() as conn:
            assert not TABLES & set(inspect(conn).get_table_names())
        assert upgrade(db).is_current  # and up again on the emptied database


def test_sqlite_up_and_down(tmp_path: Path) -> None:
    _up_and_down(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_up_and_down() -> None:
    with pg_database() as url:
        _up_and_down(url)


@pytest.mark.postgres
def test_postgres_is_never_migrated_by_connect() -> None:
    with pg_database() as url:
        with pytest.raises(DatabaseError, match="run `compilewatch db upgrade"):
            connect(url)
        with create(resolve_url(url)) as db, db.read() as conn:
            assert inspect(conn).get_table_names() == []
            upgrade(db)
            conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
            conn.commit()
        with pytest.raises(DatabaseError, match="newer than this compilewatch"):
            connect(url)


def test_new_sqlite_file_is_created_and_migrated(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "new.db"
    with connect(str(path)) as db:
        assert db.is_sqlite and state(db).is_current
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000


def test_sqlite_out_of_date_is_migrated_but_unknown_revision_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with create(resolve_url(url)) as db:
        upgrade(db)
        downgrade(db, "base")
    with connect(url) as db:
        assert state(db).is_current
        with db.write() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    with pytest.raises(DatabaseError, match="newer than this compilewatch"):
        connect(url)


def test_url_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_url(None).database == str(tmp_path / "xdg" / "compilewatch" / "compilewatch.db")
    assert default_sqlite_path() == tmp_path / "xdg" / "compilewatch" / "compilewatch.db"
    assert resolve_url("postgresql://u@h/d").drivername == "postgresql+psycopg"
    assert resolve_url("postgres://u@h/d").drivername == "postgresql+psycopg"
    assert resolve_url("runs.db").database == "runs.db"
    monkeypatch.setenv("COMPILEWATCH_DB", "postgresql://u@h/fromenv")
    assert resolve_url(None).database == "fromenv"
    assert resolve_url("sqlite:///x.db").database == "x.db"  # the argument wins
    with pytest.raises(DatabaseError, match="unsupported database 'mysql'"):
        resolve_url("mysql://u@h/d")


@pytest.mark.postgres
def test_unreachable_server_says_so() -> None:
    with pytest.raises(DatabaseError, match="nothing listens on that host and port"):
        connect("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")


def _store_at_0001(db: Database, run: RunResults) -> None:
    """Ingest as schema 0001 did: the full ModelResult in ``payload`` and one component row
    per cache key (what a database written before 0002 holds)."""
    with db.write() as conn:
        meta = MetaData()
        tables = {n: Table(n, meta, autoload_with=conn)
                  for n in ("runs", "model_results", "cache_keys", "cache_key_components")}
        env_id = store_mod._environment_id(conn, run)
        run_pk = conn.execute(insert(tables["runs"]).values(
            store_mod._run_row(run, "0" * 64, env_id)).returning(tables["runs"].c.id)).scalar()
        for i, r in enumerate(run.results):
            row = {**store_mod._result_row(run_pk, i, r), "payload": r.model_dump_json()}
            rid = conn.execute(insert(tables["model_results"]).values(row)
                               .returning(tables["model_results"].c.id)).scalar()
            for kind, keys in (("fx", r.cache.fx), ("aot", r.cache.aot)):
                for j, k in enumerate(keys):
                    kid = conn.execute(insert(tables["cache_keys"]).values(
                        result_id=rid, kind=kind, idx=j, key=k.key, hit=k.hit, state=k.state,
                        phase=k.phase).returning(tables["cache_keys"].c.id)).scalar()
                    for name in dict.fromkeys([*k.components, *k.values]):
                        conn.execute(insert(tables["cache_key_components"]).values(
                            cache_key_id=kid, name=name, hash=k.components.get(name),
                            value=k.values.get(name)))


def _legacy_run(seed: int) -> RunResults:
    comps = {**BASE_COMPONENTS, **{f"example_inputs[{i}]": f"ex{i:014d}" for i in range(40)},
             "gm": f"gm{seed % 2:014d}"}  # 44 components; the graph alternates by seed
    r = model_result("mlp", seed=seed, components=comps)
    # values in another order than the components: both orders must survive
    r.cache.fx[0] = r.cache.fx[0].model_copy(update={
        "values": {f"example_inputs[{i}]": f"T(shape=({i}, 8))" for i in reversed(range(40))}})
    return run_results([r, model_result("convnet", seed=seed)], commit=f"{seed:040x}")


def _migrate_with_data(url: str) -> None:
    runs = [_legacy_run(seed) for seed in range(4)]
    with create(resolve_url(url)) as db:
        upgrade(db, "0001")
        for run in runs:
            _store_at_0001(db, run)
        assert upgrade(db).is_current
        for run in runs:
            assert load_run(db, run.run_id) == run
        with db.read() as conn:
            sets = conn.execute(text("SELECT count(*) FROM component_sets")).scalar_one()
            items = conn.execute(text("SELECT count(*) FROM component_set_items")).scalar_one()
        # mlp: fx (with values) and aot for each of its two graphs; convnet: one set for both
        assert sets == 5 and items == 4 * 44 + len(BASE_COMPONENTS)
        ingest(db, _legacy_run(7))  # the new ingest shares the migrated sets
        assert downgrade(db, "0001").current == "0001"
        with db.read() as conn:
            meta = MetaData()
            results = Table("model_results", meta, autoload_with=conn)
            payloads = conn.execute(select(results.c.payload)).scalars().all()
            n_comp = conn.execute(text("SELECT count(*) FROM cache_key_components")).scalar_one()
        stored = {r.model_dump_json() for run in [*runs, _legacy_run(7)] for r in run.results}
        from compilewatch.core.schema import ModelResult
        assert {ModelResult.model_validate_json(p).model_dump_json() for p in payloads} == stored
        assert n_comp == 5 * (2 * 44 + 2 * len(BASE_COMPONENTS))  # a row per key again
        assert upgrade(db).is_current
        for run in runs:
            assert load_run(db, run.run_id) == run


def test_sqlite_0002_migrates_a_database_with_data_up_and_down(tmp_path: Path) -> None:
    _migrate_with_data(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_0002_migrates_a_database_with_data_up_and_down() -> None:
    with pg_database() as url:
        _migrate_with_data(url)


def test_the_default_database_is_in_the_platform_s_data_folder_an_old_one_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On Linux the platform's folder is the XDG one every earlier version used; elsewhere
    (here: a macOS-like folder) an earlier version's file at that path stays the default,
    said once, until it is moved."""
    import platformdirs

    from compilewatch.db import engine

    mac = tmp_path / "Library" / "Application Support" / "compilewatch"
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda *a, **k: str(mac))
    assert default_sqlite_path() == mac / "compilewatch.db"
    legacy = tmp_path / "xdg" / "compilewatch" / "compilewatch.db"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(b"")
    monkeypatch.setattr(engine, "_SAID", set())
    with caplog.at_level(logging.WARNING, logger="compilewatch"):
        assert default_sqlite_path() == legacy
        assert default_sqlite_path() == legacy
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        f"using the database at {legacy}, where earlier versions kept it"]
    mac.mkdir(parents=True)
    (mac / "compilewatch.db").write_bytes(b"")  # moved (or made) there: the platform's wins
    assert default_sqlite_path() == mac / "compilewatch.db"
