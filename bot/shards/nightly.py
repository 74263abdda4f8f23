"""A sharded nightly's output folders joined into one: ``results.json`` merged
(``merge.py``) and every shard's verified cache artifacts in one ``artifacts/`` with one
manifest, which ``nightly --publish-only`` then signs and publishes as one release."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from compilewatch.bot.shards.merge import merge_runs
from compilewatch.compiler import artifacts as art
from compilewatch.core.errors import ResultsFileError
from compilewatch.core.files import copy_plain, plain_tree
from compilewatch.core.results_file import load_results, save_results
from compilewatch.core.schema import RunResults

RESULTS = "results.json"


def is_nightly_out(folder: Path) -> bool:
    return (folder / RESULTS).is_file()


def merge_nightly(dirs: list[Path], out: Path) -> RunResults:
    """``OUT/results.json`` and ``OUT/artifacts/`` from the shards' nightly folders. A shard
    folder is data: every artifact its manifest lists must be a plain file in its own
    ``artifacts/`` (no link is followed or copied), checked before anything is written."""
    merged = merge_runs([load_results(d / RESULTS) for d in dirs])
    shards = [(d / "artifacts", art.read_manifest(d / "artifacts" / art.MANIFEST_NAME))
              for d in dirs if _has_manifest(d)]
    if len({m.fingerprint for _, m in shards}) > 1:
        raise ResultsFileError("the shards' cache artifacts are for different environments: "
                               "one release holds one environment's")
    entries = [(folder, e) for folder, m in shards for e in m.artifacts]
    names = [e.file for _, e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ResultsFileError(f"two shards list the artifact {twice[0]}: each model is one "
                               "shard's")
    files = {folder: plain_tree(folder) for folder, _ in shards}
    for folder, entry in entries:
        if (PurePosixPath(entry.file), False) not in files[folder]:
            raise ResultsFileError(f"{folder}: the manifest lists {entry.file}, which is not a "
                                   "plain file there")
    folder_out = out / "artifacts"
    for folder, entry in entries:
        copy_plain(folder, [(PurePosixPath(entry.file), False)], folder_out)
    folder_out.mkdir(parents=True, exist_ok=True)
    if shards:
        art.write_manifest(shards[0][1].model_copy(update={"artifacts": [e for _, e in entries]}),
                           folder_out / art.MANIFEST_NAME)
    save_results(merged, out / RESULTS)
    return merged


def _has_manifest(folder: Path) -> bool:
    """Whether a shard folder holds cache artifacts; its ``artifacts/`` must then be a plain
    folder of its own (a link to another folder is refused, not read)."""
    where = folder / "artifacts"
    if where.is_symlink():
        raise ResultsFileError(f"{where} is a symbolic link: a shard folder holds only plain "
                               "files and folders")
    return (where / art.MANIFEST_NAME).is_file()
