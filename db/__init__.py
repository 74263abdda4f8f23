"""compilewatch.db."""
