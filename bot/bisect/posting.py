"""``compilewatch post`` of a bisection's output folder: its report as a comment on a pull
request or an issue, one comment per bisection (found by its marker), edited in place.

The folder comes from a measuring job, so it is data: only regular files of ``bisect``'s own
names, each within its size, and ``bisect.json`` alone is read, decoded within the results
file's structural limits and validated strictly; the comment is rendered again here, and the
``bisect.md`` the job wrote is never posted.
"""

from __future__ import annotations

import stat
from pathlib import Path

from pydantic import ValidationError

from compilewatch.bot.github.outdir import BISECT_LIMITS, BISECT_REPORT
from compilewatch.bot.judge.bisection import BisectReport
from compilewatch.bot.render import bisect as rendering
from compilewatch.bot.render.neutralise import neutralise
from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import decode_results


def is_bisect_dir(outdir: Path) -> bool:
    """A folder ``compilewatch bisect`` wrote (it holds ``bisect.json``), not a ``pr``'s."""
    p = Path(outdir)
    return p.is_dir() and not p.is_symlink() and (p / BISECT_REPORT).exists()


def load_bisect_dir(outdir: Path) -> BisectReport:
    """Check the folder's entries and sizes, then read ``bisect.json`` strictly."""
    unexpected, too_big = [], []
    for entry in sorted(Path(outdir).iterdir()):
        st = entry.lstat()
        limit = BISECT_LIMITS.get(entry.name)
        if limit is None or not stat.S_ISREG(st.st_mode):
            unexpected.append(entry.name)
        elif st.st_size > limit:
            too_big.append(f"{entry.name} ({st.st_size} bytes > {limit})")
    if unexpected:
        raise ResultsFileError(f"{outdir}: unexpected entries (a bisection's folder holds "
                               f"only regular files named {', '.join(BISECT_LIMITS)}): "
                               f"{', '.join(map(repr, unexpected[:10]))}")
    if too_big:
        raise ResultsFileError(f"{outdir}: over the size limit: {', '.join(too_big)}")
    path = Path(outdir) / BISECT_REPORT
    try:
        data = decode_results(path.read_bytes())
        return BisectReport.model_validate(data)
    except ResultsFileError as e:
        raise ResultsFileError(f"{path}: {e}") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])[:200]
        raise ResultsFileError(f"{path}: not a bisection's report ({e.error_count()} "
                               f"error(s); {where}: {first['msg'][:200]})") from None


def render_comment(report: BisectReport) -> tuple[str, str, str]:
    """(body, one-line title, marker) as ``post`` publishes them: rendered by this code,
    every ping and link neutralised but the marker."""
    mark = rendering.marker(report)
    body = neutralise(rendering.render_markdown(report), keep=mark)
    return body, neutralise(rendering.headline(report)), mark
