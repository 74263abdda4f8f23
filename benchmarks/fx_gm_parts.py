"""What makes up the FX key's ``gm`` component, per process: when two processes of the same code
record different keys there, is it the graph Inductor was handed, or something beside it?
Findings in docs/performance.md.

    python benchmarks/fx_gm_parts.py --out parts/ -- run --suite hf --model gpt2 \\
        --task inference --device cuda --cold-processes 8 --processes 0 --no-db --out r/

It runs ``compilewatch ARGS`` with a ``sitecustomize`` that wraps
``FxGraphCachePickler.get_hash``: every GraphModule torch hashes for a key (the Dynamo graph
for the AOTAutograd key, the graph after AOTAutograd for the FX key) is written to ``--out``
as JSON: its full hash, each pickled part's hash (``_code``, ``_buffers`` entry by entry,
``meta``, ...) and its code. Every worker inherits the hook through ``PYTHONPATH`` (a
worker's allow-listed environment keeps ``PYTHON*`` and ``TORCH_*``). Then it prints the
graphs grouped by code, the parts that differ between dumps of one code, each process's graphs
in order, and a diff between graphs of nearly the same length.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = "TORCH_FX_GM_PARTS"  # TORCH_*: a worker's environment keeps it

HOOK = '''import os

if os.environ.get("TORCH_FX_GM_PARTS"):
    try:
        import _fx_gm_parts_hook  # noqa: F401
    except Exception as e:  # never stop the interpreter it starts in
        print(f"fx_gm_parts: {e!r}")
'''

HOOK_MODULE = '''import hashlib
import itertools
import json
import os
import sys
import time

import torch
from torch._inductor import codecache

_orig = codecache.FxGraphCachePickler.get_hash
_n = itertools.count()
OUT = os.environ["TORCH_FX_GM_PARTS"]


def _part(gm, value):
    try:
        return _orig(codecache.FxGraphCachePickler(gm), value)
    except Exception as e:
        return f"error: {type(e).__name__}: {e}"[:200]


def _describe(value):
    if isinstance(value, torch.Tensor):
        try:
            first = value.detach().cpu().flatten()[:8].tolist()
        except Exception:
            first = "?"
        return f"{value.dtype} {tuple(value.shape)} {value.device} first={first}"
    return repr(value)[:300]


def _dump(gm, full):
    _fn, args = gm.__reduce__()
    data = args[0]
    out = {"pid": os.getpid(), "cwd": os.getcwd(), "t": time.time(), "full": full,
           "parts": {}, "entries": {}, "code": data.get("_code", ""),
           "imports": _part(gm, args[1:])}
    for k, v in data.items():
        out["parts"][k] = _part(gm, v)
        if isinstance(v, dict):
            out["entries"][k] = {str(e): [_part(gm, x), _describe(x)] for e, x in v.items()}
    out["code_sha"] = hashlib.sha256(out["code"].encode()).hexdigest()[:16]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{os.getpid()}-{next(_n)}.json"), "w") as f:
        json.dump(out, f)


def get_hash(self, obj):
    h = _orig(self, obj)
    if isinstance(obj, torch.fx.GraphModule):
        try:
            _dump(obj, h)
        except Exception as e:
            print(f"fx_gm_parts: {e!r}", file=sys.stderr)
    return h


codecache.FxGraphCachePickler.get_hash = get_hash
'''


def analyse(folder: Path, diff_lines: int = 100) -> str:
    """The dumps in ``folder`` as a report: graphs by code, differing parts, per process."""
    dumps = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    lines = [f"{len(dumps)} graphs hashed"]
    by: dict[str, list[dict]] = collections.defaultdict(list)
    for d in dumps:
        by[d["code_sha"]].append(d)
    for sha, ds in by.items():
        fulls = {d["full"] for d in ds}
        lines.append(f"code {sha}: {len(ds)} graphs, {len(ds[0]['code'].splitlines())} lines, "
                     f"{len(fulls)} distinct gm hashes")
        if len(fulls) < 2:
            continue
        for k in sorted(set().union(*(d["parts"] for d in ds))):
            if len({d["parts"].get(k) for d in ds}) < 2:
                continue
            lines.append(f"  part {k} differs")
            for e in sorted(set().union(*(d["entries"].get(k, {}) for d in ds))):
                seen = {d["entries"].get(k, {}).get(e, [None, ""])[0] for d in ds}
                if len(seen) > 1:
                    descs = sorted({d["entries"].get(k, {}).get(e, [None, ""])[1] for d in ds})
                    lines.append(f"    {e}: {descs[:3]}")
    lines.append("per process (its working directory: code/lines/gm hash, in order)")
    per: dict[tuple[int, str], list[str]] = collections.defaultdict(list)
    for d in sorted(dumps, key=lambda d: d["t"]):
        per[(d["pid"], os.path.basename(d["cwd"]))].append(
            f"{d['code_sha'][:6]}/{len(d['code'].splitlines())}/{d['full'][:8]}")
    for (pid, cwd), seq in sorted(per.items(), key=lambda kv: kv[0][1]):
        lines.append(f"  {cwd} (pid {pid}): {' '.join(seq)}")
    shas = list(by)
    for i, a in enumerate(shas):
        for b in shas[i + 1:]:
            la, lb = (by[x][0]["code"].splitlines() for x in (a, b))
            if abs(len(la) - len(lb)) <= 20:  # the same graph traced two ways, not two graphs
                diff = list(difflib.unified_diff(la, lb, a, b, n=1, lineterm=""))
                lines.append(f"diff {a} {b} ({len(diff)} lines)")
                lines += diff[:diff_lines]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="Where the dumps go.")
    ap.add_argument("--analyse-only", action="store_true",
                    help="Report on the dumps already in --out; run nothing.")
    ap.add_argument("args", nargs="*", help="`compilewatch` arguments (after --).")
    args = ap.parse_args()
    if not args.analyse_only:
        if not args.args:
            ap.error("name the compilewatch command to run after --")
        with tempfile.TemporaryDirectory(prefix="fx-gm-parts-") as hook:
            Path(hook, "sitecustomize.py").write_text(HOOK)
            Path(hook, "_fx_gm_parts_hook.py").write_text(HOOK_MODULE)
            env = {**os.environ, ENV: str(args.out.resolve()),
                   "PYTHONPATH": os.pathsep.join(
                       p for p in (hook, os.environ.get("PYTHONPATH")) if p)}
            rc = subprocess.run([sys.executable, "-m", "compilewatch.bot.cli", *args.args],
                                env=env).returncode
        if rc not in (0, 1):
            raise SystemExit(f"compilewatch failed ({rc}); its log is above")
    if not args.out.is_dir():
        raise SystemExit(f"no dumps in {args.out}")
    print(analyse(args.out))


if __name__ == "__main__":
    main()
