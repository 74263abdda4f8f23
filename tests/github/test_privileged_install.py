"""The jobs that hold a write token run as their workflows install them.

One venv per session, built by running the install step of compilewatch-comment.yml's and the
nightly release job's own ``run:`` script, read from the workflow files, in a copy of this
checkout laid out as on the runner (``compilewatch-src/``). pip sees PyPI only (no index,
find-links or constraint of this machine's pip configuration), as on a GitHub-hosted runner;
pip's cache makes later sessions quick. Then the workflows' own ``post`` and publishing steps
run in it, against the fake GitHub, and their output is checked: the comment and the check, a
signed release that a consumer pinning the key loads.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from packaging.markers import Marker

from compilewatch.bot.cli import main
from compilewatch.bot.render.escape import md_escape
from compilewatch.bot.render.formats import MARKER
from compilewatch.compiler import artifacts as art
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.schema import Category
from tests.benchmark_scripts import load
from tests.bot.test_post import BREAK, write_outdir
from tests.factories import megacache, model_result
from tests.fakegithub import HEAD_SHA, PR, REPO, TOKEN, FakeGitHub
from tests.scripts.test_readme_order import _copy_checkout

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
PRIVILEGED = [("compilewatch-comment.yml", "comment"), ("compilewatch-nightly.yml", "release"),
              ("compilewatch-bisect.yml", "report")]
NUMERICAL = {"numpy", "scipy", "torch", "matplotlib", "triton", "sympy", "pillow"}
SLUG = "cpu-default-float32-auto"
FP = "f" * 32
lock = load("lock", "scripts")


def job(workflow: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / workflow).read_text())["jobs"][name]


def run_step(workflow: str, name: str, needle: str) -> dict[str, Any]:
    """The one step of the job whose ``run:`` contains ``needle``."""
    [step] = [s for s in job(workflow, name)["steps"] if needle in s.get("run", "")]
    return step


@dataclass(frozen=True)
class Runner:
    """A GitHub-hosted runner with the privileged install on PATH. A step runs in a workspace
    (GITHUB_WORKSPACE, its working directory) with a temp dir (RUNNER_TEMP) of its own."""

    venv: Path

    def env(self, **extra: str) -> dict[str, str]:
        keep = {"PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_CACHE_DIR",
                "PIP_DISABLE_PIP_VERSION_CHECK"}
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "COMPILEWATCH_", "PYTHON", "VIRTUAL_ENV"))
               or k in keep}
        env |= {"PIP_CONFIG_FILE": os.devnull, "PATH": f"{self.venv / 'bin'}:{env['PATH']}"}
        return env | extra

    def bash(self, script: str, root: Path, timeout: float = 120,
             **env: str) -> subprocess.CompletedProcess:
        """``script`` as a ``run:`` step runs it (GitHub's ``bash -eo pipefail``), in
        ``root/workspace`` with ``root/temp``."""
        (root / "workspace").mkdir(parents=True, exist_ok=True)
        (root / "temp").mkdir(exist_ok=True)
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=root / "workspace", capture_output=True, text=True, timeout=timeout,
            env=self.env(GITHUB_WORKSPACE=str(root / "workspace"),
                         RUNNER_TEMP=str(root / "temp"), **env))

    def compilewatch(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv / "bin" / "compilewatch"), *args],
                              env=self.env(**env), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    scripts = {run_step(w, j, "pip install")["run"] for w, j in PRIVILEGED}
    assert len(scripts) == 1, "the privileged jobs install differently: build a venv for each"
    base = tmp_path_factory.mktemp("runner")
    here = Runner(base / "venv")
    (base / "workspace" / "compilewatch-src").mkdir(parents=True)
    _copy_checkout(base / "workspace" / "compilewatch-src")
    # setup-python's interpreter: the one these tests run on, without this venv's packages
    subprocess.run([sys.executable, "-m", "venv", str(here.venv)], check=True, timeout=300)
    proc = here.bash(scripts.pop(), base, timeout=900)
    assert proc.returncode == 0, f"the workflows' install failed:\n{proc.stdout}{proc.stderr}"
    return here


def installed(runner: Runner) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: "
            "d.version for d in m.distributions()}))")
    out = subprocess.run([str(runner.venv / "bin" / "python"), "-c", code], check=True,
                         capture_output=True, text=True, env=runner.env()).stdout
    return {lock._name(k): v for k, v in json.loads(out).items()}


def test_the_install_is_the_lock_and_holds_no_numerical_stack(runner: Runner) -> None:
    pins = {p.name: p.version for p in lock.parse_lock((ROOT / "requirements" / "bot.txt")
                                                          .read_text())
            if not p.marker or Marker(p.marker).evaluate()}
    got = installed(runner)
    assert got.pop("compilewatch") == "0.1.0" and got.pop("pip")
    assert got == pins
    assert not NUMERICAL & set(got)


def _hostile_head(tmp_path: Path) -> Path:
    out = write_outdir(tmp_path)
    data = json.loads((out / "head.json").read_text())
    data["results"][0]["evil"] = 1
    (out / "head.json").write_text(json.dumps(data))
    return out


OUTDIRS = {
    "a regression": (lambda t: write_outdir(t), 0),
    "no regression": (lambda t: write_outdir(t, [model_result("tiny_mlp", seed=2),
                                                 model_result("resnet_block", seed=3)]), 0),
    "a failing model": (lambda t: write_outdir(t, [
        model_result("tiny_mlp", category=Category.COMPILE_ERROR, error="boom <b>x</b>"),
        model_result("resnet_block", seed=3)]), 0),
    "an unknown field in head.json": (_hostile_head, 2),
    "a file the artifact may not hold": (lambda t: write_outdir(t, notes_sh="echo hi"), 2),
}


@pytest.mark.parametrize("case", OUTDIRS)
def test_post_dry_run_says_what_the_full_install_says(runner: Runner, tmp_path: Path,
                                                     case: str) -> None:
    make, code = OUTDIRS[case]
    out = make(tmp_path)
    args = ["post", str(out), "--repo", REPO, "--pr", str(PR), "--sha", HEAD_SHA, "--dry-run"]
    proc = runner.compilewatch(*args)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    full = CliRunner().invoke(main, args, env={"GITHUB_TOKEN": ""})
    assert (full.exit_code, full.stdout, full.stderr) == (code, proc.stdout, proc.stderr)
    if code == 0:
        assert proc.stdout.startswith(MARKER)


@pytest.fixture
def fake() -> Any:
    server = FakeGitHub(token=TOKEN).start()
    server.add_pull(REPO, PR, HEAD_SHA, head_label="contributor:feature")
    yield server
    server.stop()


@pytest.mark.parametrize("fork", [False, True], ids=["same repository", "fork"])
def test_the_comment_workflow_posts_a_comment_and_a_check(runner: Runner, fake: FakeGitHub,
                                                          tmp_path: Path, fork: bool) -> None:
    """compilewatch-comment.yml's post step, verbatim; a fork's PR has no number in the event
    and is found by its head label."""
    step = run_step("compilewatch-comment.yml", "comment", "compilewatch post")
    (tmp_path / "temp").mkdir()
    (tmp_path / "temp" / "compilewatch-out").mkdir()  # one folder per shard's artifact
    write_outdir(tmp_path / "temp").rename(
        tmp_path / "temp" / "compilewatch-out" / "compilewatch-out-shard-1")
    config = tmp_path / "workspace" / "trusted-config"
    config.mkdir(parents=True)
    (config / "pyproject.toml").write_text('[project]\nname = "models"\n[tool.compilewatch]\n')
    values = {"GITHUB_TOKEN": TOKEN, "REPO": REPO, "HEAD_SHA": HEAD_SHA,
              "PR_NUMBER": "" if fork else str(PR), "HEAD_OWNER": "contributor",
              "HEAD_BRANCH": "feature", "RUN_URL": "https://ci.example/run/1",
              # no nightly history stored yet; the dashboard's URL set
              "COMPILEWATCH_DB": "", "TRENDS_URL": "https://owner.example/trends"}
    assert set(step["env"]) == set(values)  # the step's inputs, each given
    proc = runner.bash(step["run"], tmp_path, GITHUB_API_URL=fake.base_url, **values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [comment] = fake.issue_comments(REPO, PR)
    assert comment["body"].startswith(MARKER) and md_escape(BREAK) in comment["body"]
    assert "https://owner.example/trends/" in comment["body"]  # the flagged row's trend page
    [check] = fake.check_runs.values()
    assert (check["head_sha"], check["conclusion"]) == (HEAD_SHA, "failure")
    assert check["details_url"] == "https://ci.example/run/1"
    assert bool(fake.calls("GET", "/pulls")) == fork  # looked up by label only for a fork


def test_the_bisect_workflow_posts_its_report_on_the_issue(runner: Runner, fake: FakeGitHub,
                                                           tmp_path: Path) -> None:
    """compilewatch-bisect.yml's report step, verbatim, on the artifact as downloaded."""
    from compilewatch.bot.render.bisect import marker
    from tests.bot.render.test_bisect_render import report
    from tests.bot.test_post_bisect import bisect_dir

    step = run_step("compilewatch-bisect.yml", "report", "compilewatch post")
    (tmp_path / "temp").mkdir()
    bisect_dir(tmp_path / "temp")
    fake.add_issue(REPO, 12)
    values = {"GITHUB_TOKEN": TOKEN, "REPO": REPO, "ISSUE": "12"}
    assert set(step["env"]) == set(values)
    proc = runner.bash(step["run"], tmp_path, GITHUB_API_URL=fake.base_url, **values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [comment] = fake.issue_comments(REPO, 12)
    assert comment["body"].startswith(marker(report())) and not fake.check_runs


def _nightly(root: Path) -> tuple[Path, dict[str, bytes]]:
    """A measuring job's output: one verified artifact, one that failed verification."""
    folder = root / "nightly" / "artifacts"
    folder.mkdir(parents=True)
    entries, data = [], {}
    for model, ok in (("good", True), ("bad", False)):
        payload = megacache({"inductor": [("f" + model, model.encode() * 100)]})
        name = art.artifact_name("micro", model, SLUG)
        (folder / name).write_bytes(payload)
        data[model] = payload
        entries.append(art.ArtifactEntry(
            suite="micro", model=model, config_slug=SLUG, file=name, size_bytes=len(payload),
            sha256=hashlib.sha256(payload).hexdigest(), verified=ok,
            reason=None if ok else "hot-loaded outputs differ from eager"))
    art.write_manifest(art.Manifest(manifest_version=1, created_at="2026-01-01T00:00:00",
                                    fingerprint=FP, torch="2.13.0", artifacts=entries),
                       folder / art.MANIFEST_NAME)
    return folder.parent, data


def _nightly_shards(root: Path) -> dict[str, bytes]:
    """Two shards' outputs as the release job downloads them: the verified artifact in one, the
    refused one in the other, each with its results file."""
    from compilewatch.bot.shards.plan import ShardOptions, record
    from compilewatch.core.results_file import save_results
    from tests.factories import run_results

    whole, data = _nightly(root / "whole")
    manifest = art.read_manifest(whole / "artifacts" / art.MANIFEST_NAME)
    plan = [[f"micro/{e.model}/{SLUG}"] for e in manifest.artifacts]
    for k, entry in enumerate(manifest.artifacts):
        folder = root / "shards" / f"compilewatch-nightly-shard-{k + 1}"
        (folder / "artifacts").mkdir(parents=True)
        (folder / "artifacts" / entry.file).write_bytes(
            (whole / "artifacts" / entry.file).read_bytes())
        art.write_manifest(manifest.model_copy(update={"artifacts": [entry]}),
                           folder / "artifacts" / art.MANIFEST_NAME)
        run = run_results([model_result(entry.model)])
        rec = record(ShardOptions(k, 2, "gh-1-1"), "gh-1-1", plan, "count", run_id=run.run_id,
                     wall_s=1.0, models=1, finished=True)
        save_results(run.model_copy(update={"shards": rec}), folder / "results.json")
    return data


def _load(root: Path, model: str, key: str, private: Path) -> bytes:
    private.mkdir(exist_ok=True)
    return art.select(root, private=private, suite="micro", model=model, slug=SLUG,
                      fingerprint=FP, torch_version="2.13.0", trusted_keys=[key]).read_bytes()


def _consumer_loads_only_the_verified_artifact(root: Path, data: dict[str, bytes], public: str,
                                               tmp_path: Path) -> None:
    assert _load(root, "good", public, tmp_path / "private") == data["good"]
    with pytest.raises(CacheArtifactError):
        _load(root, "bad", public, tmp_path / "private-bad")
    from compilewatch.core import signing

    _, other = signing.generate()
    with pytest.raises(CacheArtifactError):  # signed by the key, not by any key
        _load(root, "good", other, tmp_path / "private-other")


def test_the_release_job_publishes_a_signed_release(runner: Runner, fake: FakeGitHub,
                                                    signing_pair: tuple[bytes, str],
                                                    tmp_path: Path) -> None:
    """The nightly's release steps, verbatim: the shards merged, then one release published;
    then its attest step's subjects exist."""
    key, public = signing_pair
    release = job("compilewatch-nightly.yml", "release")
    merge = run_step("compilewatch-nightly.yml", "release", "compilewatch merge")
    step = run_step("compilewatch-nightly.yml", "release", "--publish-only")
    data = _nightly_shards(tmp_path / "temp")
    proc = runner.bash(merge["run"], tmp_path)  # as privileged as publishing: bot.txt only
    assert proc.returncode == 0, proc.stdout + proc.stderr
    values = {"GITHUB_TOKEN": TOKEN, "REPO": REPO, "COMPILEWATCH_SIGNING_KEY": key.decode()}
    assert set(step["env"]) == set(values)
    proc = runner.bash(step["run"], tmp_path, GITHUB_API_URL=fake.base_url, **values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [rel] = fake.releases.values()
    assert rel["tag_name"] == f"nightly-{dt.datetime.now(dt.UTC):%Y%m%d}"
    assets = {a["name"]: fake.blobs[a["id"]] for a in fake.assets.values()}
    assert sorted(assets) == sorted([art.artifact_name("micro", "good", SLUG),
                                     "manifest.json", "manifest.json.sig"])
    downloaded = tmp_path / "dl" / rel["tag_name"]
    downloaded.mkdir(parents=True)
    for name, blob in assets.items():
        (downloaded / name).write_bytes(blob)
    _consumer_loads_only_the_verified_artifact(downloaded.parent, data, public, tmp_path)
    subjects = next(s for s in release["steps"] if "attest" in s.get("uses", ""))
    for line in subjects["with"]["subject-path"].splitlines():
        pattern = line.replace("${{ runner.temp }}/", "")
        assert list((tmp_path / "temp").glob(pattern)), line
    assert key.decode() not in proc.stdout + proc.stderr


def test_publishing_to_a_directory_signs_what_a_consumer_loads(
        runner: Runner, signing_pair: tuple[bytes, str], tmp_path: Path) -> None:
    key, public = signing_pair
    out, data = _nightly(tmp_path)
    proc = runner.compilewatch("nightly", "--publish-only", "--out", str(out), "--publish-dir",
                               str(tmp_path / "pub"), "--tag", "nightly-1",
                               COMPILEWATCH_SIGNING_KEY=key.decode())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cache artifacts: 1 verified of 2" in proc.stderr  # the log goes to stderr
    _consumer_loads_only_the_verified_artifact(tmp_path / "pub", data, public, tmp_path)


def test_publishing_without_the_key_is_refused_in_the_privileged_install(
        runner: Runner, tmp_path: Path) -> None:
    out, _ = _nightly(tmp_path)
    proc = runner.compilewatch("nightly", "--publish-only", "--out", str(out), "--publish-dir",
                               str(tmp_path / "pub"))
    assert proc.returncode == 2 and "publishing needs a signing key" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "pub").exists()


# --- the install steps run nothing of the checkout they run in --------------------------

# Each job's install step, and the interpreter that runs it: the GPU jobs make their own venv
# with the runner's python3; the privileged ones install into setup-python's.
INSTALLS = {"the GPU jobs": (("compilewatch-pr-measure.yml", "measure"),
                             ("compilewatch-nightly.yml", "measure"),
                             ("compilewatch-nightly.yml", "dashboard")),
            "the privileged jobs": tuple(PRIVILEGED)}
# What a PR's checkout can hold at its root, each importable as Python's own would be
HOSTILE = ("venv", "pip", "ensurepip", "setuptools", "wheel", "compilewatch", "sitecustomize",
           "usercustomize")


def write_wheel(folder: str, name: str) -> str:
    """A wheel of one module ``name`` (version 1.0) in ``folder``; its file name. Also the
    body of the source's build backend, which runs it in a process of its own."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-1.0.dist-info"
    files = {f"{name}.py": b"OK = True\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).decode().rstrip('=')}"
        f",{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    wheel = f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(f"{folder}/{wheel}", "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
        z.writestr(f"{info}/RECORD", record)
    return wheel


# compilewatch's source stand-in builds itself (the real one needs setuptools and wheel from
# its lock, which would need an index)
BACKEND = inspect.getsource(write_wheel) + """

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return write_wheel(wheel_directory, "cwsource")
"""


def _pr_checkout(root: Path, marks: Path) -> Path:
    """The workspace as the install step finds it: the PR's checkout, with Python's own
    module names at its root, each writing a mark when run or imported; compilewatch's source
    in ``compilewatch-src/`` (here: a lock of one local wheel and a package that builds
    offline)."""
    ws = root / "workspace"
    for name in HOSTILE:
        code = f"open({str(marks)!r} + '/' + {name!r} + '.' + __name__, 'w')\n"
        if name.endswith("customize"):
            (ws / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
            (ws / f"{name}.py").write_text(code)
            continue
        (ws / name).mkdir(parents=True)
        (ws / name / "__init__.py").write_text(code)
        (ws / name / "__main__.py").write_text(code)
    src = ws / "compilewatch-src"
    (src / "requirements").mkdir(parents=True)
    wheel = root / write_wheel(str(root), "cwpinned")
    pin = f"{wheel} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"
    for lock_name in ("gpu.txt", "bot.txt"):
        (src / "requirements" / lock_name).write_text(pin)
    (src / "cwbackend.py").write_text(BACKEND)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = []\n'
                                        'build-backend = "cwbackend"\nbackend-path = ["."]\n')
    return ws


@pytest.mark.parametrize("jobs", INSTALLS)
def test_an_install_step_runs_nothing_from_the_pr_checkout(tmp_path: Path, jobs: str) -> None:
    """The install step, verbatim from the workflows (one script for all of these jobs), in
    a checkout with venv/, pip/, ensurepip/, setuptools/, wheel/, compilewatch/ and
    sitecustomize.py at its root: ``python3 -m venv`` and ``python -m pip`` there ran the PR's
    own ``venv``/``pip`` first, which could plant the compilewatch the next step runs with
    the token. Real venv and pip; none of them runs, and the lock and the source are what
    gets installed."""
    scripts = {run_step(w, j, "pip install")["run"] for w, j in INSTALLS[jobs]}
    assert len(scripts) == 1, f"{jobs} install differently: run each"
    marks = tmp_path / "marks"
    marks.mkdir()
    _pr_checkout(tmp_path, marks)
    if jobs == "the GPU jobs":  # the runner's python3 makes the venv
        here, python = Runner(Path(sys.base_prefix)), tmp_path / "temp" / "cw-venv" / "bin" / \
            "python"
    else:  # setup-python's interpreter, on PATH
        subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "setup-python")],
                       check=True, timeout=300)
        here = Runner(tmp_path / "setup-python")
        python = here.venv / "bin" / "python"
    proc = here.bash(scripts.pop(), tmp_path, timeout=600)
    assert sorted(p.name for p in marks.iterdir()) == [], proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = subprocess.run([str(python), "-I", "-c", "import cwpinned, cwsource; "
                          "print(cwpinned.__file__, cwsource.__file__)"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert got.returncode == 0 and got.stdout.count("site-packages") == 2, got
