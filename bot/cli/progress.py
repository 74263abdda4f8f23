"""How measuring's progress is shown: a live bar on a terminal; in a log (CI, a pipe), where a
bar cannot redraw, one line per finished model and each note."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compilewatch.bot.cli.base import make_console

if TYPE_CHECKING:
    from compilewatch.bot.measure.harness import MeasureProgress

COLUMNS = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
           TimeElapsedColumn(), TextColumn("{task.fields[phase]}"))


class ProgressDisplay:
    """A ``progress`` callback for the measuring commands, used as a context manager: the bar
    starts with the first report (nothing is drawn while suites are listed) and is closed on
    the way out, whatever happened."""

    def __init__(self, quiet: bool = False, console: Any = None) -> None:
        self.quiet = quiet
        self.console = console if console is not None else make_console(stderr=True)
        self._bar: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            if kind is None:
                self._bar.update(self._task, description="done", phase="")
            self._bar.stop()

    def __call__(self, ev: MeasureProgress) -> None:
        if self.quiet:
            return
        if ev.kind == "note":
            self.console.print(f"note: {ev.text}", markup=False, highlight=False)
            return
        bar = self._started(ev.total)
        if ev.kind == "phase":
            bar.update(self._task, description=ev.label, phase=ev.text)
            return
        bar.update(self._task, completed=ev.finished, total=ev.total)
        if not self.console.is_terminal:
            self.console.print(f"[{ev.finished}/{ev.total}] {ev.label}: {ev.status} "
                               f"({ev.duration_s:.0f} s)", markup=False, highlight=False)

    def _started(self, total: int) -> Progress:
        if self._bar is None:
            self._bar = Progress(*COLUMNS, console=self.console, transient=False)
            self._task = self._bar.add_task("measuring", total=total, phase="")
            self._bar.start()
        return self._bar
