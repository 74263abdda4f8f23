"""Merging a group's shards into one side, and what a missing or killed shard leaves in the
comparison: its models are insufficient data, never a pass, never a gating failure alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compilewatch.bot.compare import CompareRequest, compare_command, merge_outdirs
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.post import PostRequest, render_outdir
from compilewatch.bot.render.formats import render
from compilewatch.bot.shards.merge import merge_files, merge_runs
from compilewatch.bot.shards.plan import ShardOptions, plan, record
from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import dumps_results, load_results, save_results
from compilewatch.core.schema import RunResults
from compilewatch.db.durations import ident_of
from tests.factories import model_result, run_results

MODELS = [f"m{i}" for i in range(7)]
HEAD = "b" * 40
BASE = "a" * 40


def ident(model: str) -> str:
    return ident_of("micro", model, "cpu-default-float32-auto")


def group(side: str, count: int = 3, *, slow: dict[str, float] | None = None,
          killed: int | None = None, compiled_us: float = 50.0) -> list[RunResults]:
    """A group's shards of one side; ``killed``: that shard stopped after its first model."""
    shards, by = plan([ident(m) for m in MODELS], count, None)
    runs = []
    for k in range(count):
        mine = [m for m in MODELS if ident(m) in shards[k]]
        if k == killed:
            mine = mine[:1]
        results = [model_result(m, seed=i, compiled_us=compiled_us) for i, m in enumerate(mine)]
        run = run_results(results, commit=HEAD if side == "head" else BASE,
                          run_id=f"{side}-shard-{k}-0000")
        run = run.model_copy(update={
            "settings": run.settings.model_copy(update={"side": side, "trigger": "pr"}),
            "finished_at": None if k == killed else run.finished_at})
        rec = record(ShardOptions(index=k, count=count, group="gh-9-1"), "gh-9-1", shards, by,
                     run_id=run.run_id, wall_s=12.5 + k, models=len(results),
                     finished=k != killed)
        runs.append(run.model_copy(update={"shards": rec}))
    return runs


def test_all_shards_merge_into_the_whole_side() -> None:
    merged = merge_runs(list(reversed(group("head"))))
    assert sorted(r.model for r in merged.results) == MODELS
    assert merged.shards is not None and merged.shards.index is None
    assert [r.state for r in merged.shards.runs] == ["finished"] * 3
    assert merged.finished_at is not None
    c = compare(merge_runs(group("base")), merged)
    assert c.insufficient == [] and c.headline.insufficient == 0 and len(c.rows) == 7


def test_a_missing_shard_is_insufficient_data_not_a_pass_nor_a_gate() -> None:
    base = merge_runs(group("base"))
    head_shards = group("head", compiled_us=500.0)  # every head model regressed 10x ...
    head = merge_runs([head_shards[0], head_shards[2]])  # ... and shard 2 never reported
    assert [r.state for r in head.shards.runs] == ["finished", "missing", "finished"]
    assert head.finished_at is None
    c = compare(base, head)
    lost = {m.model for m in c.insufficient}
    assert lost == {m for m in MODELS if ident(m) in base.shards.plan[1]}
    assert all(m.reason == "head: shard 2/3 never reported" for m in c.insufficient)
    assert not c.removed and not c.added  # not "removed": the model was never asked about
    assert c.headline.insufficient == len(lost)
    # the shards that did report still gate; the lost ones never do on their own
    assert {r.model for r in c.rows} == set(MODELS) - lost
    md = render(c, "markdown")
    assert "2 insufficient data" in md and "### Insufficient data (2)" in md
    assert md.count("never reported") == 3  # the note, and each model's reason
    assert any(n.startswith("head: shard 2/3 of group gh-9-1 never reported") for n in c.notes)
    assert "| head | 2/3 | missing | — |" in md
    assert "| base | 1/3 | finished |" in md


def test_nothing_gates_when_the_only_change_is_a_lost_shard() -> None:
    base = merge_runs(group("base"))
    head = merge_runs(group("head")[:2])
    c = compare(base, head)
    assert not c.gating_regression and c.headline.insufficient > 0


def test_a_killed_shard_keeps_its_finished_models() -> None:
    shards = group("head", killed=1)
    merged = merge_runs(shards)
    assert merged.shards.runs[1].state == "unfinished"
    kept = {r.model for r in shards[1].results}
    c = compare(merge_runs(group("base")), merged)
    assert kept <= {r.model for r in c.rows}
    assert {m.model for m in c.insufficient} == {
        m for m in MODELS if ident(m) in merged.shards.plan[1]} - kept
    assert all("did not finish" in m.reason for m in c.insufficient)


def test_shards_of_different_groups_or_plans_are_refused() -> None:
    a, b, _ = group("head")
    other = b.model_copy(update={"shards": b.shards.model_copy(update={"group": "gh-10-1"})})
    with pytest.raises(ResultsFileError, match="disagree on the group"):
        merge_runs([a, other])
    with pytest.raises(ResultsFileError, match="given twice"):
        merge_runs([a, a.model_copy(update={"run_id": "another-run-id"})])
    moved = b.model_copy(update={"shards": b.shards.model_copy(update={"plan": [[], [], []]})})
    with pytest.raises(ResultsFileError, match="disagree on the plan"):
        merge_runs([a, moved])
    with pytest.raises(ResultsFileError, match="not a shard"):
        merge_runs([run_results()])
    base = group("base")[0]
    with pytest.raises(ResultsFileError, match="disagree on the side"):
        merge_runs([a, base.model_copy(update={"shards": b.shards})])


def test_merge_and_compare_take_the_files(tmp_path: Path) -> None:
    paths = {}
    for side in ("base", "head"):
        paths[side] = []
        for k, run in enumerate(group(side)[:2 if side == "head" else 3]):
            paths[side].append(tmp_path / f"{side}{k}.json")
            save_results(run, paths[side][-1])
    merged = merge_files(paths["head"], tmp_path / "head.json")
    assert len(merged.results) == sum(len(group("head")[k].results) for k in (0, 1))
    comparison, text = compare_command(CompareRequest(base=",".join(map(str, paths["base"])),
                                                      head=str(tmp_path / "head.json"),
                                                      repo=tmp_path))
    assert comparison.headline.insufficient > 0 and "Insufficient data" in text


def _outdirs(tmp: Path, count: int = 3, lost: int | None = None) -> list[Path]:
    dirs = []
    for k, (b, h) in enumerate(zip(group("base", count), group("head", count), strict=True)):
        if k == lost:
            continue
        d = tmp / f"shard-{k + 1}"
        d.mkdir()
        (d / "base.json").write_text(dumps_results(b))
        (d / "head.json").write_text(dumps_results(h))
        dirs.append(d)
    return dirs


def test_post_merges_the_shards_output_directories(tmp_path: Path) -> None:
    dirs = _outdirs(tmp_path, lost=2)
    base, head, rendered = render_outdir(PostRequest(dirs, repo="acme/models", pr=3, sha=HEAD))
    assert head.shards.runs[2].state == "missing"
    assert "insufficient data" in rendered.body and not rendered.gating_regression
    c = merge_outdirs(dirs, tmp_path / "merged", tmp_path)
    assert c.headline.insufficient == len(base.shards.plan[2])
    assert sorted(p.name for p in (tmp_path / "merged").iterdir()) == [
        "base.json", "comment.md", "comparison.json", "head.json", "report.html"]


def test_a_hostile_shards_record_is_refused(tmp_path: Path) -> None:
    """The record crosses from the untrusted job like the rest of the file."""
    from compilewatch.core.results_file import load_results

    run = group("head")[0]
    data = run.model_dump(mode="json")
    for bad, needle in [({"index": 5}, "not below count"), ({"plan": [[]]}, "plan holds 1"),
                        ({"group": "x y"}, "group"), ({"count": 10_000}, "count"),
                        ({"plan": [["../../etc"], [], []]}, "plan")]:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({**data, "shards": {**data["shards"], **bad}}))
        with pytest.raises(ResultsFileError, match=needle):
            load_results(path)


def test_the_merge_command(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from compilewatch.bot.cli import main

    files = []
    for k, run in enumerate(group("head")[:2]):
        files.append(str(tmp_path / f"h{k}.json"))
        save_results(run, files[-1])
    out = tmp_path / "head.json"
    result = CliRunner().invoke(main, ["merge", *files, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "shard 3/3: missing" in result.output
    assert "from 2 of 3 finished shard(s)" in result.output
    assert load_results(out).shards.runs[2].state == "missing"
    both = CliRunner().invoke(main, ["merge", files[0], str(tmp_path), "--out", str(out)])
    assert both.exit_code == 2 and "not both" in both.output
