"""compilewatch.bot.render: the comparison and the run as markdown, HTML, JSON and terminal
tables."""
