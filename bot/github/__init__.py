"""compilewatch.bot.github: the PyGithub client with retries, the sticky comment, checks and
releases. Nothing here computes a verdict: it posts what was rendered."""
