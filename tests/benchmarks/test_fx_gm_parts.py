"""benchmarks/fx_gm_parts.py: its hook dumps every GraphModule torch hashes for a cache key, in
any process that inherits it, and its report names the part two dumps of one code differ in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.benchmark_scripts import load

parts = load("fx_gm_parts")

HASH_A_GRAPH = """
import torch
from torch._inductor.codecache import FxGraphCachePickler

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.full((3,), float(__import__("sys").argv[1])))

    def forward(self, x):
        return x + self.c

gm = torch.fx.symbolic_trace(M())
FxGraphCachePickler(gm).get_hash(gm)
"""


def _hash_in_a_child(hook: Path, out: Path, value: str) -> None:
    env = {**os.environ, parts.ENV: str(out),
           "PYTHONPATH": os.pathsep.join([str(hook), *sys.path])}
    subprocess.run([sys.executable, "-c", HASH_A_GRAPH, value], env=env, check=True,
                   timeout=300)


def test_the_hook_dumps_each_hashed_graph_and_the_report_names_the_differing_buffer(
        tmp_path: Path):
    hook, out = tmp_path / "hook", tmp_path / "out"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(parts.HOOK)
    (hook / "_fx_gm_parts_hook.py").write_text(parts.HOOK_MODULE)
    _hash_in_a_child(hook, out, "1.0")
    _hash_in_a_child(hook, out, "2.0")
    dumps = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(dumps) == 2 and dumps[0]["pid"] != dumps[1]["pid"]
    assert dumps[0]["code_sha"] == dumps[1]["code_sha"]  # the same code ...
    assert dumps[0]["full"] != dumps[1]["full"]  # ... and a constant's values apart
    report = parts.analyse(out)
    assert "2 distinct gm hashes" in report
    assert "part _buffers differs" in report
    assert "first=[1.0, 1.0, 1.0]" in report and "first=[2.0, 2.0, 2.0]" in report
    assert "part _code differs" not in report


def test_graphs_of_nearly_one_length_are_diffed(tmp_path: Path):
    for i, code in enumerate(["a = x + 1\nreturn a\n", "a = x + 1\nb = a * 2\nreturn b\n"]):
        (tmp_path / f"{i}-0.json").write_text(json.dumps({
            "pid": 10 + i, "cwd": f"/tmp/run/base-m-cold{i + 1}", "t": i, "full": f"h{i}",
            "parts": {"_code": f"c{i}"}, "entries": {}, "code": code, "imports": "i",
            "code_sha": f"sha{i}"}))
    report = parts.analyse(tmp_path)
    assert "+b = a * 2" in report
    assert "base-m-cold1 (pid 10): sha0/2/h0" in report
