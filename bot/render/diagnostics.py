"""What travels with a flagged model, so a compiler engineer can act on it without rerunning:
for each model with a regression, a new graph break or recompile, or a changed cache key,
``pr`` writes beside the kept traces (``diagnostics/<side>/<model>/cold.trace.gz``):

- ``tlparse/`` — tlparse's report of each side's trace (``index.html``); where tlparse is
  missing or fails, the model's diagnostics say why (``tlparse_missing``);
- ``recompiles.txt`` — each side's graph breaks and recompile reasons with their guard failures;
- ``code.diff`` — base -> head diff of the code Inductor generated for each graph, with run-
  specific paths and hashes masked so that only real differences remain.

All of it lives in the output directory, which ``post`` checks for shape and size but never
reads: the files are for people, from the workflow run's artifact.
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, unquote

from compilewatch.bot.judge.comparison import Comparison, ModelRow, Verdict
from compilewatch.compiler.tempdirs import owned_temporary
from compilewatch.core.schema import Diagnostics, ModelResult, RunResults

TLPARSE_TIMEOUT_S = 300
MAX_TRACE_BYTES = 512 * 1024 * 1024  # uncompressed: more is not parsed
_MASKS = [
    (re.compile(r"/[^\s'\"]*compilewatch-run-[^\s'\"]*"), "<run dir>"),
    (re.compile(r"/[^\s'\"]*(?:torchinductor|inductor-cache)[^\s'\"]*"), "<cache>"),
    (re.compile(r"\b[a-z0-9]{52}\b"), "<hash>"),
    (re.compile(r"0x[0-9a-f]{6,}"), "0x…"),
]


def flagged(row: ModelRow) -> bool:
    """A row worth diagnostics: something changed that an engineer would chase."""
    new_break = row.graph_breaks is not None and bool(row.graph_breaks.new_reasons)
    new_recompile = row.recompiles is not None and bool(row.recompiles.new_reasons)
    return row.verdict is Verdict.REGRESSION or new_break or new_recompile \
        or bool(row.cache_changes)


def trace_entries(path: Path) -> Iterator[tuple[dict[str, object], str]]:
    """(metadata, payload) of each entry of a TORCH_TRACE log (gzip or plain): a line
    ``<glog prefix>] {json}`` followed by its payload's lines, each tab-indented."""
    opener = gzip.open if path.suffix == ".gz" else open
    meta: dict[str, object] | None = None
    payload: list[str] = []
    read = 0
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:  # type: ignore[operator]
        for line in f:
            read += len(line)
            if read > MAX_TRACE_BYTES:
                break
            if line.startswith("\t"):
                payload.append(line[1:])
                continue
            if meta is not None:
                yield meta, "".join(payload)
            meta, payload = _meta(line), []
    if meta is not None:
        yield meta, "".join(payload)


def _meta(line: str) -> dict[str, object] | None:
    at = line.find("] {")
    if at < 0:
        return None
    try:
        data = json.loads(line[at + 2:])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def output_code(trace: Path) -> list[str]:
    """The code Inductor generated for each graph, in compile order."""
    return [payload for meta, payload in trace_entries(trace)
            if meta is not None and "inductor_output_code" in meta]


def _masked(code: str) -> str:
    for pattern, repl in _MASKS:
        code = pattern.sub(repl, code)
    return code


def code_diff(base: Path, head: Path) -> str:
    """A unified diff, graph by graph, of the generated code of two traces."""
    b, h = output_code(base), output_code(head)
    out = []
    for i in range(max(len(b), len(h))):
        old = _masked(b[i]).splitlines(keepends=True) if i < len(b) else []
        new = _masked(h[i]).splitlines(keepends=True) if i < len(h) else []
        out.extend(difflib.unified_diff(old, new, f"base/graph-{i}.py", f"head/graph-{i}.py"))
    if not b and not h:
        return "(neither trace holds generated code)\n"
    return "".join(out) or "(the generated code is the same on both sides)\n"


Find = Callable[[], str | None]


def find_tlparse() -> str | None:
    """tlparse (a dependency of compilewatch) beside this interpreter, else on PATH: None where
    neither has it (compilewatch installed without its dependencies, or run by another
    interpreter)."""
    local = Path(sys.executable).parent / "tlparse"
    return str(local) if local.is_file() else shutil.which("tlparse")


def tlparse(trace: Path, out: Path, find: Find = find_tlparse) -> str | None:
    """tlparse's report of ``trace`` into ``out``; why not, or None when it worked."""
    exe = find()
    if exe is None:
        return (f"tlparse is not installed beside {sys.executable} nor on PATH (it is a "
                "dependency of compilewatch: pip install tlparse)")
    with owned_temporary("compilewatch-tlparse-") as tmp:
        log = tmp / "trace.log"
        with gzip.open(trace, "rb") as src, open(log, "wb") as dst:
            shutil.copyfileobj(src, dst)
        try:
            subprocess.run([exe, str(log), "-o", str(out), "--overwrite", "--no-browser"],
                           capture_output=True, check=True, timeout=TLPARSE_TIMEOUT_S)
        except subprocess.CalledProcessError as e:
            tail = (e.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
            return f"tlparse failed (exit {e.returncode}){': ' + tail[0][:300] if tail else ''}"
        except (OSError, subprocess.SubprocessError) as e:
            return f"tlparse failed: {type(e).__name__}"
    return None


def _recompiles_text(side: str, r: ModelResult) -> str:
    lines = [f"== {side}: {len(r.graph_breaks)} graph break(s), {len(r.recompiles)} "
             "recompile(s)"]
    for b in r.graph_breaks:
        where = f" at {b.location}" if b.location else ""
        ident = f" [{b.gb_id}]" if b.gb_id else ""
        lines.append(f"graph break{ident}{where} (x{b.count}): {b.reason}")
    for c in r.recompiles:
        lines.append(f"recompile {c.compile_id or '?'}: {c.reason}")
    return "\n".join(lines) + "\n"


def attach(comparison: Comparison, runs: dict[str, RunResults], root: Path,
           find: Find = find_tlparse) -> dict[str, RunResults]:
    """Write the diagnostics of every flagged row under ``root`` (the output directory, where
    the traces already are) and return the runs with each flagged model's ``diagnostics``
    naming them, and saying why a tlparse report is missing (the comment and the report show
    it: a report silently absent reads as one never made)."""
    extra: dict[tuple[str, str, str], dict[str, str]] = {}
    for row in comparison.rows:
        ident = (row.suite, row.model, row.config)
        results = {s: runs[s].by_ident().get(ident) for s in runs}
        if not flagged(row) or any(r is None for r in results.values()):
            continue
        where = root / "diagnostics" / f"{row.suite}-{row.model}-{row.config}"
        where.mkdir(parents=True, exist_ok=True)
        found: dict[str, str] = {}
        text = "".join(_recompiles_text(s, r) for s, r in results.items() if r is not None)
        (where / "recompiles.txt").write_text(text, encoding="utf-8")
        found["recompiles"] = str((where / "recompiles.txt").relative_to(root))
        traces = {s: root / r.diagnostics.trace for s, r in results.items()
                  if r is not None and r.diagnostics and r.diagnostics.trace}
        if len(traces) == 2 and all(p.is_file() for p in traces.values()):
            (where / "code.diff").write_text(code_diff(traces["base"], traces["head"]),
                                             encoding="utf-8")
            found["code_diff"] = str((where / "code.diff").relative_to(root))
            for side, trace in traces.items():
                why = tlparse(trace, where / f"tlparse-{side}", find)
                if why is None:
                    found[f"tlparse_{side}"] = str((where / f"tlparse-{side}").relative_to(root))
                else:
                    found[f"tlparse_missing_{side}"] = why
        extra[ident] = found
    return {s: _with(run, extra, s) for s, run in runs.items()}


def _with(run: RunResults, extra: dict[tuple[str, str, str], dict[str, str]],
          side: str) -> RunResults:
    results = []
    for r in run.results:
        found = extra.get(r.ident)
        if found:
            d = r.diagnostics or Diagnostics()
            d = d.model_copy(update={"recompiles": found.get("recompiles"),
                                     "code_diff": found.get("code_diff"),
                                     "tlparse": found.get(f"tlparse_{side}"),
                                     "tlparse_missing": found.get(f"tlparse_missing_{side}")})
            r = r.model_copy(update={"diagnostics": d})
        results.append(r)
    return run.model_copy(update={"results": results})


def relink(comparison: Comparison, roots: dict[str, Path | None], page: Path) -> Comparison:
    """The rows' diagnostics as links from ``page`` (the HTML file written). A path in a
    results file is relative to the folder that file was written in (``roots``: each side's,
    None where unknown), which is seldom the page's folder: ``compare --out compare.html``
    linked ``results.diagnostics/...`` beside itself, where nothing was. A file that is not
    where its results say is no link but a note that says where it was looked for."""
    rows = []
    for row in comparison.rows:
        links: dict[str, str] = {}
        notes: list[str] = []
        for what, path in row.diagnostics.items():
            root = roots.get("base" if what.endswith("(base)") else "head")
            if root is None:
                notes.append(f"{what}: {path}, in the folder this run's results file was "
                             "written to (not recorded in the run)")
                continue
            target = root / path
            if target.exists():
                rel = os.path.relpath(target, page.parent.resolve())
                links[what] = quote(Path(rel).as_posix())
            else:
                notes.append(f"{what}: not found at {target} (moved or deleted since the run)")
        rows.append(row.model_copy(update={"diagnostics": links,
                                           "notes": [*row.notes, *notes]}))
    return comparison.model_copy(update={"rows": rows})


def tlparse_views(comparison: Comparison, page: Path, find: Find | None = None) -> Comparison:
    """For a page comparing two runs (``relink``'s links): tlparse's report of each flagged
    model's trace, written beside the page (``PAGE.tlparse/``), where the run kept a trace
    and no report was made for it (a ``pr``'s output folder has one already). A raw
    ``.trace.gz`` is no view a compiler engineer opens; a missing report says why."""
    find = find or find_tlparse
    rows = []
    for row in comparison.rows:
        if not flagged(row) or any(k.startswith("tlparse report") for k in row.diagnostics):
            rows.append(row)
            continue
        links, notes = dict(row.diagnostics), list(row.notes)
        for side in ("base", "head"):
            rel = row.diagnostics.get(f"trace ({side})")
            if rel is None:
                continue
            out = page.parent / f"{page.stem}.tlparse" / f"{row.suite}-{row.model}-{row.config}" \
                / side
            why = tlparse(page.parent / unquote(rel), out, find)
            if why is None:
                link = os.path.relpath(out / "index.html", page.parent)
                links[f"tlparse report ({side})"] = quote(Path(link).as_posix())
            else:
                notes.append(f"tlparse report ({side}): {why}")
        rows.append(row.model_copy(update={"diagnostics": links, "notes": notes}))
    return comparison.model_copy(update={"rows": rows})
