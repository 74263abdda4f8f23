"""``compilewatch bisect``: the first commit, or torch build, where a model regressed."""
