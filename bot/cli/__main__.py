"""``python -m compilewatch.bot.cli``: what the ``compilewatch`` executable runs."""

from compilewatch.bot.cli import entry

entry()
