"""compilewatch.bot.judge: base against head, per model and metric, into one ``Comparison``.

Pure computation (statistics, thresholds, expectations, cache-key diffs) plus reading the
project's own configuration; no rendering, no GitHub.
"""
