"""Reading ``[tool.compilewatch]`` from a repository's pyproject.toml, which a pull request may
have written: size, encoding and nesting are checked before tomllib sees the text, and the
types of ``tool`` and ``tool.compilewatch`` before anyone reads a key.

Every reader of a pyproject goes through ``read_tool_table``, so a PR head with ``tool = 5``,
a 20,000-deep array or a 12 MB file is refused with a message (exit 2), never a traceback.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from compilewatch.bot.judge.config_errors import shown
from compilewatch.core.errors import UsageError

# Real pyproject files are a few KB (large ones with long lint tables ~50 KB); tomllib takes
# ~1 s per MB on a 2-core runner, so a bigger file is refused before it is parsed.
MAX_BYTES = 1024 * 1024
# Arrays and inline tables nest a handful of levels in practice; tomllib recurses on each level
# (a 20,000-deep ``a = [[[...]]]`` ends in RecursionError), so deeper text is refused first.
MAX_DEPTH = 32

# What can hide brackets: strings (multi-line first) and comments; and the brackets themselves.
# Each string pattern is deterministic (possessive, no alternative to backtrack into) and an
# unterminated string runs to the end of its line (multi-line: of the text), so the scan stays
# linear: ``a = "\"\"\"...`` is not scanned again from each quote.
_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\.|\\\Z|"(?!""))*+(?:"""|\Z)'
    r"|'''(?:[^']|'(?!''))*+(?:'''|\Z)"
    r'|"(?:[^"\\\n]|\\.|\\\Z)*+(?:"|$)'
    r"|'[^'\n]*+(?:'|$)"
    r"|#[^\n]*|[\[\]{}]", re.DOTALL | re.MULTILINE)


def read_tool_table(path: Path, root: Path, tool: str = "compilewatch") -> dict[str, Any]:
    """``[tool.<tool>]`` of the pyproject at ``path`` ({} when the file or the table is
    missing). Raises ``UsageError`` naming ``path`` and what is wrong with it."""
    data = read_pyproject(path, root)
    return tool_table(data, path, tool) if data else {}


def project_name(data: dict[str, Any]) -> str | None:
    """``[project] name``, when it is a string (the distribution an install of it makes)."""
    project = data.get("project")
    name = project.get("name") if isinstance(project, dict) else None
    return name if isinstance(name, str) and len(name) <= 256 else None


def read_pyproject(path: Path, root: Path) -> dict[str, Any]:
    """The whole pyproject at ``path``, parsed after the size, encoding and depth checks ({}
    when there is no file). Raises ``UsageError`` naming ``path`` and what is wrong."""
    text = _read_text(path, root)
    if text is None:
        return {}
    depth, line = deepest(text)
    if depth > MAX_DEPTH:
        raise UsageError(f"{path}: arrays or inline tables nested {depth} levels deep (line "
                         f"{line}); at most {MAX_DEPTH} are read")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:  # nesting the scan above did not see
        raise UsageError(f"{path}: nested too deeply to read") from None
    return data


def _read_text(path: Path, root: Path) -> str | None:
    """The file's text, read no further than ``MAX_BYTES``; None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block or never end
        raise UsageError(f"{path}: not a regular file")
    if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
        raise UsageError(f"{path}: a symbolic link to {path.resolve()}, outside {root}")
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    if len(data) > MAX_BYTES:
        raise UsageError(f"{path}: {max(st.st_size, len(data)):,} bytes, more than the "
                         f"{MAX_BYTES:,} a pyproject.toml may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise UsageError(f"{path}: not UTF-8 text (TOML must be): byte 0x{data[e.start]:02x} "
                         f"at line {line}, column {column}") from None


def deepest(text: str) -> tuple[int, int]:
    """The deepest nesting of ``[`` and ``{`` outside strings and comments, and the line where
    it is reached. A regular expression finds the tokens, so no Python loop runs per character."""
    depth = best = 0
    best_at = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token in ("[", "{"):
            depth += 1
            if depth > best:
                best, best_at = depth, m.start()
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
    return best, text.count("\n", 0, best_at) + 1


def tool_table(data: dict[str, Any], path: Path, tool: str) -> dict[str, Any]:
    """``data["tool"][tool]``, each level checked to be a table, the result checked for depth."""
    tools = data.get("tool", {})
    if not isinstance(tools, dict):
        raise UsageError(f"{path}: tool = {shown(tools)}: expected a table ([tool.{tool}])")
    table = tools.get(tool, {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: tool.{tool} = {shown(table)}: expected a table "
                         f"([tool.{tool}])")
    levels = table_depth(table)
    if levels > MAX_DEPTH:
        raise UsageError(f"{path}: [tool.{tool}] nests tables {levels} levels deep; at most "
                         f"{MAX_DEPTH} are read")
    return table


def table_depth(value: Any) -> int:
    """How many keys deep tables and arrays nest in ``value`` (dotted keys make deep tables
    without any bracket), walked without recursion."""
    deepest_seen, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest_seen = max(deepest_seen, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((v, level + 1) for v in children)
    return deepest_seen

