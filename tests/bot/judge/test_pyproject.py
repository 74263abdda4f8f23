"""A pyproject.toml is read by one checked reader: any file a pull request can write (wrong
types, 20,000-deep nesting, bytes that are not UTF-8, a huge file, a FIFO, a link out of the
checkout) is refused with a message naming the file and what is wrong; never a traceback,
a hang or a silent default."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.judge.pyproject import MAX_BYTES, MAX_DEPTH, deepest
from compilewatch.core.errors import UsageError
from compilewatch.core.results_file import save_results
from tests.factories import model_result, run_results

DEEP = 20_000

BAD_TEXT = {
    "tool_is_a_number": ("tool = 5\n", r"tool = 5: expected a table \(\[tool.compilewatch\]\)"),
    "tool_is_a_string": ('tool = "x"\n', 'tool = "x": expected a table'),
    "tool_is_an_array": ("tool = [1, 2]\n", "tool = \\[1, 2\\]: expected a table"),
    "compilewatch_is_a_number": ("[tool]\ncompilewatch = 5\n",
                                 "tool.compilewatch = 5: expected a table"),
    "compilewatch_is_true": ("[tool]\ncompilewatch = true\n",
                             "tool.compilewatch = true: expected a table"),
    "compilewatch_is_an_array": ('[tool]\ncompilewatch = ["micro"]\n',
                                 'tool.compilewatch = \\["micro"\\]: expected a table'),
    "deep_array": ("a = " + "[" * DEEP + "]" * DEEP + "\n",
                   f"nested {DEEP} levels deep \\(line 1\\); at most {MAX_DEPTH}"),
    "deep_inline_table": ("a = " + "{b = " * DEEP + "1" + "}" * DEEP + "\n",
                          f"nested {DEEP} levels deep"),
    "deep_under_another_tool": ('[project]\nname = "x"\n[tool.other]\nx = '
                                + "[" * 500 + "]" * 500 + "\n",
                                "nested 500 levels deep \\(line 4\\)"),
    "deep_dotted_tables": ("[tool.compilewatch.models." + ".".join(["a"] * 40) + "]\nx = 1\n",
                           r"\[tool.compilewatch\] nests tables 41 levels deep"),
    "not_toml": ("[tool.compilewatch\nsuites = 1\n", "not valid TOML: .*line 1"),
}


def _write(tmp_path: Path, data: str | bytes) -> Path:
    path = tmp_path / "pyproject.toml"
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def _refused(tmp_path: Path, pattern: str) -> str:
    with pytest.raises(UsageError) as e:
        load_project_config(tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'pyproject.toml'}: "), msg
    assert re.search(pattern, msg), msg
    assert len(msg) < 400  # nothing from the file is echoed at length
    return msg


@pytest.mark.parametrize("name", sorted(BAD_TEXT))
def test_bad_text_is_refused_naming_the_file(tmp_path: Path, name: str) -> None:
    text, pattern = BAD_TEXT[name]
    _write(tmp_path, text)
    _refused(tmp_path, pattern)


@pytest.mark.parametrize(("data", "where"), [
    (b'[tool.compilewatch]\nsuites = ["\xff\xfe"]\n', "byte 0xff at line 2, column 12"),
    (b"\xc3(\n", "byte 0xc3 at line 1, column 1"),
    (b'# caf\xe9\n[tool.compilewatch]\n', "byte 0xe9 at line 1, column 6"),
    (b"\xed\xa0\x80 = 1\n", "byte 0xed at line 1, column 1"),  # a lone surrogate
])
def test_bytes_that_are_not_utf8_are_refused_with_where(tmp_path: Path, data: bytes,
                                                        where: str) -> None:
    _write(tmp_path, data)
    msg = _refused(tmp_path, "not UTF-8 text")
    assert where in msg


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    # 12 MB of one valid array: tomllib alone takes ~13 s over it on a 2-core runner
    _write(tmp_path, "[tool.compilewatch]\nsuites = [" + ",".join(['"x"'] * 3_000_000) + "]\n")
    start = time.monotonic()
    _refused(tmp_path, f"12,000,031 bytes, more than the {MAX_BYTES:,}")
    assert time.monotonic() - start < 2.0


def test_a_file_just_under_the_limit_is_read(tmp_path: Path) -> None:
    body = '[tool.compilewatch]\nsuites = ["micro"]\n'
    _write(tmp_path, body + "#" * (MAX_BYTES - len(body) - 1) + "\n")
    assert load_project_config(tmp_path).suites == ("micro",)


def test_brackets_in_strings_and_comments_do_not_count_as_nesting(tmp_path: Path) -> None:
    deep = "[" * 200
    _write(tmp_path, f'# {deep}\n[tool.compilewatch]\nsuites = ["{deep}", \'{deep}\']\n'
                     f'[tool.other]\nx = """\n{deep}\n"""\ny = \'\'\'{deep}\'\'\'\n'
                     f'z = "escaped \\" {deep}"\n')
    assert load_project_config(tmp_path).suites == (deep, deep)


@pytest.mark.parametrize(("text", "depth", "line"), [
    ("a = 1\n", 0, 1),
    ("[tool.x]\na = [[1], [2, [3]]]\n", 3, 2),
    ("[[a]]\nb = {c = {d = 1}}\n", 2, 1),
    ('a = "[[[["\nb = [1]\n', 1, 2),
])
def test_deepest(text: str, depth: int, line: int) -> None:
    assert deepest(text) == (depth, line)


def test_a_directory_or_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").mkdir()
    _refused(tmp_path, "not a regular file")
    other = tmp_path / "fifo"
    other.mkdir()
    os.mkfifo(other / "pyproject.toml")  # reading it would block for ever
    start = time.monotonic()
    _refused(other, "not a regular file")
    assert time.monotonic() - start < 2.0


def test_a_link_out_of_the_checkout_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.toml"
    outside.write_text('[tool.compilewatch]\nsuites = ["ghp_notatoken"]\n')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").symlink_to(outside)
    with pytest.raises(UsageError, match=r"a symbolic link to .*secret\.toml, outside") as e:
        load_project_config(repo)
    assert "ghp_notatoken" not in str(e.value)
    (repo / "real.toml").write_text('[tool.compilewatch]\nsuites = ["micro"]\n')
    (repo / "pyproject.toml").unlink()
    (repo / "pyproject.toml").symlink_to("real.toml")  # inside the checkout: read
    assert load_project_config(repo).suites == ("micro",)


def test_a_missing_file_or_table_gives_the_defaults(tmp_path: Path) -> None:
    assert load_project_config(tmp_path).suites == ()
    _write(tmp_path, '[project]\nname = "demo"\n[tool.ruff]\nline-length = 100\n')
    assert load_project_config(tmp_path).suites == ()


@pytest.mark.parametrize("name", ["tool_is_a_number", "deep_array", "compilewatch_is_a_number"])
def test_compare_exits_2_with_the_message(tmp_path: Path, name: str) -> None:
    """Through the CLI: exit 2, one line naming the file, no traceback."""
    for side in ("base", "head"):
        save_results(run_results([model_result("tiny_mlp")]), tmp_path / f"{side}.json")
    repo = tmp_path / "repo"
    repo.mkdir()
    _write(repo, BAD_TEXT[name][0])
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "base.json"),
                                       str(tmp_path / "head.json"), "--repo", str(repo)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"compilewatch: error: {repo / 'pyproject.toml'}: ")
    assert "Traceback" not in result.output and "internal error" not in result.output


@pytest.mark.parametrize("text", [
    'a = "' + '\\"' * 400_000,  # escaped quotes, never closed: each quote a fresh start
    '"\\' * 400_000,
    '"""' + '\\"""' * 200_000,
    "'''" + "''" * 400_000,
    "a = '" + "x" * 800_000,
    '"\n' * 400_000,
], ids=["escaped-quotes", "quote-backslash", "multiline-escapes", "literal-quotes",
        "unterminated-literal", "quote-newline"])
def test_the_nesting_scan_is_linear_on_hostile_text(tmp_path: Path, text: str) -> None:
    """A regex scan can be quadratic on unterminated strings (the first of these took minutes
    before the string patterns became possessive); every one here takes milliseconds."""
    start = time.monotonic()
    deepest(text)
    assert time.monotonic() - start < 1.0
    _write(tmp_path, text)
    start = time.monotonic()
    with pytest.raises(UsageError):  # none of them is valid TOML
        load_project_config(tmp_path)
    assert time.monotonic() - start < 5.0
