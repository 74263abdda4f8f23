"""Tables fit the terminal they are printed in and colour only where it can show: rich's own
detection (the terminal's size, ``COLUMNS``, ``NO_COLOR``, ``FORCE_COLOR``) and
``--no-color``. They were drawn 160 columns wide without colour whatever the terminal.

The compare table runs the real executable on a pseudo-terminal of a given size; ``run``'s
summary runs the real measuring loop with no process started (``FakeLauncher``)."""

from __future__ import annotations

import fcntl
import functools
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.cli.base import Collaborators
from compilewatch.core.results_file import save_results
from tests.factories import FakeLauncher, model_result, run_results

EXE = str(Path(sys.executable).parent / "compilewatch")
SGR = re.compile(r"\x1b\[([0-9;]*)m")
CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}


def _on_terminal(args: list[str], cols: int, env: dict[str, str]) -> str:
    """Run ``args`` with stdout and stderr on a pseudo-terminal ``cols`` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    proc = subprocess.Popen(args, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL,
                            env={**CLEAN, "TERM": "xterm-256color", **env})
    os.close(follower)
    out = b""
    while select.select([leader], [], [], 120)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower closed: the process is done
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0, out.decode(errors="replace")
    return out.decode().replace("\r\n", "\n")


def _lines(text: str) -> list[str]:
    return SGR.sub("", text).splitlines()


def _coloured(text: str) -> bool:
    """Any foreground colour (30-37, 90-97, 38;...): bold, dim and italic stay with NO_COLOR."""
    codes = [int(c) for group in SGR.findall(text) for c in group.split(";") if c]
    return any(c == 38 or 30 <= c <= 37 or 90 <= c <= 97 for c in codes)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    tmp = tmp_path_factory.mktemp("sides")
    names = ["bf16_block_dynamic", "pointwise", "gelu_mm"]
    base = run_results([model_result(n, seed=i) for i, n in enumerate(names)],
                       run_id="base-run-0001")
    head = run_results([model_result(n, seed=10 + i, compiled_us=60.0 if i == 1 else 50.0,
                                     graph_breaks=["a reason long enough to fold " * 3]
                                     if i == 2 else None) for i, n in enumerate(names)],
                       run_id="head-run-0001")
    save_results(base, tmp / "base.json")
    save_results(head, tmp / "head.json")
    return str(tmp / "base.json"), str(tmp / "head.json")


@pytest.mark.parametrize(("cols", "flags", "env", "colour"), [
    (80, [], {}, True),
    (80, [], {"NO_COLOR": "1"}, False),
    (80, ["--no-color"], {}, False),
    (100, [], {}, True),
    (200, [], {}, True),
])
def test_compare_table_fits_the_terminal(sides: tuple[str, str], tmp_path: Path, cols: int,
                                         flags: list[str], env: dict[str, str],
                                         colour: bool) -> None:
    text = _on_terminal([EXE, "compare", *sides, "--format", "table", "--repo", str(tmp_path),
                         *flags], cols, env)
    lines = _lines(text)
    assert max(len(line) for line in lines) <= cols
    assert any("micro/pointwise" in line for line in lines) and "regression" in text
    assert _coloured(text) == colour
    if cols >= 200:  # room for every column
        assert "not shown" not in text and max(len(line) for line in lines) > 160
    else:
        assert f"not shown at {cols} columns" in " ".join(" ".join(lines).split())


@pytest.mark.parametrize(("env", "widest"), [({}, 180), ({"COLUMNS": "80"}, 80)])
def test_compare_table_in_a_pipe_is_plain_and_as_wide_as_asked(sides: tuple[str, str],
                                                                tmp_path: Path,
                                                                env: dict[str, str],
                                                                widest: int) -> None:
    done = subprocess.run([EXE, "compare", *sides, "--format", "table", "--repo", str(tmp_path)],
                          capture_output=True, text=True, env={**CLEAN, **env}, check=True)
    assert "\x1b[" not in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= widest
    assert ("not shown" in done.stdout) == (widest < 180)  # every column fits in 180


@pytest.mark.parametrize(("env", "flags", "colour"), [
    ({"COLUMNS": "80", "FORCE_COLOR": "1"}, [], True),  # a forced terminal
    ({"COLUMNS": "80", "FORCE_COLOR": "1", "NO_COLOR": "1"}, [], False),
    ({"COLUMNS": "80", "FORCE_COLOR": "1"}, ["--no-color"], False),
    ({"COLUMNS": "100"}, [], False),  # not a terminal, nothing forced
])
def test_run_summary_fits_columns_and_honours_the_colour_settings(
        harness_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        env: dict[str, str], flags: list[str], colour: bool) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    res = CliRunner().invoke(main, ["run", "--suite", harness_suite, "--model", "breaks",
                                    "--model", "branchy", "--rounds", "3", "--no-warm",
                                    "--out", str(tmp_path / "r.json"), "--no-db", *flags],
                             env=env, obj=Collaborators(
                                 launcher=functools.partial(FakeLauncher, raise_on=None)))
    assert res.exit_code == 0, res.output
    lines = _lines(res.output)
    table = lines[next(i for i, line in enumerate(lines) if "compilewatch run " in line):]
    assert max(len(line) for line in table) <= int(env["COLUMNS"])
    assert any("/breaks" in line for line in table) and any("/branchy" in line for line in table)
    assert "speedup: eager ÷ compiled of the same round" in " ".join(" ".join(table).split())
    assert _coloured(res.output) == colour


def test_runs_fits_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    from compilewatch.db import store_runs

    store_runs(url, run_results([model_result("m")], commit="1" * 40, ref="a-long-branch-name",
                                repository="acme/a-repository-with-a-long-name"))
    wide = CliRunner().invoke(main, ["runs", "--db", url])
    assert "acme/a-repository-with-a-long-name" in wide.output and "not shown" not in wide.output
    narrow = CliRunner().invoke(main, ["runs", "--db", url], env={"COLUMNS": "60"})
    assert narrow.exit_code == 0
    assert max(len(line) for line in narrow.output.splitlines()[:-1]) <= 60
    assert "not shown at 60 columns: " in narrow.output and "repository" in narrow.output


def test_no_color_before_the_command_holds_for_it(sides: tuple[str, str], tmp_path: Path) -> None:
    text = _on_terminal([EXE, "--no-color", "compare", *sides, "--format", "table", "--repo",
                         str(tmp_path)], 80, {})
    assert "micro/pointwise" in SGR.sub("", text) and not _coloured(text)
