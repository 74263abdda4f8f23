"""Resolve a ``--suite`` argument (built-in name, Python file or module) to its models.

Each worker process is handed the source (a built-in's name, a module, a file's absolute path:
workers run in folders of their own) and resolves it again: workers never receive pickled
models, only names.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.core.errors import SuiteError
from compilewatch.core.schema import ModuleOrigin
from compilewatch.suites.registry import NAME_RE, ModelSpec, models_of

SUITE_MODULE_PREFIX = "compilewatch_user_suite_"  # what a suite file is imported as
BUILTIN: dict[str, str] = {
    "micro": "compilewatch.suites.micro",
    "hf": "compilewatch.suites.hf",
    "vision": "compilewatch.suites.vision",
    "timm": "compilewatch.suites.timm_models",
}


@dataclass(frozen=True)
class Suite:
    name: str
    source: str  # what workers load it from: a built-in's name, a module, an absolute path
    module: str
    models: dict[str, ModelSpec]
    # where the top-level modules its import brought came from (a listing child says)
    modules: dict[str, ModuleOrigin] = field(default_factory=dict)


def _import_file(path: Path) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"{SUITE_MODULE_PREFIX}{stem}_{digest}"
    if name in sys.modules:
        return name
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(f"suite file {path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent = str(path.resolve().parent)
    sys.path.insert(0, parent)  # let a suite import its sibling helpers
    try:
        spec.loader.exec_module(module)
    except SuiteError:
        del sys.modules[name]
        raise
    except Exception as e:
        del sys.modules[name]
        raise SuiteError(f"suite file {path} failed to import: {type(e).__name__}: {e}") from e
    finally:
        sys.path.remove(parent)
    return name


def _import_module(name: str) -> None:
    try:
        importlib.import_module(name)
    except SuiteError:
        raise
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):
            raise SuiteError(
                f"suite {name!r} is not a built-in ({', '.join(BUILTIN)}), an existing .py "
                "file, or an importable module"
            ) from None
        raise SuiteError(f"suite module {name} failed to import: {e}") from e
    except Exception as e:
        raise SuiteError(f"suite module {name} failed to import: {type(e).__name__}: {e}") from e


def load_suite(source: str) -> Suite:
    """Import a suite and return its registered models."""
    path = Path(source)
    if source in BUILTIN:
        module, name = BUILTIN[source], source
        _import_module(module)
    elif source.endswith(".py") or path.is_file():
        if not path.is_file():
            raise SuiteError(f"suite file {source} does not exist")
        module = _import_file(path)
        name = path.stem
        # workers run in folders of their own; absolute, not resolved: a suite file that is
        # a link keeps its own path, which the loop matches against the PR's diff
        source = str(path.absolute())
    else:
        module = source
        _import_module(module)
        name = source.rsplit(".", 1)[-1]
    mod = sys.modules[module]
    name = getattr(mod, "SUITE_NAME", name)
    if not NAME_RE.match(name):
        raise SuiteError(f"suite name {name!r} is invalid; set SUITE_NAME in {source}")
    models = models_of(module)
    if not models:
        raise SuiteError(f"suite {source} registers no models (use @model from "
                         "compilewatch.suites)")
    return Suite(name=name, source=source, module=module, models=models)


def resolve_suites(sources: Iterable[str],
                   load: Callable[[str], Suite] | None = None) -> list[Suite]:
    """Load each suite once (``load``: how a source becomes a suite, ``load_suite`` unless
    given); two sources with the same suite name are an error."""
    suites: list[Suite] = []
    seen: dict[str, str] = {}
    for src in sources:
        suite = (load or load_suite)(src)
        if suite.name in seen and seen[suite.name] != suite.module:
            raise SuiteError(f"suites {seen[suite.name]!r} and {src!r} share the name "
                             f"{suite.name!r}; set SUITE_NAME in one of them")
        if suite.name not in seen:
            seen[suite.name] = suite.module
            suites.append(suite)
    return suites
