"""SQLAlchemy 2.0 tables for what a run produces.

One row per run, per environment, per model result; child tables for what a result holds in
lists (timing samples, compile phases, graph breaks, recompiles, cache keys). Scalars that
queries filter or plot (speedup, medians, compile seconds, counts, accuracy, memory) are columns
of ``model_results``; the validated ``ModelResult`` JSON is kept in ``payload`` so that a stored
run can be turned back into the exact results file.

A cache key's components (a hash and often a value for each of ~70 names) are the bulk of a
run, and they repeat: the same graph compiled cold and warm, night after night. They are stored
once per distinct set (``component_sets``, content-addressed by a sha256 of the names, hashes
and values in their recorded order) and referenced from each ``cache_keys`` row; ``payload``
holds the cache keys without them (``db/store.py`` puts them back).

The schema changes only through the Alembic migrations in ``migrations/versions``; a test checks
that the migrations and these models agree.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Stable constraint names so that migrations can refer to (and drop) them on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Lengths follow core/schema.py (Name 128, Short 256, Hash 128); Text holds the 8192 ones.
NAME = 128
SHORT = 256
HASH = 128
SHA = 64

EAGER, COMPILED = 0, 1  # timing_samples.side


# the columns of ix_model_results_history (migration 0004), in its order
HISTORY_COLUMNS = ("model", "suite", "config_slug", "run_pk", "status", "speedup_ci_low",
                   "speedup_ci_high", "speedup", "compiled_median_us", "cold_s", "warm_s",
                   "warm_start_s", "graph_break_count", "recompile_count")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Environment(Base):
    """Where runs happened; ``fingerprint`` hashes what decides cache compatibility."""

    __tablename__ = "environments"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(HASH), unique=True)
    torch: Mapped[str] = mapped_column(String(SHORT))
    python: Mapped[str] = mapped_column(String(SHORT))
    platform: Mapped[str] = mapped_column(String(SHORT))
    machine: Mapped[str] = mapped_column(String(SHORT))
    gpu: Mapped[str | None] = mapped_column(String(SHORT))
    cuda: Mapped[str | None] = mapped_column(String(SHORT))
    triton: Mapped[str | None] = mapped_column(String(SHORT))
    first_seen: Mapped[datetime] = mapped_column(DateTime)


class Run(Base):
    """One results file. ``meta`` is the file's JSON without ``results`` (for ``load_run``)."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), unique=True)
    content_sha256: Mapped[str] = mapped_column(String(SHA))
    schema_version: Mapped[int] = mapped_column(Integer)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    fingerprint: Mapped[str] = mapped_column(String(HASH))
    commit: Mapped[str | None] = mapped_column(String(64))
    ref: Mapped[str | None] = mapped_column(String(SHORT))
    merge_base: Mapped[str | None] = mapped_column(String(64))
    pr: Mapped[int | None] = mapped_column(Integer)
    repository: Mapped[str | None] = mapped_column(String(SHORT))
    trigger: Mapped[str] = mapped_column(String(16))
    side: Mapped[str | None] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    n_results: Mapped[int] = mapped_column(Integer)
    n_pass: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    ingested_at: Mapped[datetime] = mapped_column(DateTime)
    meta: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        Index("ix_runs_commit_started", "commit", "started_at"),
        Index("ix_runs_pr_started", "pr", "started_at"),
        Index("ix_runs_trigger_ref_started", "trigger", "ref", "started_at"),
    )


class RunSuite(Base):
    """The suites a run measured (from its settings and its results)."""

    __tablename__ = "run_suites"
    run_pk: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    suite: Mapped[str] = mapped_column(String(SHORT), primary_key=True)

    __table_args__ = (Index("ix_run_suites_suite", "suite", "run_pk"),)


class ModelResultRow(Base):
    """One (model, config) in one run, with the scalars that history and compare query."""

    __tablename__ = "model_results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    suite: Mapped[str] = mapped_column(String(NAME))
    model: Mapped[str] = mapped_column(String(NAME))
    config_slug: Mapped[str] = mapped_column(String(64))
    device: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(32))
    dtype: Mapped[str] = mapped_column(String(16))
    dynamic: Mapped[bool | None] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16))
    category: Mapped[str] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    speedup: Mapped[float | None] = mapped_column(Float)
    speedup_ci_low: Mapped[float | None] = mapped_column(Float)
    speedup_ci_high: Mapped[float | None] = mapped_column(Float)
    eager_median_us: Mapped[float | None] = mapped_column(Float)
    compiled_median_us: Mapped[float | None] = mapped_column(Float)
    cold_s: Mapped[float | None] = mapped_column(Float)
    warm_s: Mapped[float | None] = mapped_column(Float)
    warm_start_s: Mapped[float | None] = mapped_column(Float)
    frames: Mapped[int] = mapped_column(Integer)
    graphs: Mapped[int] = mapped_column(Integer)
    guard_count: Mapped[int | None] = mapped_column(Integer)
    graph_break_count: Mapped[int] = mapped_column(Integer)
    recompile_count: Mapped[int] = mapped_column(Integer)
    accuracy_passed: Mapped[bool | None] = mapped_column(Boolean)
    max_abs_err: Mapped[float | None] = mapped_column(Float)
    max_rel_err: Mapped[float | None] = mapped_column(Float)
    eager_peak_bytes: Mapped[int | None] = mapped_column(BigInteger)
    compiled_peak_bytes: Mapped[int | None] = mapped_column(BigInteger)
    duration_s: Mapped[float] = mapped_column(Float)
    payload: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        UniqueConstraint("run_pk", "suite", "model", "config_slug",
                         name="uq_model_results_ident"),
        Index("ix_model_results_model", "model", "suite", "config_slug"),
        # covers what results_history (the trends query) reads: no payload page is touched
        Index("ix_model_results_history", *HISTORY_COLUMNS),
    )


class TimingSample(Base):
    """One per-call time in µs: ``side`` 0 eager, 1 compiled; ``idx`` pairs the two sides."""

    __tablename__ = "timing_samples"
    result_id: Mapped[int] = mapped_column(
        ForeignKey("model_results.id", ondelete="CASCADE"), primary_key=True)
    side: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    value_us: Mapped[float] = mapped_column(Float)

    __table_args__ = ({"sqlite_with_rowid": False},)


class CompilePhase(Base):
    """Seconds per compile phase, for the cold, the warm and the warm-start compile."""

    __tablename__ = "compile_phases"
    result_id: Mapped[int] = mapped_column(
        ForeignKey("model_results.id", ondelete="CASCADE"), primary_key=True)
    compile: Mapped[str] = mapped_column(String(16), primary_key=True)
    phase: Mapped[str] = mapped_column(String(SHORT), primary_key=True)
    seconds: Mapped[float] = mapped_column(Float)


class GraphBreakRow(Base):
    __tablename__ = "graph_breaks"
    result_id: Mapped[int] = mapped_column(
        ForeignKey("model_results.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    reason: Mapped[str] = mapped_column(Text)
    count: Mapped[int] = mapped_column(Integer)


class RecompileRow(Base):
    __tablename__ = "recompiles"
    result_id: Mapped[int] = mapped_column(
        ForeignKey("model_results.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    reason: Mapped[str] = mapped_column(Text)
    compile_id: Mapped[str | None] = mapped_column(String(SHORT))


class CacheKeyRow(Base):
    """One compiled graph's FX or AOTAutograd cache key; its components are a shared set."""

    __tablename__ = "cache_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("model_results.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(8))
    idx: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(HASH))
    hit: Mapped[bool | None] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(16))
    phase: Mapped[str] = mapped_column(String(16))
    component_set_id: Mapped[int] = mapped_column(ForeignKey("component_sets.id"))

    __table_args__ = (
        UniqueConstraint("result_id", "kind", "idx", name="uq_cache_keys_position"),
        Index("ix_cache_keys_key", "key"),
    )


class ComponentSet(Base):
    """A distinct set of cache-key components, stored once however many keys share it.

    ``digest`` is the sha256 of the components and values in their recorded order (so that
    ``load_run`` gives back the exact results file).
    """

    __tablename__ = "component_sets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(SHA), unique=True)


class ComponentSetItem(Base):
    """One component of a set: its hash and, where recorded, its value. ``position`` is the
    name's place among the components (values-only names after them), ``value_position`` its
    place among the values."""

    __tablename__ = "component_set_items"
    set_id: Mapped[int] = mapped_column(
        ForeignKey("component_sets.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(SHORT))
    hash: Mapped[str | None] = mapped_column(String(HASH))
    value: Mapped[str | None] = mapped_column(Text)
    value_position: Mapped[int | None] = mapped_column(Integer)


class CacheArtifact(Base):
    """A portable compile-cache artifact built by a nightly (for the publisher)."""

    __tablename__ = "cache_artifacts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(NAME))
    suite: Mapped[str | None] = mapped_column(String(NAME))
    config_slug: Mapped[str] = mapped_column(String(64))
    fingerprint: Mapped[str] = mapped_column(String(HASH))
    torch_version: Mapped[str] = mapped_column(String(SHORT))
    location: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(SHA))
    verified: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(String(64))
    commit: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)

    __table_args__ = (
        UniqueConstraint("sha256", "location", name="uq_cache_artifacts_sha256_location"),
        Index("ix_cache_artifacts_lookup", "fingerprint", "config_slug", "model", "created_at"),
    )


class NoiseBand(Base):
    """A model's noise on a runner for one metric, learned by ``compilewatch calibrate``: the
    standard deviation of the log value between processes, with its degrees of freedom."""

    __tablename__ = "noise_bands"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(NAME))
    model: Mapped[str] = mapped_column(String(NAME))
    config_slug: Mapped[str] = mapped_column(String(64))
    fingerprint: Mapped[str] = mapped_column(String(HASH))
    metric: Mapped[str] = mapped_column(String(64))
    sd: Mapped[float] = mapped_column(Float)
    df: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)

    __table_args__ = (
        UniqueConstraint("suite", "model", "config_slug", "fingerprint", "metric",
                         name="uq_noise_bands_ident"),
        Index("ix_noise_bands_fingerprint", "fingerprint"),
    )
