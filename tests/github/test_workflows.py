"""The workflows users copy: least privilege, pinned actions, and zizmor finds nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
NAMES = ["ci.yml", "compilewatch-pr.yml", "compilewatch-comment.yml", "compilewatch-nightly.yml"]
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def load(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    return [s for job in workflow["jobs"].values() for s in job.get("steps", [])]


def test_zizmor_reports_nothing() -> None:
    exe = shutil.which("zizmor")
    if exe is None:
        pytest.skip("zizmor is not installed (pip install zizmor, part of the test extra)")
    proc = subprocess.run([exe, "--offline", "--no-progress", str(WORKFLOWS)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


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
    runs_on = job["runs-on"]
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


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
        assert triggers(load(name)) <= {"schedule", "workflow_dispatch"}, f"{name}: {job_name}"


PIP_INSTALL = re.compile(r"pip install\b(?:[^\n]*\\\n)*[^\n]*")  # with continuations


@pytest.mark.parametrize(("name", "job_name", "job"), [j for j in all_jobs() if writes(j[2])])
def test_jobs_holding_a_write_token_install_only_hashed_or_trusted_code(
        name: str, job_name: str, job: dict[str, Any]) -> None:
    installs = [m.group(0) for step in job["steps"] for m in PIP_INSTALL.finditer(
        step.get("run", ""))]
    for command in installs:
        hashed = "--require-hashes" in command and "--no-deps" in command
        trusted = command.rstrip().endswith("./compilewatch-src") and "--no-deps" in command \
            and "--no-build-isolation" in command
        assert hashed or trusted, f"{name}: {job_name}: {command}"
        assert "torch" not in command and "$COMPILEWATCH_PIP" not in command
    if installs:
        source = next(s for s in job["steps"] if s.get("with", {}).get("path")
                      == "compilewatch-src")
        assert source["with"]["ref"] == "${{ env.COMPILEWATCH_REF }}"
        assert source["with"]["persist-credentials"] is False


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
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps(workflow))


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
    trends = by_name["Draw the dashboard"]
    assert '--ref "$REF"' in trends["run"] and trends["env"]["REF"] == "${{ github.ref_name }}"
    publish = next(s for s in jobs["release"]["steps"] if "--publish-only" in s.get("run", ""))
    # signed on the GitHub-hosted release runner: the key never reaches a GPU runner
    assert publish["env"]["COMPILEWATCH_SIGNING_KEY"] == "${{ secrets.COMPILEWATCH_SIGNING_KEY }}"
    assert not any("secrets." in str(step) for step in jobs["measure"]["steps"])
    assert jobs["release"]["steps"][-1]["uses"].startswith("actions/attest-build-provenance@")
