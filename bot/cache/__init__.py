"""compilewatch.bot.cache: publishing and fetching the portable compile-cache artifacts."""
