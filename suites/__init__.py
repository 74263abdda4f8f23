"""compilewatch.suites."""
