"""compilewatch.core: what every layer shares (the results schema, the errors, atomic writes,
aggregates). It imports nothing else of compilewatch, so every other package may import it."""
