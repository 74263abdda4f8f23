"""The bisect workflow: dispatched with good, bad, model and metric, or called by the nightly
for its change points within one budget; inputs reach the shell through the environment only,
the measuring job holds no write token, and only this branch's commits are measured."""

from __future__ import annotations

import re

from tests.github.test_workflows import WORKFLOWS, load, triggers_of

NAME = "compilewatch-bisect.yml"


def by_name(job: dict) -> dict[str, dict]:
    return {s.get("name", s.get("uses", "")): s for s in job["steps"]}


def test_dispatched_with_good_bad_model_metric_and_called_the_same():
    on = triggers_of(load(NAME))
    assert set(on) == {"workflow_dispatch", "workflow_call"}
    for trigger in on.values():
        inputs = trigger["inputs"]
        assert {"good", "bad", "model", "metric", "max-steps", "issue"} == set(inputs)
        assert all(inputs[k]["required"] for k in ("good", "bad", "model", "metric"))


def test_inputs_reach_the_shell_only_through_the_environment():
    for job in load(NAME)["jobs"].values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step.get("name")
    env = load(NAME)["jobs"]["bisect"]["env"]
    assert env["GOOD"] == "${{ inputs.good }}" and env["METRIC"] == "${{ inputs.metric }}"


def test_the_measuring_job_reads_only_and_bisects_only_this_branch():
    job = load(NAME)["jobs"]["bisect"]
    assert job["permissions"] == {"contents": "read"}
    assert job["runs-on"] == ["self-hosted", "gpu", "trusted"]
    run = by_name(job)["Bisect"]["run"]
    assert '--within "$GITHUB_SHA"' in run and "--device cuda" in run
    assert '--good "$GOOD" --bad "$BAD"' in run and '--metric "$METRIC"' in run
    assert "secrets." not in (WORKFLOWS / NAME).read_text()
    upload = by_name(job)["Upload the report"]
    assert upload["if"] == "${{ !cancelled() }}"  # a refused bisection's report too


def test_the_report_is_posted_by_a_hosted_job_that_reads_the_artifact_as_data():
    job = load(NAME)["jobs"]["report"]
    assert job["runs-on"] == "ubuntu-latest" and job["needs"] == "bisect"
    assert job["permissions"] == {"issues": "write", "pull-requests": "write"}
    assert "inputs.issue != ''" in job["if"]
    steps = by_name(job)
    post = steps["Post the report"]
    assert post["run"].strip() == ('compilewatch post "$RUNNER_TEMP/bisect" --repo "$REPO" '
                                   '--issue "$ISSUE"')
    assert not any("actions/checkout" in s.get("uses", "") and "path" not in s["with"]
                   for s in job["steps"])  # nothing of the measured repository checked out


def test_the_nightly_bisects_its_new_change_points_within_one_budget():
    text = (WORKFLOWS / "compilewatch-nightly.yml").read_text()
    nightly = load("compilewatch-nightly.yml")
    assert re.findall(r"COMPILEWATCH_BISECT_BUDGET: \"(\d+)\"", text) == ["24"]
    assert text.count("COMPILEWATCH_BISECT_BUDGET") == 3  # set once, said once, read once
    plan = by_name(nightly["jobs"]["dashboard"])["Plan the bisections of new change points"]
    assert '--budget "$COMPILEWATCH_BISECT_BUDGET"' in plan["run"] and "--matrix" in plan["run"]
    job = nightly["jobs"]["bisect"]
    assert job["uses"] == f"./.github/workflows/{NAME}" and job["needs"] == "dashboard"
    assert job["strategy"]["matrix"]["include"] == \
        "${{ fromJSON(needs.dashboard.outputs.bisections) }}"
    assert job["with"]["max-steps"] == "${{ matrix.steps }}"
    assert {k: v for k, v in job["with"].items() if k in ("good", "bad", "model", "metric")} \
        == {k: f"${{{{ matrix.{k} }}}}" for k in ("good", "bad", "model", "metric")}
    assert nightly["jobs"]["dashboard"]["outputs"]["bisections"] == \
        "${{ steps.plan.outputs.bisections }}"
