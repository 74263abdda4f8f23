"""The checked-in baseline of the repository under test: the expected accuracy outcome, graph
breaks and recompiles per model, like PyTorch's ``ci_expected_accuracy/*.csv`` plus recompiles.

CSV, one line per (suite, model, config), sorted: it diffs line by line in review, a maintainer
edits it by hand, and PyTorch engineers already know the shape. An empty cell means "no
expectation" (compare falls back to the base run); ``*`` as config matches every config.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.core.errors import UsageError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import Category, ModelResult, RunResults, Status

COLUMNS = ("suite", "model", "config", "accuracy", "graph_breaks", "recompiles")
OUTCOMES = ("pass", "fail_accuracy", "fail_to_run", "eager_fail", "skip")
_EAGER = {Category.EAGER_ERROR, Category.EAGER_NONDETERMINISTIC, Category.BUILD_ERROR}

Ident = tuple[str, str, str]


def outcome(result: ModelResult) -> str:
    """The baseline's word for a result's outcome (the words of PyTorch's expected CSVs)."""
    if result.status is Status.SKIP:
        return "skip"
    if result.category in _EAGER:
        return "eager_fail"
    if result.status is Status.PASS:
        failed = result.accuracy is not None and result.accuracy.passed is False
        return "fail_accuracy" if failed else "pass"
    if result.status is Status.FAIL:
        return "fail_accuracy"
    return "fail_to_run"


@dataclass(frozen=True)
class Expected:
    accuracy: str | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None


@dataclass(frozen=True)
class Baseline:
    entries: dict[Ident, Expected] = field(default_factory=dict)

    def lookup(self, ident: Ident) -> Expected | None:
        suite, model, _ = ident
        return self.entries.get(ident) or self.entries.get((suite, model, "*"))


def _int_cell(value: str, where: str) -> int | None:
    if value.strip() == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{where}: {value!r} is not a whole number") from None
    if n < 0:
        raise UsageError(f"{where}: {n} is negative")
    return n


def parse_baseline(text: str, source: str = "<baseline>") -> Baseline:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or tuple(reader.fieldnames) != COLUMNS:
        raise UsageError(f"{source}: header must be {','.join(COLUMNS)}")
    entries: dict[Ident, Expected] = {}
    for line, row in enumerate(reader, start=2):
        where = f"{source}:{line}"
        if None in row or any(v is None for v in row.values()):
            raise UsageError(f"{where}: expected {len(COLUMNS)} cells")
        accuracy = row["accuracy"].strip() or None
        if accuracy is not None and accuracy not in OUTCOMES:
            raise UsageError(f"{where}: accuracy {accuracy!r} is not one of {', '.join(OUTCOMES)}")
        ident = (row["suite"].strip(), row["model"].strip(), row["config"].strip() or "*")
        if ident in entries:
            raise UsageError(f"{where}: {'/'.join(ident)} is listed twice")
        entries[ident] = Expected(accuracy, _int_cell(row["graph_breaks"], where),
                                  _int_cell(row["recompiles"], where))
    return Baseline(entries)


def load_baseline(path: str | Path) -> Baseline | None:
    """The baseline at ``path``; None when the repository has none yet."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: cannot read the baseline: {e}") from None
    return parse_baseline(text, str(p))


def format_baseline(results: RunResults) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in sorted(results.results, key=lambda r: r.ident):
        ran = r.status in (Status.PASS, Status.FAIL)
        writer.writerow([r.suite, r.model, r.config.slug, outcome(r),
                         r.break_count if ran else "", len(r.recompiles) if ran else ""])
    return buf.getvalue()


def update_baseline(results: RunResults, path: str | Path) -> int:
    """Rewrite the baseline from a run (atomically); returns the number of models written."""
    write_atomic(path, format_baseline(results))
    return len(results.results)
