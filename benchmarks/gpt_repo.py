"""A model repository the built-in suites do not hold: a nanoGPT-style GPT in a package of its
own (``nanogpt/``), with its suite file and ``[tool.compilewatch]``, and a branch per change a
training PR makes (docs/verdict-quality.md, "Training against a plain loop").

    python benchmarks/gpt_repo.py /tmp/gpt        # writes /tmp/gpt/repo

On a GPU the model is 6 layers x 768, 12 heads, batch 8 x 512 tokens, trained under bf16
autocast with Adam (``foreach``, ``capturable``) on its own cross-entropy; on a CPU it is small.
Branches off ``main``:

- ``aa``: a comment only (the same code: nothing may be found);
- ``ckpt``: every block under activation checkpointing (training only);
- ``layers7``: seven layers instead of six;
- ``manual``: attention written out (matmul, mask, softmax, matmul) instead of
  ``scaled_dot_product_attention``;
- ``heavy_loss``: the loss adds a z-loss on the logits (more GPU work in the loss only).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _repo import branch, make_repo

CONFIG = '''"""What a change to the model sets (one place, so a branch changes one line)."""

ATTENTION = "{attention}"  # "flash": scaled_dot_product_attention; "manual": written out
N_LAYER = {n_layer}
CHECKPOINT = {checkpoint}  # every block under torch.utils.checkpoint when training
Z_LOSS = {z_loss}  # weight of a z-loss on the logits (0: plain cross-entropy)
'''

MODEL = '''"""A GPT in the style of nanoGPT: token and position embeddings, pre-norm blocks of
causal self-attention and an MLP, a tied head, its own cross-entropy."""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from nanogpt import config


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, block: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if config.ATTENTION == "flash":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, block: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, block)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, d: int, heads: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads, block) for _ in range(config.N_LAYER))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            if config.CHECKPOINT and self.training:
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        logits = self.head(self.ln(x))
        flat = logits.view(-1, logits.size(-1)).float()
        loss = F.cross_entropy(flat, targets.view(-1))
        if config.Z_LOSS:
            loss = loss + config.Z_LOSS * torch.logsumexp(flat, dim=-1).pow(2).mean()
        return logits, loss
'''

SUITE = '''"""The repository's models, as compilewatch measures them."""

import torch
from compilewatch.suites import BuildContext, model

from nanogpt.model import GPT


def own_loss(out, inputs):
    return out[1]


@model("gpt", loss=own_loss, tolerances={"amp": (5e-2, 5e-2), "float32": (1e-3, 1e-3)})
def gpt(ctx: BuildContext):
    vocab, block, d, heads, batch = ((50304, 512, 768, 12, 8) if ctx.large
                                     else (256, 32, 64, 4, 2))
    torch.manual_seed(0)
    net = GPT(vocab, block, d, heads)
    idx = torch.randint(0, vocab, (batch, block))
    return net, (idx, torch.roll(idx, -1, dims=1))
'''

PYPROJECT = '''[project]
name = "nanogpt"
version = "0.1.0"

[tool.compilewatch]
suites = ["benchmarks/models.py"]
tasks = ["inference", "training"]
'''

BASE = {"attention": "flash", "n_layer": 6, "checkpoint": False, "z_loss": 0.0}
CHANGES = {
    "ckpt": {"checkpoint": True},
    "layers7": {"n_layer": 7},
    "manual": {"attention": "manual"},
    "heavy_loss": {"z_loss": 1e-4},
}


def files(**change: object) -> dict[str, str]:
    """The repository's files with ``change`` applied to the base configuration."""
    return {"nanogpt/__init__.py": "", "nanogpt/config.py": CONFIG.format(**{**BASE, **change}),
            "nanogpt/model.py": MODEL, "benchmarks/models.py": SUITE,
            "pyproject.toml": PYPROJECT}


def make_gpt_repo(root: Path) -> Path:
    """``main`` holds the base model; a branch per change, and ``aa`` with a comment only."""
    repo = make_repo(root, files(), {"nanogpt/model.py": MODEL + "# the same code\n"})
    import subprocess

    subprocess.run(["git", "-C", str(repo), "branch", "-qm", "head", "aa"], check=True)
    for name, change in CHANGES.items():
        branch(repo, name, {"nanogpt/config.py": files(**change)["nanogpt/config.py"]})
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="an empty folder: the repository is ROOT/repo")
    print(make_gpt_repo(parser.parse_args().root))


if __name__ == "__main__":
    main()
