"""`compilewatch pr`: real git repositories in temp dirs; one real end-to-end compile.

The orchestration tests inject a fake measuring function (``pr_command(measure=...)``): what
they check (refs, worktrees, cleanup) does not depend on compiling anything. The order of the
processes is the loop's, tested with no process started (tests/compiler/test_schedule.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cache.fetch import WarmCacheOptions
from compilewatch.bot.cli import main
from compilewatch.bot.cli.base import Collaborators
from compilewatch.bot.commands.pr import PrRequest, pr_command
from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.thresholds import Thresholds
from compilewatch.bot.judge.verdicts import compare_model
from compilewatch.bot.measure.harness import MeasureOptions, Measuring
from compilewatch.bot.render.escape import md_escape
from compilewatch.bot.render.formats import MARKER
from compilewatch.compiler.schedule import JobRun, RunOptions, SideJobs
from compilewatch.core.errors import UsageError
from compilewatch.core.followup import FollowUp
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import HostCheck
from tests.factories import cold_result, environment, model_result, run_results, timed_result
from tests.fakegithub import REPO, TOKEN, FakeGitHub

HOST_CHECK = "compilewatch.bot.measure.harness.host_check"  # the preflight

PYPROJECT = '[project]\nname = "demo"\n\n[tool.compilewatch]\nsuites = ["models.py"]\n'
HEADER = "import torch\n\nfrom compilewatch.suites import model\n"


def suite_file(*names: str) -> str:
    """A suite of trivial models (the fast tests never run them)."""
    body = [HEADER]
    for name in names:
        body.append(f'\n\n@model("{name}")\ndef {name}(ctx):\n'
                    f'    return torch.sin, (torch.randn(4),)\n')
    return "".join(body)


def sh(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", message)
    return sh(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    sh(r, "init", "-q", "-b", "main")
    sh(r, "config", "user.email", "ci@example.com")
    sh(r, "config", "user.name", "ci")
    return r


def worktree_list(repo: Path) -> list[str]:
    return sh(repo, "worktree", "list").splitlines()


class Recorder:
    """Stands in for the measuring loop: remembers what each side was to measure, returns a
    plausible result per job."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.opts: dict[str, RunOptions] = {}
        self.fail = fail
        self.same_environment: bool | None = None

    def __call__(self, sides: list[SideJobs], options: Measuring, *,
                 same_environment: bool = True, changed: object = None, progress: object = None,
                 on_done: object = None, follow_up: FollowUp | None = None,
                 cold_follow_up: FollowUp | None = None,
                 durations: object = None,
                 profile: FollowUp | None = None) -> dict[str, list[JobRun]]:
        self.same_environment = same_environment
        self.durations = durations
        self.follow_up = follow_up
        self.cold_follow_up = cold_follow_up
        self.profile = profile
        out: dict[str, list[JobRun]] = {}
        for side in sides:
            self.opts[side.name] = side.opts
            out[side.name] = []
            for job in side.jobs:
                self.calls.append((side.name, job.spec.name, job.suite.source))
                if self.fail:
                    raise RuntimeError("measuring blew up")
                out[side.name].append(JobRun(model_result(
                    job.spec.name, suite=job.suite.name, config=job.config,
                    seed=len(self.calls))))
        return out


WARM_KEYS = ("warm_cache", "warm_cache_repo", "token_env", "github_url")


def fake_pr(repo: Path, out: Path, recorder: Recorder, measure: MeasureOptions | None = None,
            **kwargs: object) -> None:
    warm = {k: kwargs.pop(k) for k in WARM_KEYS if k in kwargs}
    wc = WarmCacheOptions(source=warm.get("warm_cache"), repo=warm.get("warm_cache_repo"),
                          token_env=warm.get("token_env", "GITHUB_TOKEN"),
                          github_url=warm.get("github_url"))  # type: ignore[arg-type]
    pr_command(PrRequest(repo=repo, out=out, measure=measure or MeasureOptions(quiet=True),
                         warm_cache=wc, no_db=True, **kwargs),  # type: ignore[arg-type]
               measure=recorder, environment=lambda _: environment())


def _loosened(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              threshold: str) -> Recorder:
    """A fake pr whose head commit loosens one threshold (``threshold``, a TOML line)."""

    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: None)  # whatever this host is like
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"pyproject.toml": PYPROJECT + "\n[tool.compilewatch.thresholds]\n"
                  f"{threshold}\n"}, "loosen the gate")
    rec = Recorder()
    fake_pr(repo, tmp_path / "out", rec, base="main", head="feature")
    return rec


def test_the_loop_asks_for_more_processes_with_the_bases_thresholds(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head commit sets a 50% compiled-time threshold; the follow-up the loop gets judges
    with the base's (default 3%), so a close +10% still asks for more processes."""
    rec = _loosened(repo, tmp_path, monkeypatch, "compiled_time = 0.5")
    assert rec.follow_up is not None
    base = timed_result("a", [195.2, 203.3, 204.9], seed=1)  # the H200 case, docs/compare.md
    noisy = timed_result("a", [208.7, 231.7, 222.7], seed=2)
    first = compare_model(base, noisy, Thresholds()).compiled_time
    assert first is not None and first.verdict is Verdict.WITHIN_NOISE
    assert rec.follow_up(base, noisy) is not None


def test_the_loop_asks_for_more_cold_compiles_with_the_bases_thresholds(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head commit sets a 90% cold-compile threshold; the cold follow-up judges with the
    base's 15%, so an undecided +17.6% still asks for more cold compiles."""
    rec = _loosened(repo, tmp_path, monkeypatch, "cold_compile = 0.9")
    assert rec.cold_follow_up is not None
    b, h = cold_result("a", [3.0, 3.3, 2.8], 1), cold_result("a", [3.5, 3.3, 3.9], 2)
    assert compare_model(b, h, Thresholds()).cold_compile.verdict is Verdict.WITHIN_NOISE
    assert rec.cold_follow_up(b, h) is not None


def test_the_loop_asks_for_a_profile_process_when_compiled_time_changed(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The question the loop asks once a model's processes are all in: a regression (or an
    improvement) of compiled time gets a profile process a side; unchanged does not."""
    rec = _loosened(repo, tmp_path, monkeypatch, "compiled_time = 0.03")
    assert rec.profile is not None
    b, h = timed_result("a", [100.0, 100.2, 99.8]), timed_result("a", [120.0, 120.2, 119.8])
    assert rec.profile(b, h) == "compiled time +20.0%, regression"
    assert rec.profile(b, timed_result("a", [100.1, 99.9, 100.0])) is None


def test_the_results_say_which_follow_ups_the_pr_allowed(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "b")}, "B")
    for i, (timing, cold) in enumerate([(None, None), (1, 2)]):
        fake_pr(repo, tmp_path / f"out{i}", Recorder(), base="main", head="feature",
                measure=MeasureOptions(quiet=True, extra_processes=timing,
                                       extra_cold_processes=cold))
        for side in ("base", "head"):
            got = load_results(tmp_path / f"out{i}" / f"{side}.json").settings
            assert (got.extra_processes, got.extra_cold_processes) == (timing or 0, cold or 0)


def test_the_loop_gets_each_models_stored_duration_of_this_environment(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs stored before (this environment's, and another's) give the loop each model's
    median duration, so it starts the longest first; no database, no durations."""
    from compilewatch.db import store_runs

    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: None)
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"README.md": "b\n"}, "docs")
    url = f"sqlite:///{tmp_path / 'history.db'}"
    rec = Recorder()
    fake_pr(repo, tmp_path / "out0", rec, base="main", head="feature", db_url=url)
    assert rec.durations == {}  # no database file: nothing read, none created
    assert not (tmp_path / "history.db").exists()
    slow = model_result("a", suite="user").model_copy(update={"duration_s": 300.0})
    fast = model_result("b", suite="user").model_copy(update={"duration_s": 7.0})
    other = model_result("a", suite="user").model_copy(update={"duration_s": 1.0})
    store_runs(url, run_results([slow, fast]),
               run_results([other], env=environment(fingerprint="e" * 32)))
    rec = Recorder()
    fake_pr(repo, tmp_path / "out1", rec, base="main", head="feature", db_url=url)
    slug = model_result("a").config.slug
    assert rec.durations == {("user", "a", slug): 300.0, ("user", "b", slug): 7.0}
    # a runner without a database: a results file's durations (--shard-durations) instead
    from compilewatch.bot.shards.plan import ShardOptions
    from compilewatch.core.results_file import save_results

    save_results(run_results([fast]), tmp_path / "nightly.json")
    rec = Recorder()
    fake_pr(repo, tmp_path / "out2", rec, base="main", head="feature", db_url=url,
            shard=ShardOptions(durations=(str(tmp_path / "nightly.json"),)))
    assert rec.durations == {("user", "b", slug): 7.0}


def test_gpus_are_checked_against_each_sides_interpreter(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Head's interpreter sees one GPU where base's sees two: ``--gpus 1`` is refused before
    anything is measured, naming what torch sees."""
    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: None)
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"README.md": "b\n"}, "docs")
    rec = Recorder()
    seen = {sys.executable: 2, "/opt/head/bin/python": 1}
    with pytest.raises(UsageError, match=r"--gpus \[1\]: torch sees GPU 0 here"):
        pr_command(PrRequest(repo=repo, out=tmp_path / "out", base="main", head="feature",
                             measure=MeasureOptions(device="cuda", pin_cpus=(), gpus=(1,),
                                                    quiet=True),
                             base_python=sys.executable, head_python="/opt/head/bin/python",
                             no_db=True),
                   measure=rec, environment=lambda p: environment(gpu_count=seen[p]))
    assert rec.calls == []


def test_extra_cold_compiles_default_to_three_on_a_gpu_and_none_on_a_cpu() -> None:
    assert MeasureOptions(device="cuda").resolve().loop_settings().extra_cold == 3
    assert MeasureOptions(device="cpu").resolve().loop_settings().extra_cold == 0
    assert MeasureOptions(device="cuda", extra_cold_processes=0).resolve().loop_settings(
    ).extra_cold == 0
    with pytest.raises(UsageError, match="--extra-cold-processes"):
        MeasureOptions(extra_cold_processes=-1).resolve()


def test_no_follow_up_where_the_host_preflight_silences_the_model(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's follow-up judges with the preflight the comparison will use: a model whose
    timing it silences gets no more processes (more on that host settle nothing); on a GPU run
    with only the CPU unsteady, a GPU-bound model still gets them."""

    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "b")}, "B")
    base = timed_result("a", [195.2, 203.3, 204.9], seed=1)  # within noise, past 3%
    close = timed_result("a", [208.7, 231.7, 222.7], seed=2)
    cases = [(HostCheck(cpu_spread=0.4, noisy=True, detail="CPU workload spread 40%"), False),
             (HostCheck(cpu_spread=0.4, noisy=False), True),
             (HostCheck(cpu_spread=0.91, gpu_spread=0.021, noisy=True), True),
             (HostCheck(cpu_spread=0.1, gpu_spread=0.08, noisy=True), False)]
    for i, (host, asks) in enumerate(cases):
        monkeypatch.setattr(HOST_CHECK, lambda *a, h=host, **k: h)
        rec = Recorder()
        fake_pr(repo, tmp_path / f"out{i}", rec, base="main", head="feature")
        assert rec.follow_up is not None
        assert (rec.follow_up(base, close) is not None) is asks, host


def test_base_is_the_merge_base_and_each_side_reads_its_own_suite(repo: Path,
                                                                  tmp_path: Path) -> None:
    fork = commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("m1", "m2")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    head = commit(repo, {"models.py": suite_file("m1", "m2", "m3")}, "feature adds m3")
    sh(repo, "checkout", "-q", "main")
    commit(repo, {"models.py": suite_file("m1", "m2", "later")}, "main moves on")
    rec = Recorder()
    fake_pr(repo, tmp_path / "out", rec, base="main", head="feature")
    base, head_run = (load_results(tmp_path / "out" / f"{s}.json") for s in ("base", "head"))
    assert (base.git.commit, base.git.merge_base, base.git.ref) == (fork, fork, "main")
    assert (head_run.git.commit, head_run.git.merge_base) == (head, fork)
    assert (base.settings.side, head_run.settings.side) == ("base", "head")
    assert base.settings.trigger == head_run.settings.trigger == "pr"
    assert base.settings.suites == ["models.py"]
    # main's later model is not at the merge-base; m3 exists on the head only
    assert [m.model for m in base.results] == ["m1", "m2"]
    assert [m.model for m in head_run.results] == ["m1", "m2", "m3"]
    sources = {side: {src for s, _, src in rec.calls if s == side} for side in ("base", "head")}
    assert len(sources["base"]) == len(sources["head"]) == 1
    assert sources["base"] != sources["head"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "base.json", "comment.md", "comparison.json", "head.json", "report.html"]
    assert len(worktree_list(repo)) == 1


def test_model_filter_may_match_one_side_only(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "added")}, "B adds a model")
    rec = Recorder()
    fake_pr(repo, tmp_path / "out", rec, base="main", head="feature", models=("added",))
    assert [(side, name) for side, name, _ in rec.calls] == [("head", "added")]
    with pytest.raises(UsageError, match=r"nowhere.*either side"):
        fake_pr(repo, tmp_path / "out2", Recorder(), base="main", head="feature",
                models=("nowhere",))


def test_both_sides_go_to_the_loop_together(repo: Path, tmp_path: Path) -> None:
    """One loop call with both sides (it interleaves their processes), in one environment."""
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a", "b", "c")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "b", "c", "d")}, "B")
    rec = Recorder()
    fake_pr(repo, tmp_path / "out", rec, base="main", head="feature")
    assert [(side, name) for side, name, _ in rec.calls] == [
        ("base", "a"), ("base", "b"), ("base", "c"),
        ("head", "a"), ("head", "b"), ("head", "c"), ("head", "d")]
    assert rec.same_environment is True


def test_worktrees_are_removed_when_measuring_fails(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "b")}, "B")
    rec = Recorder(fail=True)
    with pytest.raises(RuntimeError, match="blew up"):
        fake_pr(repo, tmp_path / "out", rec, base="main", head="feature")
    worktree = Path(rec.calls[0][2]).parent
    assert not worktree.exists() and not worktree.parent.exists()
    assert len(worktree_list(repo)) == 1
    assert not (tmp_path / "out").exists()


def test_bad_ref_and_not_a_repo_exit_2_with_a_clear_message(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    runner = CliRunner()
    bad = runner.invoke(main, ["pr", "--repo", str(repo), "--base", "main", "--head", "nope",
                               "--out", str(tmp_path / "out")])
    assert bad.exit_code == 2
    assert "'nope' is not a commit, branch or tag" in bad.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    norepo = runner.invoke(main, ["pr", "--repo", str(plain), "--base", "main", "--head", "x"])
    assert norepo.exit_code == 2 and "is not a git repository" in norepo.stderr
    assert len(worktree_list(repo)) == 1


@pytest.mark.parametrize("side", ["base", "head"])
@pytest.mark.parametrize(("text", "message"), [
    ("tool = 5\n", "tool = 5: expected a table"),
    ("[tool]\ncompilewatch = 5\n", "tool.compilewatch = 5: expected a table"),
    ("a = " + "[" * 20_000 + "]" * 20_000 + "\n", "nested 20000 levels deep"),
    ('[tool.compilewatch]\nsuites = "models.py"\n',
     'tool.compilewatch.suites = "models.py": expected a list of strings'),
])
def test_a_bad_pyproject_on_either_side_is_a_usage_error_naming_it(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str, text: str,
        message: str) -> None:
    """A PR head (or its base) whose pyproject is not what compilewatch reads stops ``pr``
    with the file and the reason (exit 2), before anything is measured."""

    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: None)  # seconds, beside the point
    good = {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}
    bad = {**good, "pyproject.toml": text}
    commit(repo, bad if side == "base" else good, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, bad if side == "head" else {**good, "models.py": suite_file("a", "b")}, "B")
    rec = Recorder()
    with pytest.raises(UsageError) as e:
        fake_pr(repo, tmp_path / "out", rec, base="main", head="feature")
    assert message in str(e.value) and "pyproject.toml: " in str(e.value)
    assert rec.calls == [] and len(worktree_list(repo)) == 1


def test_same_commit_needs_two_interpreters(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    with pytest.raises(UsageError, match="same commit"):
        fake_pr(repo, tmp_path / "out", Recorder(), base="main", head="main")
    rec = Recorder()
    other = os.path.join(os.path.dirname(sys.executable), ".", os.path.basename(sys.executable))
    fake_pr(repo, tmp_path / "out", rec, base="main", head="main", head_python=other)
    assert [(side, name) for side, name, _ in rec.calls] == [("base", "a"), ("head", "a")]


def test_warm_cache_gives_each_side_its_own_environment(repo: Path, tmp_path: Path) -> None:
    """Each side warm-starts from the artifact of its own interpreter's environment; a release
    without a usable nightly leaves the run cold, with a message."""
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    other = os.path.join(os.path.dirname(sys.executable), ".", os.path.basename(sys.executable))
    envs = {sys.executable: environment(torch="2.13.0", fingerprint="a" * 32),
            other: environment(torch="2.14.0", fingerprint="b" * 32)}
    rec = Recorder()
    pr_command(PrRequest(repo=repo, out=tmp_path / "out", measure=MeasureOptions(quiet=True),
                         base="main", head="main", head_python=other, no_db=True,
                         warm_cache=WarmCacheOptions(source=str(tmp_path / "published"))),
               measure=rec, environment=lambda p: envs[p])
    assert rec.same_environment is False
    base, head = rec.opts["base"].warm_cache, rec.opts["head"].warm_cache
    assert base is not None and head is not None
    assert base.root == head.root == tmp_path / "published"
    assert (base.fingerprint, base.torch_version) == (envs[sys.executable].fingerprint, "2.13.0")
    assert (head.fingerprint, head.torch_version) == (envs[other].fingerprint, "2.14.0")
    with pytest.raises(UsageError, match="needs --warm-cache-repo"):
        fake_pr(repo, tmp_path / "out2", Recorder(), base="main", head="main",
                head_python=other, warm_cache="release")


def test_the_trusted_keys_are_the_base_branch_tips_not_the_merge_bases(
        repo: Path, tmp_path: Path, signing_pair: tuple[bytes, str]) -> None:
    """A branch forked before a key rotation: its merge-base still pins the retired key, but
    the keys the warm cache trusts are those the base branch pins now."""
    from compilewatch.core import signing

    retired, current = signing.generate()[1], signing_pair[1]
    keys = 'cache_public_keys = ["{}"]\n'
    fork = commit(repo, {"pyproject.toml": PYPROJECT + keys.format(retired),
                         "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "old-fork")
    commit(repo, {"models.py": suite_file("a", "b")}, "B")
    sh(repo, "checkout", "-q", "main")
    commit(repo, {"pyproject.toml": PYPROJECT + keys.format(current)}, "rotate the key")
    rec = Recorder()
    pr_command(PrRequest(repo=repo, out=tmp_path / "out", measure=MeasureOptions(quiet=True),
                         base="main", head="old-fork", no_db=True,
                         warm_cache=WarmCacheOptions(source=str(tmp_path / "published"))),
               measure=rec, environment=lambda _: environment())
    runs = {s: load_results(tmp_path / "out" / f"{s}.json") for s in ("base", "head")}
    assert runs["base"].git.commit == fork  # the base side measures the merge-base ...
    for side in ("base", "head"):  # ... and trusts the tip's key only
        wc = rec.opts[side].warm_cache
        assert wc is not None and wc.trusted_keys == (current,)
    # the PR's own pins count for nothing either
    sh(repo, "checkout", "-q", "old-fork")
    commit(repo, {"pyproject.toml": PYPROJECT + keys.format(f'{retired}", "{retired}')},
           "pin my own key")
    rec = Recorder()
    pr_command(PrRequest(repo=repo, out=tmp_path / "out2", measure=MeasureOptions(quiet=True),
                         base="main", head="old-fork", no_db=True,
                         warm_cache=WarmCacheOptions(source=str(tmp_path / "published"))),
               measure=rec, environment=lambda _: environment())
    assert rec.opts["head"].warm_cache.trusted_keys == (current,)  # type: ignore[union-attr]


def test_warm_cache_release_without_a_nightly_runs_cold(repo: Path, tmp_path: Path,
                                                  fake_github: FakeGitHub,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "b")}, "B")
    rec = Recorder()
    monkeypatch.setenv("COMPILEWATCH_TEST_TOKEN", TOKEN)
    fake_pr(repo, tmp_path / "out", rec, base="main", head="feature", warm_cache="release",
            warm_cache_repo=REPO, token_env="COMPILEWATCH_TEST_TOKEN",
            github_url=fake_github.base_url)  # the fake repository has no nightly release
    assert rec.opts["base"].warm_cache is None and rec.opts["head"].warm_cache is None
    # said through logging (the library never prints; the CLI shows it on stderr)
    assert "no release tagged nightly-*" in caplog.text
    assert fake_github.calls("GET", r"/releases")  # it asked the fake, not api.github.com


BASE_MODELS = HEADER + '''

@model("breaky")
def breaky(ctx):
    def fn(x):
        y = torch.relu(x) + 1
        return y * 2
    return fn, (torch.randn(8),)


@model("shapey")
def shapey(ctx):
    def fn(x):
        return torch.sin(x) * 2
    return fn, (torch.randn(16),)
'''

# head: a data-dependent branch in breaky (line 12 of models.py) and a new input shape in shapey
HEAD_MODELS = BASE_MODELS.replace("        return y * 2", "        if y.sum() > 0:\n"
                                  "            y = y + 1\n"
                                  "        return y * 2").replace("randn(16)", "randn(24)")


@pytest.mark.slow
def test_end_to_end_then_post(repo: Path, tmp_path: Path, fake_github: FakeGitHub) -> None:
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": BASE_MODELS}, "two models")
    sh(repo, "checkout", "-q", "-b", "feature")
    head_sha = commit(repo, {"models.py": HEAD_MODELS}, "graph break and a new shape")
    out = tmp_path / "out"
    summary = tmp_path / "summary.md"
    result = CliRunner().invoke(main, ["pr", "--repo", str(repo), "--base", "main", "--head",
                                       "feature", "--out", str(out), "--rounds", "3",
                                       "--block-ms", "2"],
                                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 0, result.output
    # the job summary is the comment: its headline and the flagged models
    headline = (out / "comment.md").read_text().splitlines()[:3]
    assert summary.read_text().splitlines()[:3] == headline and "breaky" in summary.read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        "base.json", "comment.md", "comparison.json", "diagnostics", "head.json", "report.html"]
    assert len(worktree_list(repo)) == 1
    rows = {r["model"]: r for r in json.loads((out / "comparison.json").read_text())["rows"]}
    [reason] = rows["breaky"]["graph_breaks"]["new_reasons"]
    line = HEAD_MODELS.splitlines().index("        if y.sum() > 0:") + 1
    assert "Data-dependent branching" in reason and f"at models.py:{line}" in reason
    changed = {c for ch in rows["shapey"]["cache_changes"] for c in ch["changed"]}
    assert "example_inputs[0]" in changed
    values = next(ch["values"] for ch in rows["shapey"]["cache_changes"] if ch["kind"] == "fx")
    assert "[16]" in values["example_inputs[0]"][0] and "[24]" in values["example_inputs[0]"][1]
    # the comment collapses whitespace and shortens long reasons: look for the first line
    first = md_escape(reason.splitlines()[0])
    comment = (out / "comment.md").read_text()
    assert first in comment and md_escape("example_inputs[0]") in comment
    assert md_escape(f"models.py:{line}") in comment
    # diagnostics travel with the flagged models, and the comment says where
    diag = rows["breaky"]["diagnostics"]
    assert (out / diag["graph breaks and recompiles"]).read_text().count("graph break") >= 1
    assert (out / diag["generated code diff"]).is_file()
    assert (out / diag["trace (head)"]).stat().st_size > 0
    assert (out / diag["tlparse report (head)"]).is_file()  # tlparse is a dependency
    assert "diagnostics, in the run" in comment

    fake_github.add_pull(REPO, 7, head_sha)
    posted = CliRunner().invoke(main, [
        "post", str(out), "--repo", REPO, "--pr", "7", "--sha", head_sha,
        "--github-url", fake_github.base_url, "--retries", "1", "--retry-backoff", "0.01"],
        env={"GITHUB_TOKEN": TOKEN})
    assert posted.exit_code == 0, posted.output
    [body] = [c["body"] for c in fake_github.issue_comments(REPO, 7)]
    assert first in body and body.startswith(MARKER)
    [run] = fake_github.check_runs.values()
    assert (run["head_sha"], run["conclusion"]) == (head_sha, "failure")


def test_a_killed_pr_keeps_both_sides_so_far(repo: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints after each model, as run does: the real loop runs (no process starts) and
    is cancelled in the second model."""
    import functools

    from tests.factories import FakeLauncher

    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a", "b")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a", "b") + "\n# touched\n"}, "B")
    # a: base cold, head cold (same code: not timed); b: base cold -> cancelled
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        pr_command(PrRequest(repo=repo, base="main", head="feature", out=out, no_db=True,
                             measure=MeasureOptions(quiet=True, rounds=3)),
                   environment=lambda _: environment(),
                   launcher=functools.partial(FakeLauncher, raise_on=3))
    base, head = (load_results(out / f"{s}.json") for s in ("base", "head"))
    assert [r.model for r in base.results] == [r.model for r in head.results] == ["a"]
    assert base.finished_at is None and head.finished_at is None
    assert head.results[0].timing_skipped is not None
    assert len(worktree_list(repo)) == 1


DATA_MODELS = HEADER + '''import json
from pathlib import Path

HERE = Path(__file__).parent


@model("sized")
def sized(ctx):
    n = json.loads((HERE / "sized.json").read_text())["n"]
    return torch.sin, (torch.randn(n),)


@model("fixed")
def fixed(ctx):
    return torch.cos, (torch.randn(8),)
'''


@pytest.mark.slow
def test_a_model_the_change_cannot_reach_is_not_measured(repo: Path, tmp_path: Path) -> None:
    """Head edits the data file one model reads, and the README: real scan processes record
    what each model read; the model reading the data file is measured (its input shape
    changed), the other is not compiled at all."""
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": DATA_MODELS,
                  "sized.json": '{"n": 8}', "README.md": "a\n"}, "two models")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"sized.json": '{"n": 12}', "README.md": "b\n"}, "a bigger input")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["pr", "--repo", str(repo), "--base", "main", "--head",
                                       "feature", "--out", str(out), "--rounds", "3",
                                       "--block-ms", "2", "--no-db"])
    assert result.exit_code == 0, result.output
    rows = {r["model"]: r for r in json.loads((out / "comparison.json").read_text())["rows"]}
    assert rows["fixed"]["compile_skipped"] and rows["fixed"]["verdict"] == "unchanged"
    assert rows["fixed"]["graph_breaks"] is None and rows["fixed"]["cold_compile"] is None
    assert "models.py" in rows["fixed"]["timing_skipped"]
    assert not rows["sized"]["compile_skipped"] and rows["sized"]["cold_compile"] is not None
    changed = {c for ch in rows["sized"]["cache_changes"] for c in ch["changed"]}
    assert "example_inputs[0]" in changed
    head = load_results(out / "head.json")
    fixed = next(r for r in head.results if r.model == "fixed")
    assert fixed.harness_s.get("compile") is None and fixed.harness_s["trace"] > 0
    assert "1 untouched by the change" in (out / "comment.md").read_text()


def test_pr_prints_a_table_that_fits_and_exits_1_after_writing(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI prints pr's table (the library no longer does), fitted to COLUMNS, and raises
    on a gating regression only after every file is written. The real loop, no process."""
    import functools
    import re

    from tests.factories import FakeLauncher, worker_output

    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": suite_file("a")}, "A")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": suite_file("a") + "\n# slower\n"}, "B")
    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: None)  # whatever this host is like

    def output(spec, name):  # type: ignore[no-untyped-def]
        head = name.startswith("head")
        return worker_output(spec, compiled_us=400.0 if head else 50.0,
                             fx_key="headkey" if head else None)

    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["pr", "--repo", str(repo), "--base", "main", "--head",
                                    "feature", "--out", str(out), "--no-db", "--rounds", "3",
                                    "--no-warm", "--fail-on-regression"],
                             env={"COLUMNS": "80"}, obj=Collaborators(
                                 launcher=functools.partial(FakeLauncher, output=output)))
    assert res.exit_code == 1, res.output
    assert "gating regression" in res.output
    assert (out / "comment.md").is_file() and (out / "report.html").is_file()
    lines = re.sub(r"\x1b\[[0-9;]*m", "", res.output).splitlines()
    table = lines[next(i for i, line in enumerate(lines) if "regressions 1" in line):]
    assert max(len(line) for line in table) <= 80
    assert any("/a" in line and "regression" in line for line in table)
    assert f"wrote base.json, head.json, comparison.json, comment.md, report.html to {out}" \
        in " ".join(res.output.split())
