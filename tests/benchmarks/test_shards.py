"""benchmarks/shards.py --from-db: the balance of a stored run's durations, both splits."""

from __future__ import annotations

from pathlib import Path

from compilewatch.db import connect, ingest
from tests.benchmark_scripts import load
from tests.factories import model_result, run_results


def test_from_db_prints_both_splits_per_suite(tmp_path: Path) -> None:
    shards = load("shards")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    results = [model_result(f"m{i}", suite=suite).model_copy(update={"duration_s": float(d)})
               for suite, ds in (("hf", [100, 1, 1, 1, 1, 1, 1, 1]), ("timm", [5, 5, 5, 5]))
               for i, d in enumerate(ds)]
    with connect(url) as db:
        ingest(db, run_results(results))
    text = shards.from_db(url, None)
    lines = {tuple(c.strip() for c in ln.strip("|").split("|")) for ln in text.splitlines()[2:]}
    # hf, N=2: the 100 s model alone on one shard (1.869x), or with the next three (1.925x)
    assert ("hf", "8", "107 s", "2", "54 s", "1.869x", "1.925x") in lines
    assert ("timm", "4", "20 s", "4", "5 s", "1.000x", "1.000x") in lines
    assert {ln[0] for ln in lines} == {"hf", "timm", "all"}
    assert {ln[3] for ln in lines} == {"2", "4", "8"}
    assert shards.from_db(url, "timm").count("| timm |") == 3
