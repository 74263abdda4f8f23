"""Storing a results file, and reading it back.

Ingest is one transaction (a failure leaves nothing), idempotent on ``run_id`` (the same run
twice adds nothing; a different run under a used id is refused), and safe when many shard
processes ingest at once: the run row is inserted with ``ON CONFLICT DO NOTHING``, so a second
writer of the same run waits for the first and then finds it stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from compilewatch.core.errors import DatabaseError, ResultsFileError, UsageError
from compilewatch.core.results_file import load_results, parse_results
from compilewatch.core.schema import ModelResult, RunResults, Status, utc_time
from compilewatch.db import components
from compilewatch.db import models as m
from compilewatch.db.connection import connect
from compilewatch.db.engine import Database, utcnow

OK_STATUSES = (Status.PASS, Status.SKIP)
COPY_ABOVE = 500  # rows; below this a plain INSERT is as fast


@dataclass(frozen=True)
class IngestOutcome:
    """What ingesting one file did: ``stored`` is False when the run was already there."""

    source: str
    run_id: str
    results: int
    samples: int
    stored: bool


def parse_time(value: str, field: str) -> datetime:
    """An ISO 8601 time as naive UTC (how every backend stores it); no zone means UTC. The
    schema refuses what this cannot read (``core/schema.py``: ``utc_time``)."""
    try:
        return utc_time(value).replace(tzinfo=None)
    except ValueError as e:
        raise ResultsFileError(f"{field}: {e}") from None


def _validated(results: RunResults) -> RunResults:
    """Validate again: a ``RunResults`` may have been changed after it was built."""
    checked = parse_results(results.model_dump(), source=f"run {results.run_id}")
    seen: dict[tuple[str, str, str], int] = {}
    for i, r in enumerate(checked.results):
        if r.ident in seen:
            raise ResultsFileError(f"results.{i}: duplicate of results.{seen[r.ident]} "
                                   f"(suite, model, config) = {r.ident}")
        seen[r.ident] = i
    parse_time(checked.created_at, "created_at")
    if checked.finished_at is not None:
        parse_time(checked.finished_at, "finished_at")
    return checked


def _insert_ignore(conn: Connection, table: Table, values: dict[str, Any], key: str) -> Any:
    """``INSERT ... ON CONFLICT (key) DO NOTHING RETURNING id``: the new id, or None."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table).values(**values).on_conflict_do_nothing(index_elements=[key])
    return conn.execute(stmt.returning(table.c.id)).scalar()


def _environment_id(conn: Connection, results: RunResults) -> int:
    env = results.environment
    t = m.Environment.__table__
    new_id = _insert_ignore(conn, t, {
        "fingerprint": env.fingerprint, "torch": env.torch, "python": env.python,
        "platform": env.platform, "machine": env.machine, "gpu": env.gpu, "cuda": env.cuda,
        "triton": env.triton, "first_seen": utcnow(),
    }, "fingerprint")
    if new_id is not None:
        return int(new_id)
    return int(conn.execute(select(t.c.id).where(t.c.fingerprint == env.fingerprint)).scalar_one())


def _run_row(results: RunResults, content_sha: str, env_id: int) -> dict[str, Any]:
    n_pass = sum(r.status == Status.PASS for r in results.results)
    ok = all(r.status in OK_STATUSES for r in results.results)
    meta = results.model_dump(mode="json", exclude={"results"})
    return {
        "run_id": results.run_id, "content_sha256": content_sha,
        "schema_version": results.schema_version, "environment_id": env_id,
        "fingerprint": results.environment.fingerprint, "commit": results.git.commit,
        "ref": results.git.ref, "merge_base": results.git.merge_base, "pr": results.git.pr,
        "repository": results.git.repository, "trigger": results.settings.trigger,
        "side": results.settings.side,
        "status": "empty" if not results.results else (Status.PASS.value if ok
                                                        else Status.FAIL.value),
        "n_results": len(results.results), "n_pass": n_pass,
        "started_at": parse_time(results.created_at, "created_at"),
        "finished_at": (parse_time(results.finished_at, "finished_at")
                        if results.finished_at else None),
        "ingested_at": utcnow(), "meta": json.dumps(meta, separators=(",", ":")),
    }


def _result_row(run_pk: int, position: int, r: ModelResult) -> dict[str, Any]:
    lat, acc, mem, comp = r.latency, r.accuracy, r.memory, r.compile
    return {
        "run_pk": run_pk, "position": position, "suite": r.suite, "model": r.model,
        "config_slug": r.config.slug, "device": r.config.device, "mode": r.config.mode,
        "dtype": r.config.dtype, "dynamic": r.config.dynamic, "status": r.status.value,
        "category": r.category.value, "error": r.error,
        "speedup": r.speedup.value if r.speedup else None,
        "speedup_ci_low": r.speedup.ci_low if r.speedup else None,
        "speedup_ci_high": r.speedup.ci_high if r.speedup else None,
        "eager_median_us": lat.eager_median_us if lat else None,
        "compiled_median_us": lat.compiled_median_us if lat else None,
        "cold_s": comp.cold_s, "warm_s": comp.warm_s, "warm_start_s": comp.warm_start_s,
        "frames": comp.frames, "graphs": comp.graphs, "guard_count": comp.guard_count,
        "graph_break_count": r.break_count,
        "recompile_count": len(r.recompiles),
        "accuracy_passed": acc.passed if acc else None,
        "max_abs_err": acc.max_abs_err if acc else None,
        "max_rel_err": acc.max_rel_err if acc else None,
        "eager_peak_bytes": mem.eager_peak_bytes, "compiled_peak_bytes": mem.compiled_peak_bytes,
        "duration_s": r.duration_s, "payload": _payload(r),
    }


def _payload(r: ModelResult) -> str:
    """The result's JSON without its cache keys' components, which are stored once per
    distinct set (``component_sets``) and put back by ``load_run``."""
    bare = {kind: [k.model_copy(update={"components": {}, "values": {}})
                   for k in getattr(r.cache, kind)] for kind in ("fx", "aot")}
    return r.model_copy(update={"cache": r.cache.model_copy(update=bare)}).model_dump_json()


def _insert_many(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    if conn.dialect.name == "postgresql" and len(rows) > COPY_ABOVE:
        _copy(conn, table, rows)
    else:
        conn.execute(insert(table), list(rows))


def _copy(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Postgres ``COPY``, several times faster than multi-row INSERT for the timing samples;
    it runs on the same connection, so inside the ingest transaction."""
    names = list(rows[0])
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(f"COPY {table.name} ({', '.join(names)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[n] for n in names])


def _insert_returning_ids(conn: Connection, table: Table,
                          rows: Sequence[dict[str, Any]]) -> list[int]:
    if not rows:
        return []
    stmt = insert(table).returning(table.c.id, sort_by_parameter_order=True)
    return [int(i) for i in conn.execute(stmt, list(rows)).scalars()]


def _details(conn: Connection, ids: Sequence[int], results: Sequence[ModelResult]) -> int:
    """Child rows of each result; returns the number of timing samples written."""
    samples, phases, breaks, recompiles, keys = [], [], [], [], []
    key_parts: list[tuple[dict[str, str], dict[str, str]]] = []
    for rid, r in zip(ids, results, strict=True):
        if r.latency:
            samples += [{"result_id": rid, "side": m.EAGER, "idx": i, "value_us": v}
                        for i, v in enumerate(r.latency.eager_us)]
            samples += [{"result_id": rid, "side": m.COMPILED, "idx": i, "value_us": v}
                        for i, v in enumerate(r.latency.compiled_us)]
        for compile_, phase_map in (("cold", r.compile.phases), ("warm", r.compile.warm_phases),
                                    ("warm_start", r.compile.warm_start_phases)):
            phases += [{"result_id": rid, "compile": compile_, "phase": k, "seconds": v}
                       for k, v in phase_map.items()]
        breaks += [{"result_id": rid, "idx": i, "reason": b.reason, "count": b.count}
                   for i, b in enumerate(r.graph_breaks)]
        recompiles += [{"result_id": rid, "idx": i, "reason": c.reason,
                        "compile_id": c.compile_id} for i, c in enumerate(r.recompiles)]
        for kind, key_list in (("fx", r.cache.fx), ("aot", r.cache.aot)):
            for i, k in enumerate(key_list):
                keys.append({"result_id": rid, "kind": kind, "idx": i, "key": k.key,
                             "hit": k.hit, "state": k.state, "phase": k.phase})
                key_parts.append((k.components, k.values))
    _insert_many(conn, m.TimingSample.__table__, samples)
    _insert_many(conn, m.CompilePhase.__table__, phases)
    _insert_many(conn, m.GraphBreakRow.__table__, breaks)
    _insert_many(conn, m.RecompileRow.__table__, recompiles)
    for key, set_id in zip(keys, _component_sets(conn, key_parts), strict=True):
        key["component_set_id"] = set_id
    _insert_many(conn, m.CacheKeyRow.__table__, keys)
    return len(samples)


def _component_sets(conn: Connection,
                    parts: Sequence[tuple[dict[str, str], dict[str, str]]]) -> list[int]:
    """The id of each (components, values)'s set; a set not stored yet is inserted with its
    items. Concurrent ingests of the same set meet on the digest's unique index."""
    digests = [components.digest(c, v) for c, v in parts]
    content = dict(zip(digests, parts, strict=True))
    sets = m.ComponentSet.__table__
    ids: dict[str, int] = {}
    wanted = list(content)
    for i in range(0, len(wanted), 500):
        ids.update({d: int(i) for d, i in conn.execute(
            select(sets.c.digest, sets.c.id).where(sets.c.digest.in_(wanted[i:i + 500])))})
    items: list[dict[str, Any]] = []
    for d in (d for d in content if d not in ids):
        new_id = _insert_ignore(conn, sets, {"digest": d}, "digest")
        if new_id is None:  # another writer stored it meanwhile
            ids[d] = int(conn.execute(select(sets.c.id).where(sets.c.digest == d)).scalar_one())
        else:
            ids[d] = int(new_id)
            items += components.items(ids[d], *content[d])
    _insert_many(conn, m.ComponentSetItem.__table__, items)
    return [ids[d] for d in digests]


def _store(db: Database, results: RunResults) -> tuple[bool, int]:
    """(stored, samples written); (False, 0) when this exact run is already there."""
    results = _validated(results)
    content_sha = hashlib.sha256(results.model_dump_json().encode()).hexdigest()
    runs = m.Run.__table__
    with db.write() as conn:
        env_id = _environment_id(conn, results)
        run_pk = _insert_ignore(conn, runs, _run_row(results, content_sha, env_id), "run_id")
        if run_pk is None:
            stored_sha = conn.execute(select(runs.c.content_sha256)
                                      .where(runs.c.run_id == results.run_id)).scalar_one()
            if stored_sha != content_sha:
                raise DatabaseError(f"{db.url}: run {results.run_id} is already stored with "
                                    "different content; a run id names one run (give the new "
                                    "run a new id)")
            return False, 0
        rows = [_result_row(run_pk, i, r) for i, r in enumerate(results.results)]
        ids = _insert_returning_ids(conn, m.ModelResultRow.__table__, rows)
        suites = dict.fromkeys([*results.settings.suites, *(r.suite for r in results.results)])
        _insert_many(conn, m.RunSuite.__table__, [{"run_pk": run_pk, "suite": s} for s in suites])
        n_samples = _details(conn, ids, results.results)
    return True, n_samples


def ingest(db: Database, results: RunResults) -> str:
    """Store one run in one transaction; idempotent on ``run_id``. Returns the run id."""
    _store(db, results)
    return results.run_id


def store(db: Database, results: RunResults, source: str) -> IngestOutcome:
    """Store one run (read from ``source``) in its own transaction; say what was done."""
    stored, n_samples = _store(db, results)
    return IngestOutcome(source=source, run_id=results.run_id, results=len(results.results),
                         samples=n_samples, stored=stored)


def ingest_files(db: Database, paths: Iterable[str | Path]) -> list[IngestOutcome]:
    """Validate and store results files, each in its own transaction."""
    return [store(db, load_results(path), str(path))  # load_results' errors name the file
            for path in paths]


MIN_PREFIX = 6  # characters of a run id that select it, when unique (as git's short ids)


def resolve_run_id(db: Database, spec: str) -> str:
    """The full id of the run that ``spec`` names: the id itself, or a unique prefix of at least
    ``MIN_PREFIX`` characters. An ambiguous prefix is a ``UsageError`` listing the candidates."""
    runs = m.Run.__table__
    with db.read() as conn:
        if conn.execute(select(runs.c.id).where(runs.c.run_id == spec)).first() is not None:
            return spec
        if len(spec) < MIN_PREFIX:
            raise UsageError(f"run id {spec!r} is too short: give the full id or a unique "
                             f"prefix of at least {MIN_PREFIX} characters (compilewatch runs "
                             "lists them)")
        found = conn.execute(
            select(runs.c.run_id, runs.c.started_at, runs.c.ref, runs.c.trigger)
            .where(runs.c.run_id.startswith(spec, autoescape=True))
            .order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(11)).all()
    if not found:
        raise DatabaseError(f"no run {spec!r} in {db.url}; list the stored runs with "
                            "`compilewatch runs`, or ingest the results file first "
                            "(compilewatch ingest FILE)")
    if len(found) > 1:
        shown = "; ".join(f"{r.run_id} ({r.started_at:%Y-%m-%d %H:%M}, {r.trigger}, "
                          f"{r.ref or 'no ref'})" for r in found[:10])
        more = " and more" if len(found) > 10 else ""
        raise UsageError(f"run id prefix {spec!r} is ambiguous: {shown}{more}; give more "
                         "characters")
    return str(found[0].run_id)


def load_run(db: Database, run_id: str) -> RunResults:
    """The stored run, exactly as it was ingested (compare accepts a run id for a file).
    ``run_id`` may be a unique prefix (``resolve_run_id``)."""
    run_id = resolve_run_id(db, run_id)
    runs, res = m.Run.__table__, m.ModelResultRow.__table__
    keys, items = m.CacheKeyRow.__table__, m.ComponentSetItem.__table__
    with db.read() as conn:
        row = conn.execute(select(runs.c.id, runs.c.meta)
                           .where(runs.c.run_id == run_id)).one()
        results = conn.execute(select(res.c.id, res.c.payload).where(res.c.run_pk == row.id)
                               .order_by(res.c.position)).all()
        of_run = (select(keys.c.result_id, keys.c.kind, keys.c.idx, keys.c.component_set_id)
                  .join(res, res.c.id == keys.c.result_id).where(res.c.run_pk == row.id))
        key_sets = {(r.result_id, r.kind, r.idx): r.component_set_id
                    for r in conn.execute(of_run)}
        per_set: dict[int, list[Any]] = {}
        for item in conn.execute(select(items).where(items.c.set_id.in_(
                of_run.with_only_columns(keys.c.component_set_id)))):
            per_set.setdefault(item.set_id, []).append(item)
    sets = {sid: components.rebuild(rows) for sid, rows in per_set.items()}
    data = json.loads(row.meta)
    data["results"] = [_with_components(rid, json.loads(payload), key_sets, sets)
                       for rid, payload in results]
    # through the upgraders: a run stored by an older compilewatch still loads and compares
    return parse_results(data, source=f"run {run_id} in {db.url}")


def _with_components(result_id: int, payload: dict[str, Any],
                     key_sets: dict[tuple[int, str, int], int],
                     sets: dict[int, tuple[dict[str, str], dict[str, str]]]) -> dict[str, Any]:
    for kind in ("fx", "aot"):
        for idx, key in enumerate(payload["cache"][kind]):
            key["components"], key["values"] = sets.get(key_sets[(result_id, kind, idx)],
                                                        ({}, {}))
    return payload


def store_runs(url: str | None, *runs: RunResults) -> list[str]:
    """Open the database at ``url`` (None: the default), ingest each run, close it.

    The one way commands (run, pr, post, nightly) store what they measured or received.
    """
    with connect(url) as db:
        return [ingest(db, run) for run in runs]
