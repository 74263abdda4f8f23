"""Every table of an HTML page, as header texts and rows of cell texts, to check that each row
has exactly one cell per header (a cell under the wrong header is a wrong number)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Table:
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    def column(self, header: str) -> list[str]:
        """The cells under ``header`` (cells align with headers: ``check_tables`` first)."""
        i = self.headers.index(header)
        return [row[i] for row in self.rows]

    def row(self, first_cell_contains: str) -> dict[str, str]:
        """The first row whose first cell contains the text, as {header: cell}."""
        row = next(r for r in self.rows if first_cell_contains in r[0])
        return dict(zip(self.headers, row, strict=True))


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self._stack: list[Table] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._span = 1
        self._in_head = False
        self._header_row = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._stack.append(Table())
            self.tables.append(self._stack[-1])
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._row, self._header_row = [], self._in_head
        elif tag in ("td", "th") and self._row is not None:
            self._cell, self._span = [], int(dict(attrs).get("colspan") or 1)
            if tag == "th" and not self._row:
                self._header_row = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join("".join(self._cell).split())
            self._row.extend([text] * self._span)
            self._cell = None
        elif tag == "tr" and self._row is not None and self._stack:
            table = self._stack[-1]
            if self._header_row and not table.headers:
                table.headers = self._row
            else:
                table.rows.append(self._row)
            self._row = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "table" and self._stack:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> list[Table]:
    parser = _Parser()
    parser.feed(html)
    return parser.tables


def check_tables(html: str) -> list[Table]:
    """Every table has headers and every row as many cells as headers; returns the tables."""
    found = tables(html)
    for n, table in enumerate(found):
        assert table.headers, f"table {n} has no header row"
        for row in table.rows:
            assert len(row) == len(table.headers), (
                f"table {n}: {len(table.headers)} headers {table.headers} but "
                f"{len(row)} cells {row}")
    return found


def _md_cells(line: str) -> list[str]:
    """Cells of a markdown table line; ``\\|`` inside a cell is text, not a separator."""
    cells, cur, i = [], "", 0
    body = line.strip()[1:]
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cur += body[i:i + 2]
            i += 2
            continue
        if body[i] == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += body[i]
        i += 1
    return cells


def check_markdown_tables(md: str) -> list[Table]:
    """Every markdown table (a header line, a ``---`` line, rows): one cell per header."""
    found: list[Table] = []
    lines = md.splitlines()
    for i, line in enumerate(lines[:-1]):
        sep = lines[i + 1].strip()
        if line.startswith("|") and sep.startswith("|") and set(sep) <= set("|- :"):
            table = Table(headers=_md_cells(line))
            assert len(_md_cells(sep)) == len(table.headers), f"separator of {table.headers}"
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                table.rows.append(_md_cells(row))
                assert len(table.rows[-1]) == len(table.headers), (
                    f"{len(table.headers)} headers {table.headers} but {len(table.rows[-1])} "
                    f"cells: {row}")
            found.append(table)
    return found
