"""compilewatch.templates."""
