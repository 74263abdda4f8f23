"""The workflows users copy: least privilege, pinned actions, and zizmor finds nothing."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
NAMES = ["ci.yml", "compilewatch-pr.yml", "compilewatch-pr-measure.yml",
         "compilewatch-comment.yml", "compilewatch-nightly.yml", "compilewatch-bisect.yml"]
TRUSTED_TRIGGERS = {"schedule", "workflow_dispatch"}
RUNS_ON_INPUT = "${{ fromJSON(inputs.runs-on) }}"
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def load(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    return [s for job in workflow["jobs"].values() for s in job.get("steps", [])]


@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_zizmor_reports_nothing(persona: str) -> None:
    """The auditor persona adds the audits the regular one leaves out (secrets outside an
    environment, self-hosted runners); what remains is ignored inline, with a reason."""
    exe = shutil.which("zizmor") or shutil.which("zizmor", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("zizmor is not installed (pip install zizmor, part of the test extra)")
    proc = subprocess.run([exe, "--offline", "--no-progress", "--persona", persona,
                           str(WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


IGNORE = re.compile(r"zizmor: ignore\[([a-z-]+)\]")


def test_every_finding_ignored_inline_is_explained_in_the_security_doc() -> None:
    ignored = {rule for name in NAMES for rule in IGNORE.findall((WORKFLOWS / name).read_text())}
    assert ignored, "no inline ignores: drop this test's doc section too"
    doc = (WORKFLOWS.parents[1] / "docs" / "security.md").read_text()
    section = doc.split("## zizmor", 1)[-1].split("\n## ", 1)[0]
    for rule in ignored:
        assert f"`{rule}`" in section, f"docs/security.md, \"zizmor\", does not explain {rule}"


@pytest.mark.parametrize("name", NAMES)
def test_every_job_has_least_privilege(name: str) -> None:
    workflow = load(name)
    assert workflow["permissions"] == {}
    for job in workflow["jobs"].values():
        assert "permissions" in job and "write-all" not in str(job["permissions"])


@pytest.mark.parametrize("name", NAMES)
def test_actions_are_pinned_and_checkouts_keep_no_credentials(name: str) -> None:
    for step in steps(load(name)):
        if "uses" in step:
            assert PINNED.match(step["uses"]), step["uses"]
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def triggers(workflow: dict[Any, Any]) -> set[str]:
    on = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as True
    return {on} if isinstance(on, str) else set(on)


def labels(job: dict[str, Any]) -> list[str]:
    """The runner labels a job asks for; a call of the reusable workflow passes them as the
    input ``runs-on``, and its job reads them from there (by default its input's default)."""
    if "uses" in job and "runs-on" not in job.get("with", {}):  # the called workflow's own
        called = load(job["uses"].rsplit("/", 1)[-1])
        return sorted({label for j in called["jobs"].values() for label in labels(j)})
    if "uses" in job:
        return list(json.loads(job["with"]["runs-on"]))
    runs_on = job["runs-on"]
    if runs_on == RUNS_ON_INPUT:
        inputs = triggers_of(load("compilewatch-pr-measure.yml"))["workflow_call"]["inputs"]
        return list(json.loads(inputs["runs-on"]["default"]))
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def triggers_of(workflow: dict[Any, Any]) -> dict[str, Any]:
    return workflow[True] if True in workflow else workflow["on"]


def writes(job: dict[str, Any]) -> bool:
    return "write" in str(job.get("permissions", "write-all"))


def all_jobs() -> list[tuple[str, str, dict[str, Any]]]:
    return [(name, job_name, job) for name in NAMES
            for job_name, job in load(name)["jobs"].items()]


def test_pr_workflow_runs_only_on_pull_request_and_only_on_untrusted_runners() -> None:
    workflow = load("compilewatch-pr.yml")
    assert triggers(workflow) == {"pull_request"}
    for job in workflow["jobs"].values():
        assert labels(job) == ["self-hosted", "gpu", "untrusted"]


@pytest.mark.parametrize("name", ["compilewatch-comment.yml", "compilewatch-nightly.yml"])
def test_nightly_and_comment_never_run_on_untrusted_runners(name: str) -> None:
    for job in load(name)["jobs"].values():
        assert "untrusted" not in labels(job)


@pytest.mark.parametrize(("name", "job_name", "job"), all_jobs())
def test_no_job_on_an_untrusted_runner_holds_a_write_token(name: str, job_name: str,
                                                           job: dict[str, Any]) -> None:
    if "untrusted" in labels(job):
        assert not writes(job), f"{name}: {job_name}"
        assert "secrets." not in (WORKFLOWS / name).read_text()


@pytest.mark.parametrize(("name", "job_name", "job"), all_jobs())
def test_trusted_self_hosted_runners_never_run_pull_requests(name: str, job_name: str,
                                                             job: dict[str, Any]) -> None:
    """Event-driven runs by others (PRs, their workflow_run) get GitHub-hosted or untrusted
    runners; the trusted ones run only what the default branch schedules."""
    if "self-hosted" in labels(job) and "untrusted" not in labels(job):
        assert "trusted" in labels(job), f"{name}: {job_name}: label it trusted or untrusted"
        assert trusted_triggers(name), f"{name}: {job_name}"


def callers(name: str) -> list[str]:
    return [n for n in NAMES if f"./.github/workflows/{name}" in (WORKFLOWS / n).read_text()]


def trusted_triggers(name: str) -> bool:
    """Only what the default branch schedules or a maintainer dispatches: a reusable
    workflow counts as its callers do (the bisect workflow, called by the nightly)."""
    on = triggers(load(name))
    if "workflow_call" in on:
        if not callers(name) or not all(trusted_triggers(c) for c in callers(name)):
            return False
        on = on - {"workflow_call"}
    return on <= TRUSTED_TRIGGERS


PIP_INSTALL = re.compile(r"pip install\b(?:[^\n]*\\\n)*[^\n]*")  # with continuations


def installs(job: dict[str, Any]) -> list[str]:
    return [m.group(0) for step in job.get("steps", []) for m in PIP_INSTALL.finditer(
        step.get("run", ""))]


def lock_of(job: dict[str, Any]) -> str:
    """The hashed lock a job's compilewatch is installed from: without torch where a write
    token is held, with it on the GPU runners."""
    return "bot.txt" if writes(job) else "gpu.txt"


@pytest.mark.parametrize(("name", "job_name", "job"), [j for j in all_jobs() if installs(j[2])])
def test_every_install_is_hashed_or_compilewatch_at_a_full_commit(
        name: str, job_name: str, job: dict[str, Any]) -> None:
    commands = installs(job)
    hashed = [c for c in commands if "--require-hashes" in c]
    assert len(hashed) == 1 and len(commands) == 2, f"{name}: {job_name}: {commands}"
    assert "--no-deps" in hashed[0]
    assert hashed[0].rstrip().endswith(f"-r compilewatch-src/requirements/{lock_of(job)}")
    source = next(c for c in commands if c is not hashed[0])
    assert source.rstrip().endswith("./compilewatch-src") and "--no-deps" in source \
        and "--no-build-isolation" in source, f"{name}: {job_name}: {source}"
    assert commands.index(hashed[0]) < commands.index(source)  # deps first: nothing unhashed
    assert not any("$COMPILEWATCH_PIP" in c or "torch" in c for c in commands)
    checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    src = next(s for s in checkouts if s["with"].get("path") == "compilewatch-src")
    assert src["with"]["ref"] == "${{ env.COMPILEWATCH_REF }}"
    assert src["with"]["repository"] == "${{ env.COMPILEWATCH_REPOSITORY }}"
    assert src["with"]["persist-credentials"] is False
    # a later checkout into the workspace's root would clean the source away before it is used
    assert all("path" in s.get("with", {}) for s in checkouts[checkouts.index(src):])


COPIED = [n for n in NAMES if n != "ci.yml"]  # ci.yml tests this project's own checkout
INTERPRETER = re.compile(r"(?:^|/)python3?(?:\.\d+)?$")


def interpreter_calls(script: str) -> list[list[str]]:
    """The commands of a ``run:`` script that start a Python interpreter, as their words."""
    lexer = shlex.shlex(script.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lexer.whitespace = " \t"  # a newline ends a command, as a ';' does
    calls, words = [], []
    for token in [*lexer, "\n"]:
        if token in ("\n", ";", "&&", "||", "|", "&", "(", ")"):
            calls += [words[i:] for i, w in enumerate(words[:1]) if INTERPRETER.search(w)]
            words = []
        else:
            words.append(token)
    return calls


@pytest.mark.parametrize("name", COPIED)
def test_every_interpreter_call_imports_nothing_from_its_working_directory(name: str) -> None:
    """``python -m venv`` and ``python -m pip`` put the working directory first on sys.path,
    and the working directory is the checkout (in the PR's job, the PR's): ``-I`` leaves it
    out (also PYTHONPATH and the user's site-packages). Run for real in
    tests/github/test_privileged_install.py."""
    calls = [c for s in steps(load(name)) for c in interpreter_calls(s.get("run", ""))]
    assert calls or name == "compilewatch-pr.yml", f"{name}: no interpreter call found"
    for call in calls:
        options = call[1:call.index("-m")] if "-m" in call else call[1:]
        assert "-I" in options, f"{name}: {' '.join(call)}"


def test_the_interpreter_calls_are_found() -> None:
    assert interpreter_calls('python3 -I -m venv "$X"\n"$X/bin/python" -I -m pip \\\n'
                             '  install a; echo python && python -c 1') == [
        ["python3", "-I", "-m", "venv", "$X"], ["$X/bin/python", "-I", "-m", "pip", "install",
                                                "a"], ["python", "-c", "1"]]
    counts = {n: sum(len(interpreter_calls(s.get("run", ""))) for s in steps(load(n)))
              for n in COPIED}
    assert counts == {"compilewatch-pr.yml": 0, "compilewatch-pr-measure.yml": 3,
                      "compilewatch-comment.yml": 2, "compilewatch-nightly.yml": 8,
                      "compilewatch-bisect.yml": 5}


@pytest.mark.parametrize(("name", "job_name", "job"), all_jobs())
def test_jobs_that_run_compilewatch_install_it_pinned(name: str, job_name: str,
                                                      job: dict[str, Any]) -> None:
    if "compilewatch " in str([s.get("run", "") for s in job.get("steps", [])]):
        assert installs(job), f"{name}: {job_name} runs compilewatch without installing it"


@pytest.mark.parametrize("name", NAMES)
def test_commits_installed_from_are_full_ids_of_the_event(name: str) -> None:
    ref = load(name).get("env", {}).get("COMPILEWATCH_REF")
    if ref is not None:
        assert ref in {"${{ github.sha }}", "${{ github.event.pull_request.base.sha }}"}, ref
    assert "COMPILEWATCH_PIP" not in (WORKFLOWS / name).read_text()


@pytest.mark.parametrize(("name", "job_name", "job"), all_jobs())
def test_secrets_are_read_only_in_jobs_with_an_environment(name: str, job_name: str,
                                                           job: dict[str, Any]) -> None:
    if "secrets." in str(job):
        assert job.get("environment"), f"{name}: {job_name}"


def test_only_the_nightly_s_measuring_step_holds_the_shared_cache_s_writer() -> None:
    """The trusted writer's URL and key reach the nightly's measuring step (an environment of
    its own); the PR workflows name no secret, so the reader comes from the untrusted
    runners' own environment (docs/scale.md)."""
    nightly = load("compilewatch-nightly.yml")["jobs"]["measure"]
    assert nightly["environment"] == "compilewatch-shared-cache"
    (step,) = [s for s in nightly["steps"] if "compilewatch\" nightly" in s.get("run", "")]
    for name in ("COMPILEWATCH_REMOTE_CACHE", "COMPILEWATCH_REMOTE_CACHE_WRITER",
                 "COMPILEWATCH_REMOTE_CACHE_KEY"):
        assert step["env"][name] == f"${{{{ secrets.{name} }}}}"
    for name in ("compilewatch-pr.yml", "compilewatch-pr-measure.yml"):
        text = (WORKFLOWS / name).read_text()
        assert "secrets." not in text and "REMOTE_CACHE" not in text


@pytest.mark.parametrize("lock", ["bot.txt", "gpu.txt"])
def test_hashed_requirements_pin_every_package_with_a_hash(lock: str) -> None:
    text = (WORKFLOWS.parents[1] / "requirements" / lock).read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==\S+(?: ;[^\\\n]*)? \\$", text, re.MULTILINE)
    assert {"pydantic", "pygithub", "cryptography", "setuptools", "wheel"} <= {
        p.lower() for p in pins}
    assert ("torch" in {p.lower() for p in pins}) == (lock == "gpu.txt")
    for block in re.split(r"\n(?=[A-Za-z])", text.split("\n", 2)[-1]):
        if "==" in block:
            assert "--hash=sha256:" in block, block


def test_pr_workflow_is_read_only_and_gates_forks_on_a_label() -> None:
    workflow = load("compilewatch-pr.yml")
    job = workflow["jobs"]["measure"]
    assert job["permissions"] == {"contents": "read"}
    assert "secrets." not in (WORKFLOWS / "compilewatch-pr.yml").read_text()
    assert "head.repo.full_name == github.repository" in job["if"]
    assert "github.event.label.name == 'safe-to-measure'" in job["if"]
    assert job["uses"] == "./.github/workflows/compilewatch-pr-measure.yml"
    called = load("compilewatch-pr-measure.yml")
    assert triggers(called) == {"workflow_call"}
    assert "secrets." not in (WORKFLOWS / "compilewatch-pr-measure.yml").read_text()
    assert all(not writes(j) for j in called["jobs"].values())
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps(called))


def test_the_step_that_runs_pr_code_holds_the_token_in_no_shell() -> None:
    """The token is in one step's environment only, and that step's shell is replaced by
    compilewatch (which lets go of it before the PR's code runs): no process above the PR's
    code keeps it."""
    assert not steps(load("compilewatch-pr.yml"))  # its one job calls the reusable workflow
    with_token = [s for s in steps(load("compilewatch-pr-measure.yml"))
                  if "GITHUB_TOKEN" in (s.get("env") or {})]
    assert [s["name"] for s in with_token] == ["Measure base and head"]
    (run,) = [s["run"] for s in with_token]
    # before the exec only the suites' arguments are put together, by the shell itself
    before, _, after = run.partition('exec "$RUNNER_TEMP/cw-venv/bin/compilewatch" pr ')
    assert after and before.strip() == \
        'suites=(); for s in $SUITES; do suites+=(--suite "$s"); done'


def test_comment_workflow_never_runs_pr_code() -> None:
    workflow = load("compilewatch-comment.yml")
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "checks": "write", "contents": "read",
                                  "pull-requests": "write"}
    # The only checkouts are compilewatch's source at a full commit id and the default branch's
    # settings, never the PR's head.
    checkouts = [s for s in job["steps"] if "actions/checkout" in s.get("uses", "")]
    assert [c["with"]["ref"] for c in checkouts] == [
        "${{ env.COMPILEWATCH_REF }}", "${{ github.event.repository.default_branch }}"]
    assert workflow["env"]["COMPILEWATCH_REF"] == "${{ github.sha }}"
    assert all(c["with"]["persist-credentials"] is False for c in checkouts)
    assert "head_sha" not in str(checkouts) and "head_branch" not in str(checkouts)
    download = next(s for s in job["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["path"].startswith("${{ runner.temp }}")
    post = job["steps"][-1]
    # Event fields reach the shell only through env (no template injection).
    assert "${{" not in post["run"]
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "compilewatch post" in post["run"]


def test_nightly_publishes_from_token_holding_jobs_only_and_draws_its_own_branch() -> None:
    workflow = load("compilewatch-nightly.yml")
    jobs = workflow["jobs"]
    assert jobs["measure"]["permissions"] == {"contents": "read"}  # runs on the GPU runner
    assert jobs["measure"]["runs-on"] == ["self-hosted", "gpu", "trusted"]
    assert jobs["release"]["permissions"] == {"contents": "write", "id-token": "write",
                                              "attestations": "write"}
    assert jobs["pages"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert set(workflow[True] if True in workflow else workflow["on"]) == {
        "schedule", "workflow_dispatch"}
    by_name = {s.get("name"): s for s in jobs["measure"]["steps"]}
    assert "--publish" not in by_name["Measure, build and verify the cache artifacts"]["run"]
    trends = {s.get("name"): s for s in jobs["dashboard"]["steps"]}["Draw the dashboard"]
    assert '--ref "$REF"' in trends["run"] and trends["env"]["REF"] == "${{ github.ref_name }}"
    publish = next(s for s in jobs["release"]["steps"] if "--publish-only" in s.get("run", ""))
    # signed on the GitHub-hosted release runner: the key never reaches a GPU runner
    assert publish["env"]["COMPILEWATCH_SIGNING_KEY"] == "${{ secrets.COMPILEWATCH_SIGNING_KEY }}"
    # the GPU runner holds the shared cache's writer, its own key, and never the signing key
    held = set(re.findall(r"secrets\.([A-Z_]+)", str(jobs["measure"]["steps"])))
    assert held == {"COMPILEWATCH_REMOTE_CACHE", "COMPILEWATCH_REMOTE_CACHE_WRITER",
                    "COMPILEWATCH_REMOTE_CACHE_KEY"}
    assert jobs["release"]["steps"][-1]["uses"].startswith("actions/attest-build-provenance@")
    assert jobs["release"]["environment"] == "compilewatch-signing"


def test_the_pr_is_measured_by_a_matrix_of_shards_set_in_one_place() -> None:
    caller = load("compilewatch-pr.yml")["jobs"]["measure"]
    assert isinstance(caller["with"]["shards"], int) and caller["with"]["shards"] >= 1
    assert caller["with"]["compilewatch-ref"] == "${{ github.event.pull_request.base.sha }}"
    called = load("compilewatch-pr-measure.yml")
    inputs = triggers_of(called)["workflow_call"]["inputs"]
    assert {"shards", "runs-on", "suites", "compilewatch-repository",
            "compilewatch-ref"} <= set(inputs)
    assert inputs["compilewatch-ref"]["required"] is True
    job = called["jobs"]["measure"]
    assert job["runs-on"] == RUNS_ON_INPUT and job["needs"] == "plan"
    assert job["env"]["COMPILEWATCH_REF"] == "${{ inputs.compilewatch-ref }}"
    assert job["strategy"]["fail-fast"] is False
    assert job["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    by_name = {s.get("name"): s for s in job["steps"]}
    measure = by_name["Measure base and head"]
    assert '--shard "$SHARD/$SHARDS"' in measure["run"] and "${{" not in measure["run"]
    assert measure["env"]["SHARD"] == "${{ matrix.shard }}"
    upload = by_name["Upload the results"]
    assert upload["if"] == "${{ !cancelled() }}"  # a killed shard keeps what it finished
    assert upload["with"]["name"] == "compilewatch-out-shard-${{ matrix.shard }}"
    plan = called["jobs"]["plan"]
    assert plan["permissions"] == {} and plan["runs-on"] == "ubuntu-latest"
    assert "${{" not in plan["steps"][0]["run"]


def test_the_comment_merges_every_shard_and_posts_after_a_failed_one() -> None:
    job = load("compilewatch-comment.yml")["jobs"]["comment"]
    assert "conclusion == 'failure'" in job["if"] and "conclusion == 'success'" in job["if"]
    download = next(s for s in job["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "compilewatch-out-shard-*"
    assert "name" not in download["with"]  # each artifact in a folder of its own
    post = job["steps"][-1]
    assert 'compilewatch post "$RUNNER_TEMP"/compilewatch-out/compilewatch-out-shard-*' \
        in post["run"]


@pytest.mark.parametrize("trends_url", ["", "https://owner.github.io/repo"])
def test_the_comment_gets_the_nightly_s_history_and_dashboard_when_they_are_set(
        tmp_path: Path, trends_url: str) -> None:
    """The post step as written (bash), with a stand-in compilewatch that records its
    arguments: the database comes by the environment, the dashboard only when it is set."""
    post = load("compilewatch-comment.yml")["jobs"]["comment"]["steps"][-1]
    assert post["env"]["COMPILEWATCH_DB"] == "${{ vars.COMPILEWATCH_DB }}"
    assert post["env"]["TRENDS_URL"] == "${{ vars.COMPILEWATCH_TRENDS_URL }}"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "compilewatch"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n'
                    'printf "%s" "$COMPILEWATCH_DB" > "$ARGS_OUT.db"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
           "GITHUB_WORKSPACE": str(tmp_path), "REPO": "o/r", "HEAD_SHA": "a" * 40,
           "PR_NUMBER": "7", "RUN_URL": "https://github.com/o/r/actions/runs/1",
           "COMPILEWATCH_DB": "postgresql+psycopg://ci@db/cw", "TRENDS_URL": trends_url,
           "ARGS_OUT": str(tmp_path / "args")}
    subprocess.run(["bash", "-e", "-c", post["run"]], env=env, check=True)
    args = (tmp_path / "args").read_text().splitlines()
    assert (tmp_path / "args.db").read_text() == "postgresql+psycopg://ci@db/cw"
    if trends_url:
        assert args[args.index("--trends-url") + 1] == trends_url
    else:
        assert "--trends-url" not in args and "" not in args
    assert args[args.index("--pr") + 1] == "7"


def test_the_nightly_shards_merge_before_publishing_once() -> None:
    jobs = load("compilewatch-nightly.yml")["jobs"]
    measure = jobs["measure"]
    assert measure["strategy"]["fail-fast"] is False
    assert isinstance(measure["strategy"]["matrix"]["shard"], list)
    assert measure["env"]["COMPILEWATCH_DB"] == "${{ vars.COMPILEWATCH_DB }}"
    by_name = {s.get("name"): s for s in measure["steps"]}
    assert '--shard "$((INDEX + 1))/$TOTAL"' in \
        by_name["Measure, build and verify the cache artifacts"]["run"]
    assert by_name["Upload the nightly output"]["with"]["name"] == \
        "compilewatch-nightly-shard-${{ matrix.shard }}"
    release = {s.get("name"): s for s in jobs["release"]["steps"]}
    assert "compilewatch merge" in release["Merge the shards"]["run"]
    steps_ = jobs["release"]["steps"]
    assert steps_.index(release["Merge the shards"]) < next(
        i for i, s in enumerate(steps_) if "--publish-only" in s.get("run", ""))
    assert jobs["pages"]["needs"] == "dashboard"
