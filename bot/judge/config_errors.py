"""Configuration errors in plain words: the key path, what was expected, the value given, and
"did you mean" for a key that is close to a known one.

pydantic says "Input should be a valid tuple" or "Extra inputs are not permitted"; a user
editing ``[tool.compilewatch]`` needs ``suites = "micro": expected a list of strings``. What is
expected is read from the model's own annotations, so a field added later is described too.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError

from compilewatch.core import names

NAMES: dict[Any, tuple[str, str]] = {
    str: ("a string", "strings"),
    Path: ("a path (a string)", "paths"),
    bool: ("true or false", "true/false values"),
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
}
BOUNDS = ((annotated_types.Gt, "gt", "above"), (annotated_types.Ge, "ge", "at least"),
          (annotated_types.Lt, "lt", "below"), (annotated_types.Le, "le", "at most"))
MAX_SHOWN = 80  # characters of a value given, in a message
MAX_ERRORS = 10


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`` (did you mean suites?)`` for a key close to a known one, else ``""``."""
    close = names.did_you_mean(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def shown(value: Any) -> str:
    """A value as TOML would write it, cut short (it may come from a pull request), ASCII-only
    so that no control character reaches a terminal."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def explain(e: ValidationError, model: type[BaseModel], prefix: str) -> str:
    """Every error of ``e`` (raised validating ``model``) on a line of its own, each starting
    with the key path under ``prefix`` (``tool.compilewatch``)."""
    errors = e.errors()
    lines = [_line(err, model, prefix) for err in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        lines.append(f"... and {len(errors) - MAX_ERRORS} more")
    return "\n".join(dict.fromkeys(lines))


def _line(err: Any, model: type[BaseModel], prefix: str) -> str:
    loc = tuple(str(p) for p in err["loc"])
    where = ".".join((prefix, *loc)) if prefix else ".".join(loc)
    if err["type"] == "value_error":  # our own validators name the key and say what to write
        msg = err["msg"].removeprefix("Value error, ")
        return f"{where}.{msg}" if loc and not msg.startswith(loc[-1]) else f"{where}: {msg}"
    if err["type"] == "extra_forbidden":
        known = _fields(_resolve(model, loc[:-1]))
        listed = f"; known keys: {', '.join(known)}" if known else ""
        return f"{where}: unknown key{did_you_mean(loc[-1], known)}{listed}"
    if err["type"] == "missing":
        return f"{where}: missing"
    expected = _expected(_resolve(model, loc), err)
    return f"{where} = {shown(err.get('input'))}: expected {expected}"


def _resolve(model: type[BaseModel], loc: tuple[str, ...]) -> Any:
    """The annotation at ``loc`` inside ``model`` (None where the path leaves what is known)."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return None
            tp = Annotated[field.annotation, *field.metadata] if field.metadata else \
                field.annotation
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        elif get_origin(tp) in (tuple, list, set, frozenset):
            tp = get_args(tp)[0]
        else:
            return None
    return tp


def _unwrap(tp: Any) -> Any:
    """``X`` of ``Annotated[X, ...]`` and of ``X | None``."""
    if get_origin(tp) is Annotated:
        return _unwrap(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return _unwrap(rest[0])
    return tp


def _fields(tp: Any) -> list[str]:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [name for name, f in tp.model_fields.items() if not f.exclude]
    return []


def _expected(tp: Any, err: Any) -> str:
    """What ``tp`` accepts, in words; pydantic's own words when the annotation is unknown."""
    if tp is None:
        return err["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
    return words(tp)


def words(tp: Any) -> str:
    """``tuple[str, ...]`` -> ``a list of strings``; bounds of an ``Annotated`` number too."""
    bounds = _bounds(tp)
    tp = _unwrap(tp)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(words(a) for a in get_args(tp) if a is not type(None))
    if origin in (tuple, list, set, frozenset):
        item = _unwrap(get_args(tp)[0]) if get_args(tp) else Any
        return f"a list of {NAMES[item][1]}" if item in NAMES else "a list"
    if origin is dict or (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return "a table"
    base = NAMES[tp][0] if tp in NAMES else getattr(tp, "__name__", str(tp))
    return f"{base} {' and '.join(bounds)}" if bounds else base


def _bounds(tp: Any) -> list[str]:
    """``["above 0.5", "below 1"]`` from the ``Gt``/``Lt``... of an ``Annotated`` type."""
    while get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        if len(rest) != 1:
            return []
        tp = rest[0]
    if get_origin(tp) is not Annotated:
        return []
    out = []
    for meta in get_args(tp)[1:]:
        for kind, attr, phrase in BOUNDS:
            if isinstance(meta, kind):
                out.append(f"{phrase} {getattr(meta, attr):g}")
            elif not isinstance(meta, annotated_types.BaseMetadata) and \
                    getattr(meta, "metadata", None):
                out += [f"{phrase} {getattr(m, attr):g}" for m in meta.metadata
                        if isinstance(m, kind)]
    return out
