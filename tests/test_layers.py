"""Imports point one way: core <- suites <- compiler; core <- db; everything <- bot; and inside
bot, the rooms never import the commands. No import cycle between modules, function-level
imports included (only the CLI imports inside functions, for start-up speed). Read from the
source with ``ast``: nothing is imported to check."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGES = {"core": "core", "suites": "suites", "compiler": "compiler", "db": "db", "bot": "bot"}
# what each layer may import (besides itself)
ALLOWED = {
    "core": set(),
    "suites": {"core"},
    "compiler": {"core", "suites"},
    "db": {"core"},
    "bot": {"core", "suites", "compiler", "db", "templates"},
}
ROOMS = {"judge", "render", "github", "history", "checkout", "cache", "measure", "shards"}
# what each room of bot may import (besides itself and the layers below bot)
ROOM_ALLOWED = {
    "judge": set(),
    "render": {"judge"},
    "github": set(),
    "checkout": set(),
    "history": {"render", "judge"},
    "cache": {"github"},
    "measure": {"judge", "render", "checkout", "shards"},
    "shards": set(),
}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join(["compilewatch", pkg, *parts])] = path
    return out


def imports(path: Path, known: set[str]) -> list[str]:
    """The compilewatch modules ``path`` imports. ``from pkg import mod`` depends on ``mod``;
    ``from pkg import name`` on ``pkg`` itself (its ``__init__``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("compilewatch"):
                subs = [f"{node.module}.{a.name}" for a in node.names]
                found += [m for m in subs if m in known]
                if any(m not in known for m in subs):
                    found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("compilewatch")]
    return found


def _layer(module: str) -> str:
    return module.split(".")[1]


def _is_cli(module: str) -> bool:
    return module == "compilewatch.bot.cli" or module.startswith("compilewatch.bot.cli.")


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "bot" and parts[2] in ROOMS else None


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        edges[name] = {m for m in imports(path, set(mods)) if m in mods and m != name}
    return edges


def test_layers_import_only_downwards() -> None:
    bad = []
    for src, targets in graph().items():
        for dst in targets:
            a, b = _layer(src), _layer(dst)
            if a != b and b not in ALLOWED[a]:
                bad.append(f"{src} -> {dst}")
    assert bad == []


def test_the_rooms_of_bot_never_import_the_commands_or_a_room_above_them() -> None:
    bad = []
    for src, targets in graph().items():
        room = _room(src)
        if room is None:
            continue
        for dst in targets:
            if _layer(dst) != "bot":
                continue
            target = _room(dst)
            if target is None and dst != "compilewatch.bot":
                bad.append(f"{src} -> {dst} (a command or top-level module)")
            elif target not in (None, room) and target not in ROOM_ALLOWED[room]:
                bad.append(f"{src} -> {dst}")
    assert bad == []


def test_the_judge_imports_only_core() -> None:
    """Judging is pure: bot/judge reads results and imports core only (and itself), not the
    compiler, the database or the suites."""
    bad = []
    for src, targets in graph().items():
        if _room(src) != "judge":
            continue
        for dst in targets:
            if _layer(dst) == "core" or _room(dst) == "judge":
                continue
            bad.append(f"{src} -> {dst}")
    assert bad == []


def test_no_import_cycle() -> None:
    edges = graph()
    for name in edges:  # the CLI imports its commands lazily, by design
        if _is_cli(name):
            edges[name] = {d for d in edges[name] if _is_cli(d)}
    # importing a package runs its __init__: an edge to a module implies one to its package
    color: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        color[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if color.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in color:
                visit(nxt, [*stack, nxt])
        color[node] = 2

    for node in sorted(edges):
        if node not in color:
            visit(node, [node])
    assert cycles == []


def test_the_check_sees_the_code() -> None:
    """The graph is not empty, and a known edge is in it: the checks above could fail."""
    edges = graph()
    assert len(edges) > 60
    assert "compilewatch.core.schema" in edges["compilewatch.compiler.worker"] or any(
        d.startswith("compilewatch.core") for d in edges["compilewatch.compiler.worker"])


# modules run as ``python -m`` whose stdout is their answer to the parent, not a message
CHILD_ANSWERS = {"compilewatch.compiler.hostcheck"}


def _imports_click(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "click" for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "click"


def _console_on_a_terminal(call: ast.Call) -> bool:
    """``Console(...)`` without ``file=``: rich writes to stdout or stderr (a progress bar, a
    table). A console recording into a string (``file=io.StringIO()``) is rendering."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name == "Console" and not any(k.arg == "file" for k in call.keywords)


def _prints(path: Path) -> list[str]:
    """Where ``path`` imports click, calls ``print`` or ``echo``, or writes to the standard
    streams itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if _imports_click(node):
            found.append(f"{path.name}:{getattr(node, 'lineno', 0)} imports click")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                found.append(f"{path.name}:{node.lineno} print()")
            elif isinstance(f, ast.Attribute) and f.attr == "echo":
                found.append(f"{path.name}:{node.lineno} echo()")
            elif _console_on_a_terminal(node):
                found.append(f"{path.name}:{node.lineno} a rich Console on the terminal")
            elif (isinstance(f, ast.Attribute) and f.attr == "write"
                  and isinstance(f.value, ast.Attribute) and f.value.attr in ("stdout", "stderr")
                  and isinstance(f.value.value, ast.Name) and f.value.value.id == "sys"):
                found.append(f"{path.name}:{node.lineno} sys.{f.value.attr}.write()")
    return found


def test_only_the_cli_prints() -> None:
    """The library returns objects (and says what it must through ``logging``); what reaches
    the terminal is bot/cli/'s to write."""
    bad = [hit for name, path in modules().items()
           if not _is_cli(name) and name not in CHILD_ANSWERS
           for hit in _prints(path)]
    assert bad == []


def test_bot_holds_its_rooms_the_commands_and_the_cli_only() -> None:
    """Every command in ``bot/commands/``; nothing loose beside the rooms."""
    loose = sorted(p.name for p in (ROOT / "bot").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    rooms = {p.name for p in (ROOT / "bot").iterdir() if (p / "__init__.py").is_file()}
    assert rooms == ROOMS | {"commands", "cli", "bisect"}


def test_no_module_of_the_package_is_over_600_lines() -> None:
    """A module that grows past this holds more than one job: split it by what it holds."""
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}
