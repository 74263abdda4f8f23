"""The README's commands in the README's order, in one checkout: the quickstart twice, the
compare of its two runs (whose trace links once pointed beside the page, at nothing, and whose
second run wrote over the first one's traces), the PR demo, then tests. The quickstart used
to fill compilewatch-out/, after which the PR demo (default --out) and a test of `pr` failed on
the output folder; the quickstart's closing advice led to overwriting its own results.

Cheap on purpose: one model, few rounds, no warm compile; a copy of the checkout (its tracked
and unignored files) shares this checkout's .venv, so nothing is installed.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--model", "pointwise", "--rounds", "3", "--block-ms", "2", "--no-warm"]


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for name in listed:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def _sh(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)}: {done.returncode}\n{done.stdout}\n" \
                                 f"{done.stderr[-4000:]}"
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "compilewatch").exists(),
                    reason="needs the .venv that scripts/setup.sh makes")
def test_quickstart_then_pr_demo_then_tests_in_one_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    _copy_checkout(checkout)
    env = {k: v for k, v in os.environ.items() if k not in ("COMPILEWATCH_DB", "VIRTUAL_ENV")}
    env.update(COMPILEWATCH_NO_SETUP="1", XDG_DATA_HOME=str(tmp_path / "xdg"))

    out = _sh(["bash", "scripts/quickstart.sh", *QUICK], checkout, env)
    assert (checkout / "compilewatch-out" / "run" / "report.html").is_file()
    assert out.count("compilewatch-out/run/report.html") == 1  # said once
    assert "run id: " in out and "run the quickstart again" in out and "OLD.json" not in out

    # "after a change, run it again": it prints the compare of its two runs, which are the
    # README's two newest local runs
    again = _sh(["bash", "scripts/quickstart.sh", *QUICK], checkout, env)
    listed = json.loads(_sh([".venv/bin/compilewatch", "runs", "--trigger", "local", "--limit",
                             "2", "--json"], checkout, env))
    new, old = (r["run_id"][:12] for r in listed["runs"])
    assert f"compilewatch compare {old} {new} --format html" in again
    page = checkout / "compilewatch-out" / "compare.html"
    _sh([".venv/bin/compilewatch", "compare", old, new, "--format", "html", "--out",
         str(page.relative_to(checkout))], checkout, env)
    links = [page.parent / unquote(html.unescape(h)) for h in
             re.findall(r'<a href="([^"#][^"]*)">trace \((?:base|head)\)</a>', page.read_text())]
    assert len(links) == 2 and all(t.is_file() for t in links), links
    assert {old, new} == {t.parents[1].name for t in links}  # each run kept its own trace
    _sh([".venv/bin/compilewatch", "suites"], checkout, env)  # the run's --model hint

    _sh(["bash", "scripts/demo_repo.sh", str(tmp_path / "demo")], checkout, env)
    _sh([".venv/bin/compilewatch", "pr", "--repo", str(tmp_path / "demo"), "--base", "main",
         "--head", "feature", *QUICK], checkout, env)
    assert (checkout / "compilewatch-out" / "pr" / "comment.md").is_file()

    # tests that once depended on what the checkout held, run in the checkout that now holds it
    _sh([".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
         str(tmp_path / "inner"), "tests/bot/test_pr.py::"
         "test_bad_ref_and_not_a_repo_exit_2_with_a_clear_message", "tests/bot/test_cli.py"],
        checkout, env)
