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


def test_pr_workflow_is_read_only_and_gates_forks_on_a_label() -> None:
    workflow = load("compilewatch-pr.yml")
    job = workflow["jobs"]["measure"]
    assert job["permissions"] == {"contents": "read"}
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert "secrets." not in (WORKFLOWS / "compilewatch-pr.yml").read_text()
    assert "head.repo.full_name == github.repository" in job["if"]
    assert "github.event.label.name == 'safe-to-measure'" in job["if"]
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps(workflow))


def test_comment_workflow_never_runs_pr_code() -> None:
    workflow = load("compilewatch-comment.yml")
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "checks": "write", "contents": "read",
                                  "pull-requests": "write"}
    # The only checkout is the default branch's (trusted settings), never the PR's head.
    checkouts = [s for s in job["steps"] if "actions/checkout" in s.get("uses", "")]
    assert [c["with"]["ref"] for c in checkouts] == [
        "${{ github.event.repository.default_branch }}"]
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
    assert jobs["release"]["permissions"] == {"contents": "write"}
    assert jobs["pages"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert set(workflow[True] if True in workflow else workflow["on"]) == {
        "schedule", "workflow_dispatch"}
    by_name = {s.get("name"): s for s in jobs["measure"]["steps"]}
    assert "--publish" not in by_name["Measure, build and verify the cache artifacts"]["run"]
    trends = by_name["Draw the dashboard"]
    assert '--ref "$REF"' in trends["run"] and trends["env"]["REF"] == "${{ github.ref_name }}"
    assert "--publish-only --out" in jobs["release"]["steps"][-1]["run"]
