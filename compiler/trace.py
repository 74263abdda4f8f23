"""Torch's structured trace (the events behind ``TORCH_TRACE`` and tlparse), captured in the
worker's own process.

``torch._logging.trace_structured()`` hands every event to the ``torch.__trace`` logger
(``trace_log``) as soon as that logger has a handler (torch 2.8 through 2.13): a record whose
``metadata`` is a dict (its first key names the event; ``artifact`` events carry their name
inside) and whose ``payload`` is a string or None. A handler of ours therefore sees every graph
break, cache lookup, recompile and ``compilation_metrics`` record without files and without
``TORCH_TRACE``; with ``trace_dir`` a second handler writes the same events in torch's own
format for tlparse.

The capture has a cost: with a handler present torch builds every payload (graphs, generated
code). Torch measures that time per compile (``structured_logging_overhead``); ``overhead_s``
adds it to the time of the cache-key rehash we ask of AOTAutograd, so that the worker can take
both out of the measured compile time.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Events kept in memory; everything else (graphs, generated code, chromium events) only goes to
# the raw trace file, when one is asked for.
KEEP = ("dynamo_graph_break_reason", "fx_graph_cache_", "fx_graph_bundled_cache_",
        "aotautograd_cache_", "compilation_metrics", "bwd_compilation_metrics",
        "recompile_reasons")
AOT_CACHE_LOGGER = "torch._functorch._aot_autograd.autograd_cache"


class TraceUnavailable(Exception):
    """This torch has no structured trace we can attach to."""


@dataclass(frozen=True)
class Event:
    """One structured-trace event: its name, the compile it belongs to, its data."""

    name: str
    frame_id: int | None
    frame_compile_id: int | None
    attempt: int | None
    meta: Any  # the event's metadata (for ``compilation_metrics``: every metric)
    payload: str | None

    @property
    def compile_id(self) -> str | None:
        if self.frame_id is None or self.frame_compile_id is None:
            return None
        return f"{self.frame_id}/{self.frame_compile_id}"


def event_of(metadata: Any, payload: Any, keep: tuple[str, ...] = KEEP) -> Event | None:
    """The event a ``trace_log`` record carries, or None when it is not one of ours (its name
    starts with none of ``keep``)."""
    if not isinstance(metadata, dict) or not metadata:
        return None
    name = next(iter(metadata))  # trace_structured() puts the event's own key first
    body = metadata[name]
    if name == "artifact" and isinstance(body, dict):
        name = str(body.get("name") or "artifact")
    if not str(name).startswith(keep):
        return None

    def num(key: str) -> int | None:
        v = metadata.get(key)
        return v if isinstance(v, int) else None

    return Event(str(name), num("frame_id"), num("frame_compile_id"), num("attempt"), body,
                 payload if isinstance(payload, str) else None)


class _Collector(logging.Handler):
    """Keeps the events we read; never raises into torch."""

    def __init__(self, keep: tuple[str, ...] = KEEP) -> None:
        super().__init__(level=logging.DEBUG)
        self.keep = keep
        self.events: list[Event] = []
        self.outside_s = 0.0  # our time on events torch does not attribute to a compile
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        t0 = time.perf_counter()
        meta = getattr(record, "metadata", None)
        try:
            ev = event_of(meta, getattr(record, "payload", None), self.keep)
            if ev is not None:
                self.events.append(ev)
        except Exception as e:  # a malformed record must not break a compile
            if len(self.failures) < 8:
                self.failures.append(f"a trace event was not read: {type(e).__name__}: {e}")
        if not (isinstance(meta, dict) and "frame_id" in meta):
            self.outside_s += time.perf_counter() - t0


class Capture:
    """The installed capture: events so far, notes, and the time it cost the compile."""

    def __init__(self, trace_log: logging.Logger, collector: _Collector) -> None:
        self._trace_log = trace_log
        self._collector = collector
        self._file: logging.Handler | None = None
        self._overhead_base = _torch_overhead_s()
        self.rehash_s = 0.0
        self.notes: list[str] = []
        self.undo: list[Callable[[], None]] = []  # what ``close`` puts back, in reverse

    @property
    def events(self) -> list[Event]:
        return self._collector.events

    def named(self, *prefixes: str) -> list[Event]:
        return [e for e in self.events if e.name.startswith(prefixes)]

    @property
    def overhead_s(self) -> float:
        """Seconds the capture added to compiles so far: torch's own measure of building the
        trace events (our handlers included), our time outside a compile, the AOT rehash."""
        torch_s = max(0.0, (_torch_overhead_s() or 0.0) - (self._overhead_base or 0.0))
        return torch_s + self._collector.outside_s + self.rehash_s

    def all_notes(self) -> list[str]:
        return [*self.notes, *self._collector.failures]

    def write_to(self, trace_dir: str) -> None:
        """Also write every event to ``trace_dir`` in torch's TORCH_TRACE format (tlparse)."""
        try:
            from torch._logging._internal import LazyTraceHandler, TorchLogsFormatter
        except ImportError as e:
            self.notes.append(f"raw trace not written: this torch lacks {e.name or e}")
            return
        try:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.notes.append(f"raw trace not written: {e}")
            return
        handler = LazyTraceHandler(trace_dir)
        handler.setFormatter(TorchLogsFormatter(trace=True))
        self._trace_log.addHandler(handler)
        self._file = handler

    def close(self) -> None:
        """Detach and put torch's loggers and functions back as they were."""
        for h in (self._collector, self._file):
            if h is not None:
                self._trace_log.removeHandler(h)
                h.close()
        while self.undo:
            self.undo.pop()()


def _torch_overhead_s() -> float | None:
    try:
        from torch._logging._internal import structured_logging_overhead
    except ImportError:
        return None
    return float(sum(structured_logging_overhead.values()))


def install(trace_dir: str | None = None, aot_components: bool = True,
            keep: tuple[str, ...] = KEEP) -> Capture:
    """Attach to torch's structured trace, keeping the events whose names start with one of
    ``keep``; raises ``TraceUnavailable`` with the reason."""
    try:
        import torch._dynamo  # noqa: F401  (creates the artifact loggers configured below)
        from torch._logging._internal import trace_log
    except ImportError as e:
        raise TraceUnavailable(f"no structured trace in this torch ({e})") from e
    collector = _Collector(keep)
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(collector)
    cap = Capture(trace_log, collector)
    _quiet_graph_break_logger(cap)
    if aot_components:
        _aot_debug_lines(cap)
    if trace_dir:
        cap.write_to(trace_dir)
    return cap


def _quiet_graph_break_logger(cap: Capture) -> None:
    """torch 2.8-2.10 trace a frame that is skipped whole (an unsupported context manager at
    its top level) only when the ``graph_breaks`` artifact logger is at DEBUG: turn it on
    without letting it print. A later ``torch._logging.set_logs()`` turns it off again."""
    try:
        from torch._logging._internal import log_registry

        names = log_registry.get_artifact_log_qnames()
    except (ImportError, AttributeError) as e:
        cap.notes.append(f"graph_breaks logger not enabled ({e}): on torch < 2.11 breaks "
                         "that skip a whole frame are found from compilation metrics only")
        return
    for qname in names:
        lg = logging.getLogger(qname)
        if getattr(lg, "artifact_name", None) == "graph_breaks" \
                and not lg.isEnabledFor(logging.DEBUG):
            null = logging.NullHandler()
            cap.undo.append(functools.partial(_restore_logger, lg, lg.level, lg.propagate, null))
            lg.setLevel(logging.DEBUG)
            lg.propagate = False  # not to torch's stderr handlers
            lg.addHandler(null)


def _aot_debug_lines(cap: Capture) -> None:
    """torch >= 2.13 hashes AOTAutograd's key components one by one (the ``[hash] name:
    value`` lines) only when that module's logger is at DEBUG. Turn it on, drop its records
    (nothing is printed), and time the rehash so that it stays out of the compile time."""
    import importlib

    try:
        module = importlib.import_module(AOT_CACHE_LOGGER)
    except ImportError as e:
        cap.notes.append(f"AOTAutograd cache module not found ({e})")
        return
    original: Callable[..., Any] | None = getattr(module, "_get_debug_lines_for_cache_key", None)
    if original is None:
        return  # torch < 2.13 always computes the lines
    logger = logging.getLogger(AOT_CACHE_LOGGER)
    if not logger.isEnabledFor(logging.DEBUG):
        quiet = _AtLeastWarning()
        cap.undo.append(functools.partial(_restore_logger, logger, logger.level, logger.propagate,
                                          quiet))
        logger.setLevel(logging.DEBUG)
        logger.addFilter(quiet)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            cap.rehash_s += time.perf_counter() - t0

    with contextlib.suppress(AttributeError, TypeError):
        module._get_debug_lines_for_cache_key = timed
        cap.undo.append(functools.partial(setattr, module, "_get_debug_lines_for_cache_key",
                                          original))


class _AtLeastWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


def _restore_logger(lg: logging.Logger, level: int, propagate: bool,
                    added: logging.Handler | logging.Filter) -> None:
    lg.setLevel(level)
    lg.propagate = propagate
    if isinstance(added, logging.Handler):
        lg.removeHandler(added)
    else:
        lg.removeFilter(added)
