"""Noise bands learned per model on a runner (``compilewatch calibrate``).

One row per (suite, model, config, environment fingerprint, metric): the standard deviation of
the log value between processes, its degrees of freedom, and the run it came from. Verdicts use
the newest band of the base run's environment instead of the default noise.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "noise_bands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("config_slug", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=128), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("sd", sa.Float(), nullable=False),
        sa.Column("df", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_noise_bands")),
        sa.UniqueConstraint("suite", "model", "config_slug", "fingerprint", "metric",
                            name="uq_noise_bands_ident"),
    )
    op.create_index("ix_noise_bands_fingerprint", "noise_bands", ["fingerprint"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_noise_bands_fingerprint", table_name="noise_bands")
    op.drop_table("noise_bands")
