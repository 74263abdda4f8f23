"""compilewatch.bot."""
