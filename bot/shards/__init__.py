"""Sharding one suite over many runners: the plan every shard computes alone (``plan.py``),
and merging a group's shards back into one side (``merge.py``). docs/scale.md."""
