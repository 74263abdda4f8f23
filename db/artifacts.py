"""The record of compile-cache artifacts that nightlies build (read by the publisher).

An artifact is named by its sha256 and where it lies; recording it again (for example once it
has been verified) updates its verdict instead of adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from sqlalchemy import select, update

from compilewatch.core.errors import UsageError
from compilewatch.core.schema import CommitSha, Hash, Name, RunId, Sha256, Short, Text
from compilewatch.db import models as m
from compilewatch.db.engine import Database, utcnow

A = m.CacheArtifact.__table__


class ArtifactRecord(BaseModel):
    """What the publisher knows about one artifact; validated like a results file."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: Name
    suite: Name | None = None
    config_slug: Annotated[str, StringConstraints(max_length=64, min_length=1)]
    fingerprint: Hash
    torch_version: Short
    location: Text
    size_bytes: int = Field(ge=0)
    sha256: Sha256
    verified: bool
    reason: Text | None = None
    run_id: RunId | None = None
    commit: CommitSha | None = None


@dataclass(frozen=True)
class ArtifactInfo:
    id: int
    model: str
    suite: str | None
    config_slug: str
    fingerprint: str
    torch_version: str
    location: str
    size_bytes: int
    sha256: str
    verified: bool
    reason: str | None
    run_id: str | None
    commit: str | None
    created_at: datetime


def record_artifact(db: Database, **fields: object) -> ArtifactInfo:
    """Record an artifact (keywords as ``ArtifactRecord``); same sha256 + location updates it."""
    try:
        rec = ArtifactRecord.model_validate(fields)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<top>"
        raise UsageError(f"cache artifact: {where}: {first['msg']}") from None
    with db.write() as conn:
        existing = conn.execute(select(A.c.id).where(A.c.sha256 == rec.sha256,
                                                     A.c.location == rec.location)).scalar()
        if existing is None:
            conn.execute(A.insert().values(**rec.model_dump(), created_at=utcnow()))
        else:
            conn.execute(update(A).where(A.c.id == existing)
                         .values(verified=rec.verified, reason=rec.reason))
        row = conn.execute(select(A).where(A.c.sha256 == rec.sha256,
                                           A.c.location == rec.location)).one()
    return ArtifactInfo(**row._asdict())


def list_artifacts(db: Database, *, model: str | None = None, config_slug: str | None = None,
                   fingerprint: str | None = None, verified: bool | None = None,
                   limit: int | None = None) -> list[ArtifactInfo]:
    """Artifacts matching every given filter, newest first."""
    stmt = select(A).order_by(A.c.created_at.desc(), A.c.id.desc()).limit(limit)
    for col, want in ((A.c.model, model), (A.c.config_slug, config_slug),
                      (A.c.fingerprint, fingerprint), (A.c.verified, verified)):
        if want is not None:
            stmt = stmt.where(col == want)
    with db.read() as conn:
        return [ArtifactInfo(**r._asdict()) for r in conn.execute(stmt)]
