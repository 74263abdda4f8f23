"""``compilewatch trends`` on a year of nightlies of a 100-model suite: wall time, the queries
it sends, the pages and the data it writes. Numbers in docs/performance.md ("The dashboard at a
year").

    python benchmarks/bench_db.py --db sqlite:///year.db --skip-queries   # once: ~4 minutes
    python benchmarks/trends_year.py --db sqlite:///year.db --repeats 3

Targets: ``trends`` in at most 5 s, a few queries for the whole history, no page over 200 KB
(``dashboard.PAGE_BUDGET``), each model's data in a file of its own beside its page.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

from compilewatch.bot.commands.trends import TrendsRequest, trends_command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="a database bench_db.py filled")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    queries: list[str] = []

    def count(conn, cursor, statement, *rest) -> None:  # type: ignore[no-untyped-def]
        queries.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    walls: list[float] = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="trends-year-") as tmp:
            queries.clear()
            t0 = time.perf_counter()
            report = trends_command(TrendsRequest(out=Path(tmp) / "site", db_url=args.db))
            walls.append(time.perf_counter() - t0)
            site = Path(tmp) / "site"
            pages = sorted(site.rglob("*.html"), key=lambda p: p.stat().st_size)
            models = sorted(p.stat().st_size for p in (site / "models").rglob("*.html"))
            data = list(site.rglob("*.json"))
            selects = [q for q in queries if q.lstrip().upper().startswith("SELECT")]
            print(f"wall {walls[-1]:.2f} s; {len(selects)} SELECT queries "
                  f"({len(queries)} statements); {len(pages)} pages, the largest "
                  f"{pages[-1].stat().st_size / 1024:.0f} KiB ({pages[-1].relative_to(site)}), "
                  f"a model's {models[0] / 1024:.0f}-{models[-1] / 1024:.0f} KiB; "
                  f"{len(data)} data files, "
                  f"trends.json {(site / 'trends.json').stat().st_size / 1024:.0f} KiB, "
                  f"the largest {max(p.stat().st_size for p in data) / 1024:.0f} KiB")
            print(f"  {report.summary}")
    print(f"median wall {statistics.median(walls):.2f} s over {len(walls)}")


if __name__ == "__main__":
    main()
