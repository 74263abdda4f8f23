"""A covering index for the trends query (``results_history``), one model at a time.

Reading a year of nightlies of a 100-model suite at once (36,500 ``model_results`` rows, each
beside its whole ``payload``) took about 500 ms on SQLite and 600-800 ms on Postgres
(``benchmarks/bench_db.py``). ``trends`` now reads one model's history per page; this index
starts with the model's name and holds every column that query reads, so a page is one range
of one index, read without the table (docs/storage.md has the numbers).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 22:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# written out, not imported: a migration keeps the shape it had when it was written
COLUMNS = ["model", "suite", "config_slug", "run_pk", "status", "speedup_ci_low",
           "speedup_ci_high", "speedup", "compiled_median_us", "cold_s", "warm_s",
           "warm_start_s", "graph_break_count", "recompile_count"]


def upgrade() -> None:
    op.create_index("ix_model_results_history", "model_results", COLUMNS, unique=False)


def downgrade() -> None:
    op.drop_index("ix_model_results_history", table_name="model_results")
