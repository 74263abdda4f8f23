"""Initial schema: runs, environments, model results and their details, cache artifacts.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 07:18:02.924239
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cache_artifacts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=True),
        sa.Column("config_slug", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=128), nullable=False),
        sa.Column("torch_version", sa.String(length=256), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("commit", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cache_artifacts")),
        sa.UniqueConstraint("sha256", "location", name="uq_cache_artifacts_sha256_location"),
    )
    op.create_index(
        "ix_cache_artifacts_lookup",
        "cache_artifacts",
        ["fingerprint", "config_slug", "model", "created_at"],
        unique=False,
    )

    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=128), nullable=False),
        sa.Column("torch", sa.String(length=256), nullable=False),
        sa.Column("python", sa.String(length=256), nullable=False),
        sa.Column("platform", sa.String(length=256), nullable=False),
        sa.Column("machine", sa.String(length=256), nullable=False),
        sa.Column("gpu", sa.String(length=256), nullable=True),
        sa.Column("cuda", sa.String(length=256), nullable=True),
        sa.Column("triton", sa.String(length=256), nullable=True),
        sa.Column("first_seen", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_environments_fingerprint")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=128), nullable=False),
        sa.Column("commit", sa.String(length=64), nullable=True),
        sa.Column("ref", sa.String(length=256), nullable=True),
        sa.Column("merge_base", sa.String(length=64), nullable=True),
        sa.Column("pr", sa.Integer(), nullable=True),
        sa.Column("repository", sa.String(length=256), nullable=True),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("side", sa.String(length=16), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("n_results", sa.Integer(), nullable=False),
        sa.Column("n_pass", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("ingested_at", sa.DateTime(), nullable=False),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_runs_environment_id_environments"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("run_id", name=op.f("uq_runs_run_id")),
    )
    op.create_index("ix_runs_commit_started", "runs", ["commit", "started_at"], unique=False)
    op.create_index("ix_runs_pr_started", "runs", ["pr", "started_at"], unique=False)
    op.create_index(
        "ix_runs_trigger_ref_started", "runs", ["trigger", "ref", "started_at"], unique=False
    )

    op.create_table(
        "model_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("config_slug", sa.String(length=64), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=32), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("dynamic", sa.Boolean(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("category", sa.String(length=32), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("speedup_ci_low", sa.Float(), nullable=True),
        sa.Column("speedup_ci_high", sa.Float(), nullable=True),
        sa.Column("eager_median_us", sa.Float(), nullable=True),
        sa.Column("compiled_median_us", sa.Float(), nullable=True),
        sa.Column("cold_s", sa.Float(), nullable=True),
        sa.Column("warm_s", sa.Float(), nullable=True),
        sa.Column("warm_start_s", sa.Float(), nullable=True),
        sa.Column("frames", sa.Integer(), nullable=False),
        sa.Column("graphs", sa.Integer(), nullable=False),
        sa.Column("guard_count", sa.Integer(), nullable=True),
        sa.Column("graph_break_count", sa.Integer(), nullable=False),
        sa.Column("recompile_count", sa.Integer(), nullable=False),
        sa.Column("accuracy_passed", sa.Boolean(), nullable=True),
        sa.Column("max_abs_err", sa.Float(), nullable=True),
        sa.Column("max_rel_err", sa.Float(), nullable=True),
        sa.Column("eager_peak_bytes", sa.BigInteger(), nullable=True),
        sa.Column("compiled_peak_bytes", sa.BigInteger(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_pk"], ["runs.id"], name=op.f("fk_model_results_run_pk_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_results")),
        sa.UniqueConstraint(
            "run_pk", "suite", "model", "config_slug", name="uq_model_results_ident"
        ),
    )
    op.create_index(
        "ix_model_results_model", "model_results", ["model", "suite", "config_slug"], unique=False
    )

    op.create_table(
        "run_suites",
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=256), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_pk"], ["runs.id"], name=op.f("fk_run_suites_run_pk_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_pk", "suite", name=op.f("pk_run_suites")),
    )
    op.create_index("ix_run_suites_suite", "run_suites", ["suite", "run_pk"], unique=False)

    op.create_table(
        "cache_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("hit", sa.Boolean(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["result_id"],
            ["model_results.id"],
            name=op.f("fk_cache_keys_result_id_model_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cache_keys")),
        sa.UniqueConstraint("result_id", "kind", "idx", name="uq_cache_keys_position"),
    )
    op.create_index("ix_cache_keys_key", "cache_keys", ["key"], unique=False)

    op.create_table(
        "compile_phases",
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("compile", sa.String(length=16), nullable=False),
        sa.Column("phase", sa.String(length=256), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["result_id"],
            ["model_results.id"],
            name=op.f("fk_compile_phases_result_id_model_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("result_id", "compile", "phase", name=op.f("pk_compile_phases")),
    )
    op.create_table(
        "graph_breaks",
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["result_id"],
            ["model_results.id"],
            name=op.f("fk_graph_breaks_result_id_model_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("result_id", "idx", name=op.f("pk_graph_breaks")),
    )
    op.create_table(
        "recompiles",
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("compile_id", sa.String(length=256), nullable=True),
        sa.ForeignKeyConstraint(
            ["result_id"],
            ["model_results.id"],
            name=op.f("fk_recompiles_result_id_model_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("result_id", "idx", name=op.f("pk_recompiles")),
    )
    op.create_table(
        "timing_samples",
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("side", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("value_us", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["result_id"],
            ["model_results.id"],
            name=op.f("fk_timing_samples_result_id_model_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("result_id", "side", "idx", name=op.f("pk_timing_samples")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "cache_key_components",
        sa.Column("cache_key_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("hash", sa.String(length=128), nullable=True),
        sa.Column("value", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cache_key_id"],
            ["cache_keys.id"],
            name=op.f("fk_cache_key_components_cache_key_id_cache_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cache_key_id", "name", name=op.f("pk_cache_key_components")),
    )


def downgrade() -> None:
    op.drop_table("cache_key_components")
    op.drop_table("timing_samples")
    op.drop_table("recompiles")
    op.drop_table("graph_breaks")
    op.drop_table("compile_phases")
    op.drop_index("ix_cache_keys_key", table_name="cache_keys")

    op.drop_table("cache_keys")
    op.drop_index("ix_run_suites_suite", table_name="run_suites")

    op.drop_table("run_suites")
    op.drop_index("ix_model_results_model", table_name="model_results")

    op.drop_table("model_results")
    op.drop_index("ix_runs_trigger_ref_started", table_name="runs")
    op.drop_index("ix_runs_pr_started", table_name="runs")
    op.drop_index("ix_runs_commit_started", table_name="runs")

    op.drop_table("runs")
    op.drop_table("environments")
    op.drop_index("ix_cache_artifacts_lookup", table_name="cache_artifacts")

    op.drop_table("cache_artifacts")
