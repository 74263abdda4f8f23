"""compilewatch.compiler."""
