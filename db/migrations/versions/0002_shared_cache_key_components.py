"""Cache-key components stored once per distinct set, referenced from each cache key.

One 7-model CPU run stored 20,559 ``cache_key_components`` rows (5.8 MB of SQLite): every
compiled graph's ~70 components, again for the warm compile, again every night, and once more
inside ``model_results.payload``. Now ``component_sets`` (content-addressed by a sha256 of the
components and values in recorded order) and ``component_set_items`` hold each distinct set
once; ``cache_keys.component_set_id`` points at it, and ``payload`` keeps the cache keys without
their components (``load_run`` puts them back, so the run read back is exactly the one stored).

The data migration reads the component order from each payload (the old rows kept none) and
rewrites the payload; the downgrade writes the old rows and the full payload back.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

KINDS = ("fx", "aot")

# Lightweight tables as they stand during this migration (never the ORM models, which move on).
results_t = sa.table("model_results", sa.column("id", sa.Integer),
                     sa.column("payload", sa.Text))
keys_t = sa.table("cache_keys", sa.column("id", sa.Integer), sa.column("result_id", sa.Integer),
                  sa.column("kind", sa.String), sa.column("idx", sa.Integer),
                  sa.column("component_set_id", sa.Integer))
sets_t = sa.table("component_sets", sa.column("id", sa.Integer), sa.column("digest", sa.String))
items_t = sa.table("component_set_items", sa.column("set_id", sa.Integer),
                   sa.column("position", sa.Integer), sa.column("name", sa.String),
                   sa.column("hash", sa.String), sa.column("value", sa.Text),
                   sa.column("value_position", sa.Integer))
old_components_t = sa.table("cache_key_components", sa.column("cache_key_id", sa.Integer),
                            sa.column("name", sa.String), sa.column("hash", sa.String),
                            sa.column("value", sa.Text))


def _digest(components: dict[str, str], values: dict[str, str]) -> str:
    """As compilewatch.db.components.digest at this revision (new ingests share these sets)."""
    blob = json.dumps([list(components.items()), list(values.items())], separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _items(set_id: int, components: dict[str, str],
           values: dict[str, str]) -> list[dict[str, Any]]:
    value_at = {name: i for i, name in enumerate(values)}
    names = dict.fromkeys([*components, *values])
    return [{"set_id": set_id, "position": i, "name": n, "hash": components.get(n),
             "value": values.get(n), "value_position": value_at.get(n)}
            for i, n in enumerate(names)]


def _payloads(conn: sa.Connection) -> list[tuple[int, dict[str, Any]]]:
    return [(rid, json.loads(p)) for rid, p in conn.execute(
        sa.select(results_t.c.id, results_t.c.payload).order_by(results_t.c.id))]


def _key_ids(conn: sa.Connection) -> dict[tuple[int, str, int], int]:
    return {(r.result_id, r.kind, r.idx): r.id for r in conn.execute(
        sa.select(keys_t.c.id, keys_t.c.result_id, keys_t.c.kind, keys_t.c.idx))}


def upgrade() -> None:
    op.create_table(
        "component_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_component_sets")),
        sa.UniqueConstraint("digest", name=op.f("uq_component_sets_digest")),
    )
    op.create_table(
        "component_set_items",
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("hash", sa.String(length=128), nullable=True),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("value_position", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["set_id"], ["component_sets.id"],
                                name=op.f("fk_component_set_items_set_id_component_sets"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("set_id", "position", name=op.f("pk_component_set_items")),
    )
    with op.batch_alter_table("cache_keys") as batch:
        batch.add_column(sa.Column("component_set_id", sa.Integer(), nullable=True))
    _share_components(op.get_bind())
    op.drop_table("cache_key_components")
    with op.batch_alter_table("cache_keys") as batch:
        batch.alter_column("component_set_id", existing_type=sa.Integer(), nullable=False)
        batch.create_foreign_key(op.f("fk_cache_keys_component_set_id_component_sets"),
                                 "component_sets", ["component_set_id"], ["id"])


def _share_components(conn: sa.Connection) -> None:
    """Each key's components into a shared set (order from the payload); payloads stripped."""
    key_ids = _key_ids(conn)
    set_ids: dict[str, int] = {}
    for rid, data in _payloads(conn):
        for kind in KINDS:
            for idx, key in enumerate(data["cache"][kind]):
                comps, values = key.get("components", {}), key.get("values", {})
                d = _digest(comps, values)
                if d not in set_ids:
                    set_ids[d] = conn.execute(sets_t.insert().values(digest=d)
                                              .returning(sets_t.c.id)).scalar_one()
                    rows = _items(set_ids[d], comps, values)
                    if rows:
                        conn.execute(items_t.insert(), rows)
                conn.execute(keys_t.update().where(keys_t.c.id == key_ids[(rid, kind, idx)])
                             .values(component_set_id=set_ids[d]))
                key["components"], key["values"] = {}, {}
        conn.execute(results_t.update().where(results_t.c.id == rid)
                     .values(payload=json.dumps(data, separators=(",", ":"))))


def downgrade() -> None:
    # Read everything first: rebuilding cache_keys (SQLite batch mode) drops the old table, and
    # with foreign keys on that would cascade into rows referencing it.
    conn = op.get_bind()
    payloads, rows = _unshared(conn)
    with op.batch_alter_table("cache_keys") as batch:
        batch.drop_constraint(op.f("fk_cache_keys_component_set_id_component_sets"),
                              type_="foreignkey")
        batch.drop_column("component_set_id")
    op.drop_table("component_set_items")
    op.drop_table("component_sets")
    op.create_table(
        "cache_key_components",
        sa.Column("cache_key_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("hash", sa.String(length=128), nullable=True),
        sa.Column("value", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cache_key_id"], ["cache_keys.id"],
            name=op.f("fk_cache_key_components_cache_key_id_cache_keys"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("cache_key_id", "name", name=op.f("pk_cache_key_components")),
    )
    if rows:
        conn.execute(old_components_t.insert(), rows)
    for rid, data in payloads:
        conn.execute(results_t.update().where(results_t.c.id == rid)
                     .values(payload=json.dumps(data, separators=(",", ":"))))


def _unshared(conn: sa.Connection) -> tuple[list[tuple[int, dict[str, Any]]],
                                            list[dict[str, Any]]]:
    """The payloads with their components back, and a component row per key (the old layout)."""
    per_set: dict[int, list[Any]] = defaultdict(list)
    for r in conn.execute(sa.select(items_t)):
        per_set[r.set_id].append(r)
    sets: dict[int, tuple[dict[str, str], dict[str, str]]] = {}
    for sid, items in per_set.items():
        items.sort(key=lambda r: r.position)
        valued = sorted((r for r in items if r.value_position is not None),
                        key=lambda r: r.value_position)
        sets[sid] = ({r.name: r.hash for r in items if r.hash is not None},
                     {r.name: r.value for r in valued})
    key_sets = {(r.result_id, r.kind, r.idx): (r.id, r.component_set_id) for r in conn.execute(
        sa.select(keys_t.c.id, keys_t.c.result_id, keys_t.c.kind, keys_t.c.idx,
                  keys_t.c.component_set_id))}
    payloads, rows = _payloads(conn), []
    for rid, data in payloads:
        for kind in KINDS:
            for idx, key in enumerate(data["cache"][kind]):
                key_id, sid = key_sets[(rid, kind, idx)]
                comps, values = sets.get(sid, ({}, {}))
                key["components"], key["values"] = comps, values
                rows += [{"cache_key_id": key_id, "name": n, "hash": comps.get(n),
                          "value": values.get(n)} for n in dict.fromkeys([*comps, *values])]
    return payloads, rows
