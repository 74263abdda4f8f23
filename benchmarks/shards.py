"""Scale-out benchmark: one synthetic suite sharded over N local processes, one Postgres.

Every shard is a process of its own, as a matrix job is a runner of its own: it computes the
group's plan alone from the durations stored in Postgres (``bot/shards/plan.py``, through the
same ``model_durations`` query the commands use), "measures" its models by sleeping each
model's known duration (with a few percent of noise, as a real night differs from history),
writes its results file after every model, as ``run --shard`` checkpoints, and ingests it into
the one Postgres at the end. No compiler runs: what is measured is the balance of the plan, the
ingest and the merge, with durations known exactly. The suite is skewed like a real one (a
lognormal: a few models take many times the median).

    python benchmarks/shards.py                        # all parts, local Postgres
    python benchmarks/shards.py --total-s 24           # quicker (each part scales with it)
    python benchmarks/shards.py --from-db postgresql://ci@db/compilewatch --suite hf

``--from-db URL`` measures nothing: it reads the durations a real run stored and prints, for
N = 2, 4 and 8, the slowest shard over the ideal (total / N) of the duration-balanced plan
beside PyTorch's count-based contiguous split (``get_benchmark_indices`` in
benchmarks/dynamo/common.py). Not part of the test suite; the numbers are in docs/scale.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.shards.merge import merge_runs
from compilewatch.bot.shards.plan import ShardOptions, contiguous, loads, plan, record
from compilewatch.core.results_file import load_results, save_results
from compilewatch.core.schema import (
    SCHEMA_VERSION,
    Config,
    Environment,
    GitInfo,
    ModelResult,
    RunResults,
    RunSettings,
    Status,
)
from compilewatch.db import connect, ingest, ingest_files, model_durations
from compilewatch.db.durations import ident_of
from compilewatch.db.engine import create, resolve_url

sys.path.insert(0, str(Path(__file__).parent))
from _postgres import scratch_postgres

SUITE = "synthetic"
SLUG = Config().slug
ENV = Environment(fingerprint="bench", python="3.12", platform="linux", machine="x86_64",
                  torch="2.13.0")
NOISE = 0.05  # a night's duration differs from the stored median by up to this much


def durations(models: int, total_s: float, seed: int) -> dict[str, float]:
    """The suite: ``models`` models whose durations are lognormal (sigma 1), ``total_s`` in all."""
    rng = random.Random(seed)
    raw = [rng.lognormvariate(0.0, 1.0) for _ in range(models)]
    scale = total_s / sum(raw)
    return {ident_of(SUITE, f"m{i:03d}", SLUG): round(d * scale, 3) for i, d in enumerate(raw)}


def tonight(suite: dict[str, float], seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    return {k: v * (1 + rng.uniform(-NOISE, NOISE)) for k, v in suite.items()}


def _result(ident: str, seconds: float) -> ModelResult:
    suite, model, _ = ident.split("/")
    return ModelResult(model=model, suite=suite, config=Config(), status=Status.PASS,
                       duration_s=seconds)


def _run(results: list[ModelResult], *, commit: str, finished: bool = True,
         run_id: str | None = None) -> RunResults:
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    return RunResults(schema_version=SCHEMA_VERSION, run_id=run_id or uuid.uuid4().hex,
                      created_at=now, finished_at=now if finished else None, environment=ENV,
                      git=GitInfo(commit=commit),
                      settings=RunSettings(suites=[SUITE], timeout_s=60, rounds=1, block_ms=1,
                                           trigger="nightly"),
                      results=results)


def shard_process(url: str, group: str, index: int, count: int, actual: dict[str, float],
                  out: str, commit: str, sleep: bool = True) -> None:
    """One shard: plan from the database, measure (sleep) its part, checkpoint, ingest."""
    started = time.monotonic()
    with connect(url) as db:
        stored = model_durations(db, exclude_group=group)
    shards, by = plan(actual, count, stored)
    opts = ShardOptions(index=index, count=count, group=group)
    done: list[ModelResult] = []
    run_id = uuid.uuid4().hex

    def write(finished: bool) -> RunResults:
        rec = record(opts, group, shards, by, run_id=run_id,
                     wall_s=round(time.monotonic() - started, 3), models=len(done),
                     finished=finished)
        run = _run(list(done), commit=commit, finished=finished, run_id=run_id)
        run = run.model_copy(update={"shards": rec})
        save_results(run, out)
        return run

    write(False)
    for ident in shards[index]:
        if sleep:
            time.sleep(actual[ident])
        done.append(_result(ident, actual[ident]))
        write(False)
    run = write(True)
    with connect(url) as db:
        ingest(db, run)


def _spawn(url: str, group: str, count: int, actual: dict[str, float], folder: Path,
           commit: str, sleep: bool = True) -> list[multiprocessing.process.BaseProcess]:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=shard_process, args=(url, group, k, count, actual,
                                                      str(folder / f"shard-{k + 1}.json"),
                                                      commit, sleep))
             for k in range(count)]
    for p in procs:
        p.start()
    return procs


def seed_history(url: str, suite: dict[str, float], nights: int = 3) -> None:
    """Nights the plan learns from: the suite's durations, each night a little off."""
    with connect(url) as db:
        for night in range(nights):
            night_d = tonight(suite, 1000 + night)
            ingest(db, _run([_result(i, d) for i, d in sorted(night_d.items())],
                            commit=f"{night:040x}"))


def balance(url: str, suite: dict[str, float], count: int, folder: Path) -> dict[str, Any]:
    """N shards of tonight's suite: the slowest shard's wall over the ideal, total / N."""
    actual = tonight(suite, 7 + count)
    folder.mkdir(parents=True, exist_ok=True)
    group = f"bench-balance-{count}"
    t0 = time.monotonic()
    procs = _spawn(url, group, count, actual, folder, "b" * 40)
    for p in procs:
        p.join()
    wall = time.monotonic() - t0
    runs = [load_results(folder / f"shard-{k + 1}.json") for k in range(count)]
    walls = [r.shards.runs[0].wall_s or 0.0 for r in runs if r.shards]
    ideal = sum(actual.values()) / count
    cut = contiguous(sorted(actual), count)
    return {"shards": count, "ideal_s": round(ideal, 2), "slowest_s": round(max(walls), 2),
            "slowest_over_ideal": round(max(walls) / ideal, 3),
            "planned_over_ideal": round(max(loads(runs[0].shards.plan, actual)) / ideal, 3),
            "contiguous_over_ideal": round(max(loads(cut, actual)) / ideal, 3),
            "balanced_by": runs[0].shards.balanced_by, "wall_s": round(wall, 2),
            "exit_codes": [p.exitcode for p in procs]}


def _count(url: str, sql: str) -> int:
    with create(resolve_url(url)) as db, db.read() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def ingest_at_once(url: str, suite: dict[str, float], count: int, folder: Path
                   ) -> dict[str, Any]:
    """``count`` shards ingesting into one Postgres at once, then each run again."""
    folder.mkdir(parents=True, exist_ok=True)
    group = f"bench-ingest-{count}"
    runs_before = _count(url, "SELECT count(*) FROM runs")
    rows_before = _count(url, "SELECT count(*) FROM model_results")
    procs = _spawn(url, group, count, suite, folder, "c" * 40, sleep=False)
    for p in procs:
        p.join()
    rows = _count(url, "SELECT count(*) FROM model_results") - rows_before
    distinct = _count(url, "SELECT count(*) FROM (SELECT DISTINCT suite, model, config_slug, "
                           "run_pk FROM model_results) AS d") - rows_before
    runs = _count(url, "SELECT count(*) FROM runs") - runs_before
    # every shard ingests its file again (a re-run job): nothing is added
    again = []
    for k in range(count):
        with connect(url) as db:
            again.append(ingest_files(db, [folder / f"shard-{k + 1}.json"])[0].stored)
    rows_after = _count(url, "SELECT count(*) FROM model_results") - rows_before
    return {"shards": count, "expected_rows": len(suite), "rows": rows,
            "lost": len(suite) - distinct, "duplicated": rows - distinct, "runs": runs,
            "rerun_stored": sum(again), "rows_after_rerun": rows_after,
            "exit_codes": [p.exitcode for p in procs]}


def killed(url: str, suite: dict[str, float], count: int, victim: int, folder: Path
           ) -> dict[str, Any]:
    """One shard killed halfway through its part: what the merged comparison says."""
    actual = tonight(suite, 99)
    folder.mkdir(parents=True, exist_ok=True)
    base_dir, head_dir = folder / "base", folder / "head"
    base_dir.mkdir(exist_ok=True)
    head_dir.mkdir(exist_ok=True)
    for p in _spawn(url, "bench-killed-base", count, actual, base_dir, "d" * 40, sleep=False):
        p.join()
    procs = _spawn(url, "bench-killed-head", count, actual, head_dir, "e" * 40)
    plan_of = None
    while plan_of is None:  # the victim's plan, from its first checkpoint
        with contextlib.suppress(Exception):
            plan_of = load_results(head_dir / f"shard-{victim + 1}.json").shards
        time.sleep(0.05)
    half = sum(actual[i] for i in plan_of.plan[victim]) / 2
    time.sleep(half)
    os.kill(procs[victim].pid, signal.SIGKILL)  # type: ignore[arg-type]
    for p in procs:
        p.join()
    base = merge_runs([load_results(base_dir / f"shard-{k + 1}.json") for k in range(count)])
    head = merge_runs([load_results(head_dir / f"shard-{k + 1}.json") for k in range(count)])
    c = compare(base, head)
    gone = merge_runs([load_results(head_dir / f"shard-{k + 1}.json") for k in range(count)
                       if k != victim])
    c_gone = compare(base, gone)
    return {"shards": count, "victim": victim + 1,
            "victim_planned": len(plan_of.plan[victim]),
            "victim_kept": len(load_results(head_dir / f"shard-{victim + 1}.json").results),
            "states": [r.state for r in head.shards.runs],
            "insufficient": c.headline.insufficient, "compared": len(c.rows),
            "gating": c.gating_regression, "added_or_removed": len(c.added) + len(c.removed),
            "missing_shard_insufficient": c_gone.headline.insufficient,
            "exit_codes": [p.exitcode for p in procs]}


def from_db(url: str, suite: str | None, counts: tuple[int, ...] = (2, 4, 8)) -> str:
    """The stored durations' balance: the duration-balanced plan beside PyTorch's contiguous
    split by count, per suite (PyTorch shards each suite on its own) and over all."""
    with connect(url, must_exist=True) as db:
        stored = model_durations(db)
    by_suite: dict[str, dict[str, float]] = {}
    for ident, seconds in stored.items():
        by_suite.setdefault(ident.split("/")[0], {})[ident] = seconds
    chosen = {suite: by_suite.get(suite, {})} if suite else {**by_suite, "all": stored}
    lines = ["| suite | jobs | total | N | ideal | balanced (LPT) | contiguous by count |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, ds in chosen.items():
        if not ds:
            continue
        total = sum(ds.values())
        for n in counts:
            ideal = total / n
            lpt = max(loads(plan(ds, n, ds)[0], ds)) / ideal
            cut = max(loads(contiguous(sorted(ds), n), ds)) / ideal
            lines.append(f"| {name} | {len(ds)} | {total:.0f} s | {n} | {ideal:.0f} s | "
                         f"{lpt:.3f}x | {cut:.3f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-db", default=None, metavar="URL",
                        help="Print the balance of the stored durations' splits; measure nothing.")
    parser.add_argument("--suite", default=None, help="With --from-db: only this suite.")
    parser.add_argument("--models", type=int, default=64)
    parser.add_argument("--total-s", type=float, default=48.0,
                        help="The synthetic suite's total duration (seconds of sleep).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="Keep the shards' files here.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.from_db:
        print(from_db(args.from_db, args.suite))
        return 0
    suite = durations(args.models, args.total_s, args.seed)
    report: dict[str, Any] = {"models": args.models, "total_s": args.total_s,
                              "longest_s": max(suite.values()),
                              "median_s": sorted(suite.values())[len(suite) // 2]}
    import tempfile

    with scratch_postgres("cw_bench_shards") as url, tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp)
        report["count_split_without_history"] = balance(url, suite, 4, folder / "nohistory")
        seed_history(url, suite)
        report["balance"] = [balance(url, suite, n, folder / f"balance-{n}") for n in (4, 8)]
        report["ingest"] = ingest_at_once(url, suite, 16, folder / "ingest-16")
        report["killed"] = killed(url, suite, 4, 1, folder / "killed")
    print(json.dumps(report, indent=1) if args.json else _table(report))
    return 0


def _table(r: dict[str, Any]) -> str:
    out = [f"synthetic suite: {r['models']} models, {r['total_s']:.0f} s in all, longest "
           f"{r['longest_s']:.1f} s, median {r['median_s']:.2f} s"]
    for b in [r["count_split_without_history"], *r["balance"]]:
        out.append(f"{b['shards']} shards ({b['balanced_by']}): slowest {b['slowest_s']} s, "
                   f"ideal {b['ideal_s']} s: {b['slowest_over_ideal']}x (planned "
                   f"{b['planned_over_ideal']}x; contiguous by count "
                   f"{b['contiguous_over_ideal']}x)")
    i = r["ingest"]
    out.append(f"{i['shards']} shards ingesting at once: {i['rows']} rows of "
               f"{i['expected_rows']}, {i['lost']} lost, {i['duplicated']} duplicated, "
               f"{i['runs']} runs; re-run stored {i['rerun_stored']}, rows after "
               f"{i['rows_after_rerun']}")
    k = r["killed"]
    out.append(f"shard {k['victim']}/{k['shards']} killed halfway: kept {k['victim_kept']} of "
               f"{k['victim_planned']} models; states {k['states']}; {k['insufficient']} "
               f"insufficient data, {k['compared']} compared, gating {k['gating']}, "
               f"{k['added_or_removed']} added or removed; with the shard missing "
               f"altogether: {k['missing_shard_insufficient']} insufficient data")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
