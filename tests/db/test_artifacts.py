"""The cache-artifact record the nightly publisher reads."""

from __future__ import annotations

import pytest

from compilewatch.core.errors import UsageError
from compilewatch.db import Database, list_artifacts, record_artifact

ART = {"model": "mlp", "suite": "micro", "config_slug": "cuda-default-float32-auto",
       "fingerprint": "f" * 32, "torch_version": "2.11.0", "location": "s3://cache/mlp.bin",
       "size_bytes": 12345, "sha256": "ab" * 32, "verified": False, "reason": "not yet checked"}


def test_record_then_verify_updates_in_place(db: Database) -> None:
    first = record_artifact(db, **ART)
    again = record_artifact(db, **{**ART, "verified": True, "reason": None})
    assert again.id == first.id and again.verified and again.reason is None
    assert again.created_at == first.created_at
    assert [a.id for a in list_artifacts(db)] == [first.id]


def test_list_filters_newest_first(db: Database) -> None:
    a = record_artifact(db, **ART)
    b = record_artifact(db, **{**ART, "sha256": "cd" * 32, "verified": True})
    c = record_artifact(db, **{**ART, "sha256": "ef" * 32, "fingerprint": "e" * 32})
    assert [x.id for x in list_artifacts(db)] == [c.id, b.id, a.id]
    assert [x.id for x in list_artifacts(db, verified=True)] == [b.id]
    assert [x.id for x in list_artifacts(db, fingerprint="e" * 32)] == [c.id]
    assert [x.id for x in list_artifacts(db, model="other")] == []
    assert len(list_artifacts(db, limit=2)) == 2


@pytest.mark.parametrize(("field", "value"), [("sha256", "xyz"), ("size_bytes", -1),
                                              ("model", "../etc/passwd"), ("unknown", 1)])
def test_bad_artifact_names_the_field(db: Database, field: str, value: object) -> None:
    with pytest.raises(UsageError, match=field):
        record_artifact(db, **{**ART, field: value})
    assert list_artifacts(db) == []
