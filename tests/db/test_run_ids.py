"""Run ids as people type them: a unique prefix (at least 6 characters) works like git's, an
ambiguous one lists the candidates; ``list_runs`` is what ``compilewatch runs`` shows."""

from __future__ import annotations

import pytest

from compilewatch.core.errors import DatabaseError, UsageError
from compilewatch.db import Database, ingest, list_runs, load_run, resolve_run_id
from tests.factories import model_result, run_results


def _run(run_id: str, *, day: int = 1, trigger: str = "local", ref: str | None = "main",
         repository: str | None = "acme/models"):  # type: ignore[no-untyped-def]
    run = run_results([model_result("mlp"), model_result("convnet")], run_id=run_id,
                      commit=f"{day:x}" * 40, ref=ref, repository=repository,
                      created_at=f"2026-11-{day:02d}T08:00:00+00:00")
    run.settings.trigger = trigger
    return run


def test_a_unique_prefix_loads_the_run(db: Database) -> None:
    run = _run("3f2a9c1b7d4e4f00a1b2c3d4e5f60718")
    ingest(db, run)
    ingest(db, _run("77aa00bb11cc22dd33ee44ff55aa66bb", day=2))
    assert load_run(db, run.run_id[:12]) == run  # what the run summary shows
    assert load_run(db, run.run_id[:6]) == run
    assert resolve_run_id(db, run.run_id) == run.run_id


def test_an_ambiguous_prefix_lists_the_candidates(db: Database) -> None:
    ingest(db, _run("abcdef0011223344", day=1))
    ingest(db, _run("abcdef9988776655", day=2, ref="feature"))
    with pytest.raises(UsageError, match="ambiguous") as e:
        load_run(db, "abcdef")
    assert "abcdef0011223344" in str(e.value) and "abcdef9988776655" in str(e.value)
    assert "feature" in str(e.value)
    assert load_run(db, "abcdef99").run_id == "abcdef9988776655"


def test_short_or_unknown_ids_are_refused(db: Database) -> None:
    ingest(db, _run("abcdef0011223344"))
    with pytest.raises(UsageError, match="at least 6"):
        load_run(db, "abcde")
    with pytest.raises(DatabaseError, match="no run 'ffffff'"):
        load_run(db, "ffffff")
    with pytest.raises(DatabaseError, match="no run"):
        load_run(db, "abcdef_%")  # LIKE wildcards are literal


def test_list_runs_newest_first_with_filters(db: Database) -> None:
    ingest(db, _run("run-a-000001", day=1, trigger="nightly"))
    ingest(db, _run("run-b-000002", day=2, ref="feature", repository="other/repo"))
    ingest(db, _run("run-c-000003", day=3))
    assert [r.run_id for r in list_runs(db)] == ["run-c-000003", "run-b-000002", "run-a-000001"]
    assert [r.run_id for r in list_runs(db, limit=1)] == ["run-c-000003"]
    assert [r.run_id for r in list_runs(db, trigger="nightly")] == ["run-a-000001"]
    assert [r.run_id for r in list_runs(db, ref="feature")] == ["run-b-000002"]
    assert [r.run_id for r in list_runs(db, repository="other/repo")] == ["run-b-000002"]
    newest = list_runs(db)[0]
    assert (newest.repository, newest.n_results, newest.suites) == ("acme/models", 2,
                                                                     ("micro",))
