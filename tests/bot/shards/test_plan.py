"""The shard plan: deterministic, balanced by stored durations (LPT), even by count without
them, and the group id every shard of one workflow run shares."""

from __future__ import annotations

import random

import pytest

from compilewatch.bot.shards.plan import (
    ShardOptions,
    contiguous,
    default_group,
    loads,
    parse_shard,
    plan,
)
from compilewatch.core.errors import UsageError


def skewed(n: int = 60, seed: int = 3) -> dict[str, float]:
    """Durations with a long tail, as a real suite's (a few models take minutes)."""
    rng = random.Random(seed)
    return {f"s/m{i:03d}/cpu": round(rng.lognormvariate(3.0, 1.0), 2) for i in range(n)}


def test_parse_shard() -> None:
    assert parse_shard("2/4") == ShardOptions(index=1, count=4)
    assert parse_shard("1/1", "gh-7-1") == ShardOptions(index=0, count=1, group="gh-7-1")
    assert not parse_shard(None).on
    for bad in ("0/4", "5/4", "4", "a/b", "1/0"):
        with pytest.raises(UsageError, match="--shard"):
            parse_shard(bad)
    with pytest.raises(UsageError, match="--group"):
        parse_shard("1/2", "no spaces")
    with pytest.raises(UsageError, match="needs --shard"):
        parse_shard(None, "g")
    # unsharded, the files still give the loop its order (longest first)
    assert parse_shard(None, None, ("results.json",)) == ShardOptions(durations=("results.json",))
    assert not parse_shard(None, None, ("results.json",)).on


def test_the_plan_is_the_same_in_every_shard_whatever_the_order() -> None:
    durations = skewed()
    idents = list(durations)
    first = plan(idents, 4, durations)
    for seed in range(5):
        random.Random(seed).shuffle(idents)
        assert plan(idents, 4, dict(reversed(list(durations.items())))) == first
    shards, by = first
    assert by == "duration"
    assert sorted(i for s in shards for i in s) == sorted(durations)  # each job once


def test_ties_are_broken_by_name() -> None:
    durations = {f"s/m{i}/cpu": 1.0 for i in range(6)}
    shards, _ = plan(durations, 3, durations)
    assert shards == [["s/m0/cpu", "s/m3/cpu"], ["s/m1/cpu", "s/m4/cpu"],
                      ["s/m2/cpu", "s/m5/cpu"]]


@pytest.mark.parametrize("n", [4, 8])
def test_longest_first_keeps_the_slowest_shard_within_a_quarter_of_ideal(n: int) -> None:
    durations = skewed(120)
    shards, _ = plan(durations, n, durations)
    ideal = sum(durations.values()) / n
    assert max(loads(shards, durations)) <= 1.25 * ideal
    # the count-based contiguous split of PyTorch's harness does worse on the same suite
    cut = contiguous(sorted(durations), n)
    assert max(loads(cut, durations)) > max(loads(shards, durations))


def test_without_history_the_split_is_even_by_count() -> None:
    idents = [f"s/m{i}/cpu" for i in range(10)]
    shards, by = plan(idents, 3, {})
    assert by == "count" and [len(s) for s in shards] == [4, 3, 3]


def test_a_job_without_history_costs_the_median() -> None:
    durations = {"s/a/cpu": 10.0, "s/b/cpu": 10.0, "s/c/cpu": 1.0}
    shards, by = plan([*durations, "s/new/cpu"], 2, durations)
    assert by == "duration"
    # the new job is taken as 10 s (the median), so it goes beside one of the two long ones
    assert shards == [["s/a/cpu", "s/new/cpu"], ["s/b/cpu", "s/c/cpu"]]


def test_more_shards_than_jobs_leaves_some_empty() -> None:
    shards, _ = plan(["s/a/cpu"], 3, {})
    assert shards == [["s/a/cpu"], [], []]


def test_contiguous_is_pytorchs_split() -> None:
    assert contiguous(list("abcdefg"), 3) == [["a", "b"], ["c", "d"], ["e", "f", "g"]]


def test_the_group_is_the_workflow_run() -> None:
    assert default_group({"GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "2"}) == "gh-123-2"
    local = default_group({}, "abc", "def", "4")
    assert local.startswith("local-") and local == default_group({}, "abc", "def", "4")
    assert local != default_group({}, "abc", "def", "8")


def test_a_shard_keeps_its_jobs_and_stamps_its_results(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compilewatch.bot.shards.select import (
        ShardPlan,
        empty_shard,
        stamped,
        stored_durations,
    )
    from tests.factories import run_results

    assert stored_durations(f"sqlite:///{tmp_path / 'none.db'}", "g") == {}  # nothing yet
    assert not (tmp_path / "none.db").exists()  # and nothing created
    shards, by = plan(["micro/a/cpu", "micro/b/cpu"], 3, {})
    sp = ShardPlan(ShardOptions(index=2, count=3, group="g"), "g", shards, by)
    run = run_results([])
    assert stamped(None, run) is run
    rec = stamped(sp, run).shards
    assert rec is not None and (rec.index, rec.count, rec.group) == (2, 3, "g")
    assert rec.runs[0].state == "finished" and rec.runs[0].runner
    assert empty_shard(stamped(sp, run))  # more shards than jobs: the third measures nothing


def test_a_runner_without_a_database_plans_from_a_results_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compilewatch.bot.shards.select import file_durations
    from compilewatch.core.results_file import save_results
    from tests.factories import model_result, run_results

    run = run_results([model_result(m).model_copy(update={"duration_s": d})
                       for m, d in (("a", 30.0), ("b", 10.0), ("c", 10.0), ("d", 10.0))])
    save_results(run, tmp_path / "nightly.json")
    durations = file_durations([str(tmp_path / "nightly.json")])
    slug = run.results[0].config.slug
    assert durations[f"micro/a/{slug}"] == 30.0
    shards, by = plan(durations, 2, durations)
    assert by == "duration" and shards[0] == [f"micro/a/{slug}"]  # 30 s against 3 x 10 s
