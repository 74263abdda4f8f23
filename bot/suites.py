"""``compilewatch suites``: list the suites and their models."""

from __future__ import annotations

from rich.console import Console

from compilewatch.bot.measuring import suite_sources
from compilewatch.suites.loader import BUILTIN, resolve_suites


def suites_command(*, suites: list[str]) -> None:
    """Print every suite and its models (with the packages they need)."""
    console = Console()
    names = suites or list(BUILTIN)
    for suite in resolve_suites(suite_sources(names)):
        console.print(f"[bold]{suite.name}[/bold]  ({suite.source})")
        for spec in suite.models.values():
            extra = []
            if spec.tags:
                extra.append(", ".join(spec.tags))
            if spec.requires:
                extra.append("needs " + ", ".join(spec.requires)
                             + (" (not installed: will be skipped)"
                                if spec.missing_packages() else ""))
            console.print(f"  {spec.name}" + (f"  [dim]{'; '.join(extra)}[/dim]" if extra
                                               else ""))
