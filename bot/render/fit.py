"""Fitting a terminal table to the width it is printed at.

rich squeezes a table that is too wide by folding every cell, which at 80 columns turned the
run summary into two-character columns. Instead the secondary columns go first, in the order
their ``drop`` says, until the rest fit at their natural width; what was left out is named
under the table, so nothing is dropped silently. A column of prose (``fold_to``) counts as at
most that wide: rich folds it into lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.table import Table
from rich.text import Text

Cell = str | Text  # a str is rich markup we wrote; untrusted text comes as Text


@dataclass(frozen=True)
class Column:
    header: str
    drop: int = 0  # 0: always shown; when the table is too wide, the highest goes first
    justify: Literal["left", "right"] = "right"
    fold_to: int | None = None  # prose: folds into lines, counts as at most this wide


def _width(cell: Cell) -> int:
    text = cell if isinstance(cell, Text) else Text.from_markup(cell)
    return max((len(line) for line in text.plain.splitlines()), default=0)


def _natural(column: Column, cells: Sequence[Cell]) -> int:
    wide = max([len(column.header), *(_width(c) for c in cells)])
    return min(wide, max(column.fold_to, len(column.header))) if column.fold_to else wide


def fitting(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int) -> list[int]:
    """The indexes of the columns to draw at ``width`` (a box-drawn table: each column takes
    two cells of padding and one rule)."""
    natural = [_natural(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    kept = list(range(len(columns)))
    by_drop = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: (
        -columns[i].drop, -i))
    for i in by_drop:
        if sum(natural[k] + 3 for k in kept) + 1 <= width:
            break
        kept.remove(i)
    return kept


def fitted_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]],
                 width: int) -> tuple[Table, list[str]]:
    """The table of the columns that fit, and the headers of those left out."""
    kept = fitting(columns, rows, width)
    table = Table(title=title)
    for i in kept:
        c = columns[i]
        table.add_column(c.header, justify=c.justify, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table, [c.header for i, c in enumerate(columns) if i not in kept]


def left_out(headers: list[str], width: int, where: str) -> Text | None:
    """The line that names the columns a narrow terminal did not show."""
    if not headers:
        return None
    return Text(f"not shown at {width} columns: {', '.join(headers)} ({where})", style="dim")
