"""A sharded nightly's output folders joined into one: ``results.json`` merged
(``merge.py``) and every shard's verified cache artifacts in one ``artifacts/`` with one
manifest, which ``nightly --publish-only`` then signs and publishes as one release."""

from __future__ import annotations

import shutil
from pathlib import Path

from compilewatch.bot.shards.merge import merge_runs
from compilewatch.compiler import artifacts as art
from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import load_results, save_results
from compilewatch.core.schema import RunResults

RESULTS = "results.json"


def is_nightly_out(folder: Path) -> bool:
    return (folder / RESULTS).is_file()


def merge_nightly(dirs: list[Path], out: Path) -> RunResults:
    """``OUT/results.json`` and ``OUT/artifacts/`` from the shards' nightly folders."""
    merged = merge_runs([load_results(d / RESULTS) for d in dirs])
    manifests = [art.read_manifest(d / "artifacts" / art.MANIFEST_NAME) for d in dirs
                 if (d / "artifacts" / art.MANIFEST_NAME).is_file()]
    if len({m.fingerprint for m in manifests}) > 1:
        raise ResultsFileError("the shards' cache artifacts are for different environments: "
                               "one release holds one environment's")
    folder = out / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for d, manifest in zip([d for d in dirs if (d / "artifacts" / art.MANIFEST_NAME).is_file()],
                           manifests, strict=True):
        for entry in manifest.artifacts:
            source = d / "artifacts" / entry.file
            if source.is_file() and not source.is_symlink():
                shutil.copyfile(source, folder / entry.file)
            entries.append(entry)
    if manifests:
        art.write_manifest(manifests[0].model_copy(update={"artifacts": entries}),
                           folder / art.MANIFEST_NAME)
    save_results(merged, out / RESULTS)
    return merged
