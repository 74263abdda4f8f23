"""Merging a group's shards into one side, and what a missing or killed shard leaves in the
comparison: its models are insufficient data, never a pass, never a gating failure alone."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from compilewatch.bot.commands.compare import CompareRequest, compare_command, merge_outdirs
from compilewatch.bot.commands.post import PostRequest, render_outdir
from compilewatch.bot.judge.verdicts import compare
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


def _merge_cli(*args: str) -> Any:
    from click.testing import CliRunner

    from compilewatch.bot.cli import main

    return CliRunner().invoke(main, ["merge", *args])


def _refused(result: Any, needle: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert needle in result.stderr, result.stderr


def test_a_link_in_one_shard_and_a_file_through_it_in_another_write_nothing_outside(
        tmp_path: Path) -> None:
    """Shard 1's diagnostics/x links to a folder outside; shard 2's diagnostics/x/planted.sh
    would be written through it by a copy that keeps links and merges trees."""
    one, two, three = _outdirs(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (one / "diagnostics").mkdir()
    (one / "diagnostics" / "x").symlink_to(outside)
    (two / "diagnostics" / "x").mkdir(parents=True)
    (two / "diagnostics" / "x" / "planted.sh").write_text("echo owned\n")
    out = tmp_path / "merged"
    result = _merge_cli(str(one), str(two), str(three), "--out", str(out))
    _refused(result, "diagnostics: x is a symbolic link")
    assert list(outside.iterdir()) == [] and not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".merged")] == []


@pytest.mark.parametrize("plant", ["a link to a file", "the folder a link", "a hard link",
                                   "a FIFO"])
def test_a_shard_folder_holds_only_plain_files_and_folders(tmp_path: Path, plant: str) -> None:
    one, two, three = _outdirs(tmp_path)
    kept = one / "diagnostics"
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    needle = {"a link to a file": "passwd.html is a symbolic link",
              "the folder a link": "diagnostics is a symbolic link",
              "a hard link": "has 2 names (a hard link)",
              "a FIFO": "is not a plain file or folder"}[plant]
    if plant == "the folder a link":
        kept.symlink_to(tmp_path)
    else:
        kept.mkdir()
        if plant == "a link to a file":
            (kept / "passwd.html").symlink_to("/etc/passwd")
        elif plant == "a hard link":
            os.link(secret, kept / "copy.txt")
        else:
            os.mkfifo(kept / "pipe")
    out = tmp_path / "merged"
    result = _merge_cli(str(one), str(two), str(three), "--out", str(out))
    _refused(result, needle)
    assert not out.exists()


def test_diagnostics_of_each_shard_are_copied_as_plain_files(tmp_path: Path) -> None:
    one, two, three = _outdirs(tmp_path)
    for k, d in enumerate((one, two), start=1):
        (d / "diagnostics" / "head" / f"m{k}").mkdir(parents=True)
        (d / "diagnostics" / "head" / f"m{k}" / "cold.trace.gz").write_bytes(b"trace %d" % k)
    out = tmp_path / "merged"
    result = _merge_cli(str(one), str(two), str(three), "--out", str(out))
    assert result.exit_code == 0, result.output
    got = sorted(str(p.relative_to(out)) for p in (out / "diagnostics").rglob("*")
                 if p.is_file())
    assert got == ["diagnostics/head/m1/cold.trace.gz", "diagnostics/head/m2/cold.trace.gz"]
    assert (out / "diagnostics" / "head" / "m2" / "cold.trace.gz").read_bytes() == b"trace 2"
    # the same file from two shards would overwrite one with the other: refused
    (two / "diagnostics" / "head" / "m1").mkdir()
    (two / "diagnostics" / "head" / "m1" / "cold.trace.gz").write_bytes(b"other")
    again = _merge_cli(str(one), str(two), str(three), "--out", str(tmp_path / "again"))
    _refused(again, "head/m1/cold.trace.gz is also in")
    assert not (tmp_path / "again").exists()


def _edited(path: Path, edit: Any) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_a_shard_reports_only_the_models_planned_for_it(tmp_path: Path) -> None:
    """Shard 1 that also reports a model of shard 2's part, or one nobody planned."""
    runs = group("head")
    stolen = next(m for m in MODELS if ident(m) in runs[1].shards.plan[1])
    for case, extra in (("another shard's", stolen), ("never planned", "m99")):
        files = []
        for k, run in enumerate(runs):
            files.append(tmp_path / f"{case}-h{k}.json")
            save_results(run, files[-1])
        _edited(files[0], lambda d, extra=extra: d["results"].append(
            {**d["results"][0], "model": extra}))
        result = _merge_cli(*map(str, files), "--out", str(tmp_path / f"{case}.json"))
        _refused(result, "not in shard 1/3")
        assert repr(ident(extra)) in result.stderr
        assert not (tmp_path / f"{case}.json").exists()
        with pytest.raises(ResultsFileError, match="a shard reports only the models planned"):
            load_results(files[0])  # every reader refuses it, not merge alone
    bad = runs[0].model_copy(update={"results": [*runs[0].results, *runs[1].results[:1]]})
    with pytest.raises(ResultsFileError, match="not in shard 1/3"):
        merge_runs([bad, runs[1], runs[2]])  # built in memory too


def test_base_and_head_of_different_groups_do_not_merge(tmp_path: Path) -> None:
    dirs = _outdirs(tmp_path)
    for d in dirs:  # head's shards came from another workflow run
        _edited(d / "head.json", lambda data: data["shards"].update(group="gh-10-1"))
    out = tmp_path / "merged"
    result = _merge_cli(*map(str, dirs), "--out", str(out))
    _refused(result, "base and head disagree on the group (gh-9-1 and gh-10-1)")
    assert not out.exists()
    with pytest.raises(ResultsFileError, match="disagree on the group"):
        render_outdir(PostRequest(dirs, repo="acme/models", pr=3, sha=HEAD))
    with pytest.raises(ResultsFileError, match="disagree on the group"):
        render_outdir(PostRequest(dirs[:1], repo="acme/models", pr=3, sha=HEAD))


def test_only_one_side_sharded_does_not_merge(tmp_path: Path) -> None:
    dirs = _outdirs(tmp_path, count=1)
    _edited(dirs[0] / "base.json", lambda data: data.update(shards=None))
    with pytest.raises(ResultsFileError, match="only head is sharded"):
        render_outdir(PostRequest(dirs, repo="acme/models", pr=3, sha=HEAD))


def _nightly_shards(root: Path) -> list[Path]:
    """Two nightly shard folders as the release job downloads them: results.json, and one
    artifact each under artifacts/ with its manifest (any bytes: merging never reads them)."""
    from compilewatch.compiler import artifacts as art

    runs, dirs = group("head", count=2), []
    for k, run in enumerate(runs):
        folder = root / f"nightly-shard-{k + 1}"
        (folder / "artifacts").mkdir(parents=True)
        entries = []
        for r in run.results:
            name = art.artifact_name(r.suite, r.model, r.config.slug)
            (folder / "artifacts" / name).write_bytes(b"cache of " + r.model.encode())
            entries.append(art.ArtifactEntry(
                suite=r.suite, model=r.model, config_slug=r.config.slug, file=name,
                size_bytes=len(r.model) + 9, sha256="0" * 64, verified=True))
        art.write_manifest(art.Manifest(manifest_version=1, created_at="2026-01-01T00:00:00",
                                        fingerprint="f" * 32, torch="2.13.0",
                                        artifacts=entries),
                           folder / "artifacts" / art.MANIFEST_NAME)
        save_results(run, folder / "results.json")
        dirs.append(folder)
    return dirs


def test_nightly_shards_merge_their_artifacts(tmp_path: Path) -> None:
    dirs = _nightly_shards(tmp_path)
    out = tmp_path / "nightly"
    result = _merge_cli(*map(str, dirs), "--out", str(out))
    assert result.exit_code == 0, result.output
    copied = sorted(p.name for p in (out / "artifacts").iterdir())
    assert len(copied) == len(MODELS) + 1 and "manifest.json" in copied


@pytest.mark.parametrize("plant", ["artifacts/ a link", "an artifact a link"])
def test_a_nightly_shard_folder_is_data_too(tmp_path: Path, plant: str) -> None:
    """Its artifacts are read from its own folder, never through a link to another one."""
    dirs = _nightly_shards(tmp_path / "shards")
    elsewhere = tmp_path / "elsewhere"
    if plant == "artifacts/ a link":  # another folder's artifacts, manifest and all
        (dirs[1] / "artifacts").rename(elsewhere)
        (dirs[1] / "artifacts").symlink_to(elsewhere)
        needle = "artifacts is a symbolic link"
    else:
        victim = next(p for p in (dirs[1] / "artifacts").iterdir() if p.suffix != ".json")
        elsewhere.write_bytes(b"not the shard's")
        victim.unlink()
        victim.symlink_to(elsewhere)
        needle = f"{victim.name} is a symbolic link"
    out = tmp_path / "nightly"
    result = _merge_cli(*map(str, dirs), "--out", str(out))
    _refused(result, needle)
    assert not out.exists()
