"""``compilewatch compare``: load two sides, judge them, render, write."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from compilewatch.bot.github.outdir import DIAGNOSTICS, staging, write_outdir
from compilewatch.bot.history.nightly_values import nightly_values
from compilewatch.bot.history.noise import noise_bands
from compilewatch.bot.history.sides import load_side, results_root
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.project import compare_with_project
from compilewatch.bot.measure.outcome import check_something_measured
from compilewatch.bot.render.diagnostics import relink, tlparse_views
from compilewatch.bot.render.formats import Format, render
from compilewatch.bot.shards.merge import check_pair, merge_if_sharded
from compilewatch.core.files import check_disjoint, copy_plain, plain_tree, write_atomic
from compilewatch.core.results_file import dumps_results, load_results
from compilewatch.core.schema import RunResults


def load_sides(spec: str, db_url: str | None) -> RunResults:
    """A side: a results file or a run id, or a shard group's files joined by commas (merged;
    a shard missing from them marks its models insufficient data)."""
    parts = [p for p in spec.split(",") if p]
    return merge_if_sharded([load_side(p, db_url) for p in parts or [spec]])


def merge_outdirs(dirs: list[Path], out: Path, repo: Path = Path(".")) -> Comparison:
    """``compilewatch merge`` of ``pr --shard`` output directories: base.json and head.json of
    every shard merged per side, compared again, and written as one output directory.

    Everything is checked before anything is written: the shards (one group, one plan, each
    reporting only its own models), both sides one ``pr``'s, and each shard's diagnostics
    plain files and folders that no other shard's overwrite (``core/files.py``). The output is
    built beside ``out`` and moved in whole."""
    runs = {s: merge_if_sharded([load_results(d / f"{s}.json") for d in dirs])
            for s in ("base", "head")}
    check_pair(runs["base"], runs["head"])
    trees = {d / DIAGNOSTICS: plain_tree(d / DIAGNOSTICS) for d in dirs
             if os.path.lexists(d / DIAGNOSTICS)}
    check_disjoint(trees)
    comparison = compare_with_project(runs["base"], runs["head"], repo, None)
    stage = staging(out)
    try:
        for root, entries in trees.items():
            copy_plain(root, entries, stage / DIAGNOSTICS)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    write_outdir(out, {"base.json": dumps_results(runs["base"]),
                       "head.json": dumps_results(runs["head"]),
                       "comparison.json": render(comparison, "json"),
                       "comment.md": render(comparison, "markdown"),
                       "report.html": render(comparison, "html")}, stage)
    return comparison


@dataclass(frozen=True)
class CompareRequest:
    """Two sides (results files or run ids) and how to judge, render and link them."""

    base: str
    head: str
    fmt: Format = "markdown"
    out: Path | None = None  # None: the caller prints the rendering
    repo: Path = Path(".")  # whose thresholds and baseline judge
    db_url: str | None = None
    report_url: str | None = None
    trends_url: str | None = None
    allow_empty: bool = False  # a side in which nothing was measured is refused otherwise


def compare_command(req: CompareRequest) -> tuple[Comparison, str]:
    """Compare two sides with the repository's thresholds and baseline, and render it; the
    rendering is written to ``req.out`` when given (the CLI prints it otherwise, and raises on
    a gating regression after either, so CI keeps the report)."""
    sides = {"base": load_sides(req.base, req.db_url), "head": load_sides(req.head, req.db_url)}
    for name, side in sides.items():
        check_something_measured(side, req.allow_empty, label=name)
    comparison = compare_with_project(sides["base"], sides["head"], req.repo,
                                      noise_bands(req.db_url, sides["base"]))
    if req.fmt == "html":  # links that work from where the page is (a pipe: the current folder)
        roots = {"base": results_root(req.base, sides["base"]),
                 "head": results_root(req.head, sides["head"])}
        comparison = relink(comparison, roots, req.out or Path("compare.html"))
        if req.out is not None:  # a page with a folder beside it for the reports
            comparison = tlparse_views(comparison, req.out)
    history = nightly_values(req.db_url, comparison) if req.fmt == "markdown" else None
    text = render(comparison, req.fmt, req.report_url, req.trends_url,
                  (sides["base"], sides["head"]), history)
    if req.out is not None:
        write_atomic(req.out, text)
    return comparison, text
