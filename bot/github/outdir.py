"""The output directory ``compilewatch pr`` writes and ``compilewatch post`` reads: its files and
the size cap of each. One definition, so ``pr`` refuses early what ``post`` would refuse. Written
whole or not at all (``write_outdir``), by ``pr`` and by ``merge``.

``diagnostics/`` (traces, tlparse reports, code diffs) is for people: ``post`` checks that it is a
real directory and never reads inside it."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

MIB = 1024 * 1024
FILE_LIMITS = {"base.json": 32 * MIB, "head.json": 32 * MIB, "comparison.json": 32 * MIB,
               "comment.md": 1 * MIB, "report.html": 32 * MIB}
OUT_FILES = tuple(FILE_LIMITS)
REQUIRED = ("base.json", "head.json")
DIAGNOSTICS = "diagnostics"

# what ``compilewatch bisect`` writes: ``post`` reads bisect.json alone and renders again
BISECT_LIMITS = {"bisect.json": 16 * MIB, "bisect.md": 1 * MIB, "bisect.html": 32 * MIB}
BISECT_FILES = tuple(BISECT_LIMITS)
BISECT_REPORT = "bisect.json"

def staging(out: Path) -> Path:
    """A sibling temp dir the output is built in (diagnostics while measuring, files at the
    end), so a failure never leaves a half-written outdir."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))


def write_outdir(out: Path, files: dict[str, str], stage: Path | None = None) -> None:
    """Write the files into ``stage`` (made here when None), then move them and the stage's
    diagnostics into ``out``."""
    tmp = stage or staging(out)
    try:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if not out.exists():
            os.replace(tmp, out)
            return
        old = out / DIAGNOSTICS
        if old.is_symlink():
            old.unlink()
        elif old.is_dir():
            shutil.rmtree(old)
        for name in [*files, DIAGNOSTICS]:
            if (tmp / name).exists():
                os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
