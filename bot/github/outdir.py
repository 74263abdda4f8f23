"""The output directory ``compilewatch pr`` writes and ``compilewatch post`` reads: its files and
the size cap of each. One definition, so ``pr`` refuses early what ``post`` would refuse.

``diagnostics/`` (traces, tlparse reports, code diffs) is for people: ``post`` checks that it is a
real directory and never reads inside it."""

from __future__ import annotations

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
