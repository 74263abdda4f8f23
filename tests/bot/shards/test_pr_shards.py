"""`compilewatch pr --shard I/N` on one machine: N local shard processes of one group, each
measuring its part of both sides, merged back into one comparison (the measuring loop is the
fake of tests/bot/test_pr.py: what is checked here is which jobs each shard is given)."""

from __future__ import annotations

from pathlib import Path

from compilewatch.bot.commands.compare import merge_outdirs
from compilewatch.bot.shards.plan import parse_shard
from compilewatch.core.results_file import load_results
from tests.bot.test_pr import HOST_CHECK, PYPROJECT, Recorder, commit, fake_pr, suite_file
from tests.bot.test_pr import repo as repo

MODELS = ("a", "b", "c", "d", "e")


def test_shards_of_a_pr_measure_every_job_once_and_merge(repo: Path, tmp_path: Path,
                                                         monkeypatch) -> None:  # type: ignore[no-untyped-def]

    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: None)
    base = commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file(*MODELS)}, "base")
    head = commit(repo, {"models.py": suite_file(*MODELS, "added")}, "head")  # one model more
    outs, recorders = [], []
    for k in (1, 2, 3):
        recorders.append(Recorder())
        outs.append(tmp_path / f"shard-{k}")
        fake_pr(repo, outs[-1], recorders[-1], base=base, head=head,
                shard=parse_shard(f"{k}/3"))
    measured = [(side, model) for r in recorders for side, model, _ in r.calls]
    assert sorted(measured) == sorted([("base", m) for m in MODELS]
                                      + [("head", m) for m in (*MODELS, "added")])
    # the two sides of one model are measured by the same shard (interleaved, as without shards)
    for r in recorders:
        models = {m for _, m, _ in r.calls}
        assert all({s for s, m, _ in r.calls if m == x} == ({"head"} if x == "added"
                                                            else {"base", "head"})
                   for x in models)
    runs = [load_results(o / "head.json") for o in outs]
    groups = {r.shards.group for r in runs}
    assert len(groups) == 1 and groups.pop().startswith("local-")  # no workflow run here
    assert [r.shards.index for r in runs] == [0, 1, 2]
    assert all(r.shards.balanced_by == "count" for r in runs)  # no database: even by count

    c = merge_outdirs(outs, tmp_path / "merged", repo)
    assert c.headline.insufficient == 0 and [a.model for a in c.added] == ["added"]
    assert len(c.rows) == len(MODELS) and len(c.shards) == 6

    lost = merge_outdirs([outs[0], outs[2]], tmp_path / "lost", repo)
    planned = set(runs[1].shards.plan[1])
    assert {f"{m.suite}/{m.model}/{m.config}" for m in lost.insufficient} == planned
    assert "added" not in {a.model for a in lost.added} or \
        not any("/added/" in p for p in planned)
