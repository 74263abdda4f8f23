"""Cache-key components, content-addressed: one stored set per distinct (components, values).

A key's components are the bulk of a run (about 70 names per compiled graph, each with a hash
and often a value) and they repeat: cold and warm compile the same graph, and a nightly compiles
the same graphs every night. ``digest`` names a set by its content in recorded order, so equal
sets are stored once and ``rebuild`` gives back the exact dicts, in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any


def digest(components: Mapping[str, str], values: Mapping[str, str]) -> str:
    """sha256 of the names, hashes and values in their recorded order."""
    blob = json.dumps([list(components.items()), list(values.items())], separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def items(set_id: int, components: Mapping[str, str],
          values: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows of ``component_set_items``: components in order, then names that only have a value;
    ``value_position`` keeps the order of the values, which may differ."""
    value_at = {name: i for i, name in enumerate(values)}
    names = dict.fromkeys([*components, *values])
    return [{"set_id": set_id, "position": i, "name": name, "hash": components.get(name),
             "value": values.get(name), "value_position": value_at.get(name)}
            for i, name in enumerate(names)]


def rebuild(rows: Iterable[Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(components, values) of one set from its item rows (``position``, ``name``, ``hash``,
    ``value``, ``value_position``), in their recorded orders."""
    ordered = sorted(rows, key=lambda r: r.position)
    components = {r.name: r.hash for r in ordered if r.hash is not None}
    valued = sorted((r for r in ordered if r.value_position is not None),
                    key=lambda r: r.value_position)
    return components, {r.name: r.value for r in valued}
