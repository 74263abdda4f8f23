"""The command line: the only package that parses arguments and prints.

Each command calls one typed function with keywords and maps ``CompilewatchError`` to its exit
code (documented in docs/cli.md): 0 ok, 1 gating regression found, 2 usage or input error,
3 internal error (a bug: the traceback is printed). ``base`` holds the group and what every
command shares; the commands are registered by importing their modules below.
"""

from compilewatch.bot.cli import (
    bisect_commands,
    github_commands,
    measure_commands,
    result_commands,
)
from compilewatch.bot.cli.base import entry, main

__all__ = ["bisect_commands", "entry", "github_commands", "main", "measure_commands",
           "result_commands"]
