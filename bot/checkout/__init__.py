"""compilewatch.bot.checkout: git commands and the temporary worktrees each side is measured
from."""
