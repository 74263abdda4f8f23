"""compilewatch.bot.history: stored runs over time, their change points, charts and the static
dashboard that ``compilewatch trends`` writes."""
