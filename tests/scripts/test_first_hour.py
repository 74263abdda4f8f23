"""A model repository's first hour with compilewatch, as docs/github.md tells it.

A repository shaped like most model repositories: its package at the root (``nanogpt/``, a
small GPT written here), the suite in ``bench/models.py`` importing it, ``[tool.compilewatch]
suites``. CI checks out the PR's head and installs the package editable (``pip install -e .``,
into a real venv here), then runs ``compilewatch pr``. Head adds a data-dependent branch to
``GPT.forward``. Before each side imported its own checkout, base ran head's installed code and
the comment said nothing had changed; the whole compiler (Inductor, C++ on this CPU) runs here.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.userrepo import git, pip_install, venv

GPT = '''"""A small GPT: token and position embeddings, causal attention blocks, a tied head."""
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 64
    block_size: int = 16
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight)
'''
BRANCH = ("        x = self.ln_f(x)\n",
          "        x = self.ln_f(x)\n"
          "        if x.mean() > 0:  # data-dependent: a graph break\n"
          "            x = x - x.mean()\n")
SUITE = '''import torch

from compilewatch.suites import model
from nanogpt.model import GPT, GPTConfig


@model("gpt")
def gpt():
    cfg = GPTConfig()
    return GPT(cfg), (torch.randint(0, cfg.vocab_size, (2, cfg.block_size)),)
'''
PYPROJECT = '''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "nanogpt"
version = "0.1.0"

[tool.setuptools]
packages = ["nanogpt"]

[tool.compilewatch]
suites = ["bench/models.py"]
'''


def _repository(root: Path) -> str:
    """main, and a PR branch that only changes the package; returns the PR's head commit."""
    (root / "nanogpt").mkdir(parents=True)
    (root / "bench").mkdir()
    (root / "nanogpt" / "__init__.py").write_text("")
    (root / "nanogpt" / "model.py").write_text(GPT)
    (root / "bench" / "models.py").write_text(SUITE)
    (root / "pyproject.toml").write_text(PYPROJECT)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "nanogpt")
    git(root, "checkout", "-qb", "pr")
    path = root / "nanogpt" / "model.py"
    path.write_text(path.read_text().replace(*BRANCH))
    git(root, "commit", "-qam", "normalise the final activations when they drift")
    return git(root, "rev-parse", "HEAD")


@pytest.mark.slow
def test_an_editable_install_of_head_then_pr_finds_heads_new_break(tmp_path: Path) -> None:
    repo = tmp_path / "nanogpt-repo"
    head = _repository(repo)
    python = venv(tmp_path / "venv")
    pip_install(python, repo, editable=True)  # the CI step: pip install -e . at head
    out = tmp_path / "out"
    proc = subprocess.run([str(python), "-m", "compilewatch.bot.cli", "pr", "--base", "main",
                           "--head", head, "--out", str(out), "--no-db", "--rounds", "5",
                           "--block-ms", "5"], cwd=repo, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = GPT.replace(*BRANCH).splitlines().index(BRANCH[1].splitlines()[1]) + 1
    runs = {s: json.loads((out / f"{s}.json").read_text())["results"][0]
            for s in ("base", "head")}
    assert runs["base"]["graph_breaks"] == []
    assert [b["location"] for b in runs["head"]["graph_breaks"]] == [f"nanogpt/model.py:{line}"]
    assert runs["base"]["modules"]["nanogpt"]["where"] == "checkout"
    comparison = json.loads((out / "comparison.json").read_text())
    (row,) = comparison["rows"]
    assert row["verdict"] == "regression" and row["gating"]
    # the comment as it reads (its escapes and word joiners, which stop links, removed)
    comment = (out / "comment.md").read_text().replace("\\", "").replace("\u2060", "")
    # the break gates; on a loaded machine a timing may gate beside it
    assert re.search(r"gating regression: gpt \([^)]*graph breaks 0 → 1", comment), comment[:600]
    assert f"at nanogpt/model.py:{line}" in comment
