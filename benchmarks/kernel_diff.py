"""Does the kernel diff name the kernel that changed? ``compilewatch pr`` on a repository whose
head changes one kernel of a transformer block in a known way. Numbers in docs/measurement.md
("Kernel profiles"); rerun when the profile process or the matching changes.

    python benchmarks/kernel_diff.py --device cuda --repeats 10 --out kd/

Scenarios (``--scenario``, repeatable; default all), each a head commit of ``kernels.py``:

- ``heavier``: one pointwise op of the block made costlier (the MLP's GELU followed by
  ``EXTRA`` tanh steps, fused into its kernel). Target: the verdict flags the block (the
  profile process runs because compiled time changed, no ``--profile-kernels``) and the diff's
  first line is that kernel, beyond its noise, in at least 9 of 10 repeats. Also measured
  here: the profile processes' wall time against the pr's (target: at most 10% more).
- ``split``: a custom op (opaque to Inductor) between the GELU and the residual add that
  Inductor fused: the kernel is named "split", and the finding names the lost fusion.
- ``aa``: head changes a README only, every model timed and profiled (``--measure-all
  --profile-kernels``): no kernel beyond its noise.

It prints a markdown table per scenario, and writes each repeat's comparison under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _repo import make_repo

EXTRA = 8  # tanh steps fused after the GELU in ``heavier``

KERNELS = '''"""A transformer block whose head commit changes one kernel (kernel_diff.py)."""
import torch
from torch import nn

from compilewatch.suites import BuildContext, model

SUITE_NAME = "kernels"
HEAD = {head!r}


@torch.library.custom_op("kernels::fence", mutates_args=())
def fence(a: torch.Tensor) -> torch.Tensor:
    return a.clone()


@fence.register_fake
def _(a: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(a)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                       v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        h = nn.functional.gelu(self.up(self.ln2(x)))
        if HEAD == "heavier":
            for _ in range({extra}):
                h = torch.tanh(h) * 1.5
        if HEAD == "split":
            h = fence(h)
        return x + self.down(h * 0.5)


@model("block", tasks=("inference",), tags=("transformer",))
def block(ctx: BuildContext):
    b, t, d = (16, 512, 1024) if ctx.large else (2, 32, 64)
    return Block(d, 8 if ctx.large else 2).to(ctx.device), (torch.randn(b, t, d),)
'''
PYPROJECT = '[project]\nname = "kernel-diff"\n\n[tool.compilewatch]\nsuites = ["kernels.py"]\n'


def repository(root: Path, scenario: str) -> Path:
    """``main``: the block as it is; branch ``head``: the scenario's change."""
    files = {"pyproject.toml": PYPROJECT, "README.md": "kernel diff benchmark\n",
             "kernels.py": KERNELS.format(head="", extra=EXTRA)}
    head = {"README.md": "kernel diff benchmark, head\n"} if scenario == "aa" else \
        {"kernels.py": KERNELS.format(head=scenario, extra=EXTRA)}
    return make_repo(root, files, head)


def run_pr(repo: Path, out: Path, device: str, extra: list[str]) -> tuple[dict[str, Any], float]:
    """One ``pr``: its comparison and its wall time."""
    cmd = [sys.executable, "-m", "compilewatch.bot.cli", "pr", "--repo", str(repo), "--base",
           "main", "--head", "head", "--device", device, "--no-db", "--out", str(out), *extra]
    t0 = time.monotonic()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
    took = time.monotonic() - t0
    if rc not in (0, 1):
        raise SystemExit(f"pr failed ({rc}); its log is above")
    return json.loads((out / "comparison.json").read_text()), took


def _row(comparison: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in comparison["rows"] if r["model"] == "block"), None)


def heavier_first(comparison: dict[str, Any]) -> tuple[bool, str]:
    """Whether the diff's first line is the kernel that fuses the added tanh, beyond noise."""
    row = _row(comparison)
    if row is None or row.get("kernels") is None or not row["kernels"]["lines"]:
        verdict = row["verdict"] if row else "absent"
        return False, f"no kernel diff (verdict {verdict}: no profile process)"
    first = row["kernels"]["lines"][0]
    ok = "tanh" in first["fuses"] and first["beyond_noise"] and \
        first["head_us"] > first["base_us"]
    change = first["head_us"] - first["base_us"]
    return ok, f"{first['status']} {' + '.join(first['head'])} {change:+.1f} us"


def split_named(comparison: dict[str, Any]) -> tuple[bool, str]:
    """Whether the GELU's kernel is named split, and the finding names the lost fusion."""
    row = _row(comparison)
    k = row.get("kernels") if row else None
    if k is None:
        return False, "no kernel diff"
    split = [x for x in k["lines"] if x["status"] == "split"]
    finding = k["host"]["finding"] or ""
    return bool(split) and "lost fusion" in finding, finding or "no finding"


def beyond_noise(comparison: dict[str, Any]) -> tuple[int, int]:
    """(kernel lines beyond their noise, lines) over every row's diff."""
    lines = [x for r in comparison["rows"] if r.get("kernels") for x in r["kernels"]["lines"]]
    return sum(x["beyond_noise"] for x in lines), len(lines)


def profile_seconds(out: Path) -> float:
    """The profile processes' wall time, both sides."""
    total = 0.0
    for side in ("base", "head"):
        for r in json.loads((out / f"{side}.json").read_text())["results"]:
            if r.get("kernels") and r["kernels"].get("process_s"):
                total += r["kernels"]["process_s"]
    return total


def scenario_rows(name: str, repo: Path, out: Path, device: str, repeats: int
                  ) -> list[str]:
    extra = {"heavier": [], "split": ["--profile-kernels"],
             "aa": ["--measure-all", "--profile-kernels"]}[name]
    rows = []
    for i in range(repeats):
        where = out / f"{name}-{i + 1}"
        where.mkdir(parents=True, exist_ok=True)
        comparison, wall = run_pr(repo, where, device, extra)
        profiled = profile_seconds(where)
        if name == "heavier":
            ok, said = heavier_first(comparison)
        elif name == "split":
            ok, said = split_named(comparison)
        else:
            n, total = beyond_noise(comparison)
            ok, said = n == 0, f"{n} of {total} kernel lines beyond noise"
        share = profiled / (wall - profiled) if wall > profiled else float("nan")
        rows.append(f"| {name} | {i + 1} | {'yes' if ok else 'no'} | {said} | {wall:.0f} s | "
                    f"{profiled:.0f} s ({share:+.1%}) |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=10, help="repeats of ``heavier``")
    ap.add_argument("--scenario", action="append", choices=("heavier", "split", "aa"))
    ap.add_argument("--out", type=Path, default=Path("kernel-diff-out"))
    args = ap.parse_args()
    print("| scenario | repeat | target met | first line / finding | pr wall | "
          "profile processes (of the rest) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.scenario or ("heavier", "split", "aa"):
        with tempfile.TemporaryDirectory(prefix=f"kernel-diff-{name}-") as tmp:
            repo = repository(Path(tmp), name)
            repeats = args.repeats if name == "heavier" else max(1, min(3, args.repeats))
            for line in scenario_rows(name, repo, args.out, args.device, repeats):
                print(line, flush=True)


if __name__ == "__main__":
    main()
