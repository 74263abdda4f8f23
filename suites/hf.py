"""The ``hf`` suite: Hugging Face transformers built from configs with random weights.

Nothing is downloaded: every model is constructed from a config, on its device: random
initialisation of a real-sized model on the CPU took 5-13 s of every GPU worker process (a
LLaMA-style decoder of 0.5 B parameters the most). Small configs on CPU, real sizes on GPU
runners. Needs the ``transformers`` package; without it each model is recorded as skipped
(package not installed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from compilewatch.suites.registry import BuildContext, model

SUITE_NAME = "hf"
REQUIRES = ("transformers",)


class LogitsOnly(nn.Module):
    """Return the logits tensor, so eager and compiled outputs compare as plain tensors. For
    training, the model's whole output with its own loss: the input ids are its labels too
    (HF shifts them for a causal LM; a masked LM predicts every token)."""

    def __init__(self, inner: nn.Module, train: bool = False) -> None:
        super().__init__()
        self.inner, self.train_ = inner, train

    def forward(self, ids: torch.Tensor) -> Any:
        if self.train_:
            return self.inner(input_ids=ids, labels=ids)
        return self.inner(input_ids=ids).logits


def _ids(ctx: BuildContext, vocab: int, batch: int, seq: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (batch, seq), generator=gen).to(ctx.device)


def _on(ctx: BuildContext, make: Callable[[], nn.Module]) -> nn.Module:
    """Build the model's parameters where it runs (initialised there, not copied there)."""
    with torch.device(ctx.device):
        return make().eval()


def _wrap(inner: nn.Module, ctx: BuildContext) -> nn.Module:
    return LogitsOnly(inner, train=ctx.task == "training").to(ctx.device)


@model("gpt2", requires=REQUIRES, tags=("decoder",))
def gpt2(ctx: BuildContext):
    from transformers import GPT2Config, GPT2LMHeadModel

    if ctx.large:
        cfg, (b, s) = GPT2Config(), (4, 512)
    else:
        cfg, (b, s) = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1024,
                                 n_positions=128, bos_token_id=0, eos_token_id=0), (2, 32)
    return _wrap(_on(ctx, lambda: GPT2LMHeadModel(cfg)), ctx), (_ids(ctx, cfg.vocab_size, b, s),)


@model("bert", requires=REQUIRES, tags=("encoder",))
def bert(ctx: BuildContext):
    from transformers import BertConfig, BertForMaskedLM

    if ctx.large:
        cfg, (b, s) = BertConfig(), (8, 512)
    else:
        cfg, (b, s) = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                 intermediate_size=128, vocab_size=1024), (2, 32)
    return _wrap(_on(ctx, lambda: BertForMaskedLM(cfg)), ctx), (_ids(ctx, cfg.vocab_size, b, s),)


class T5Logits(nn.Module):
    """T5 needs decoder ids as well: the input itself. For training, the input as labels too
    and the whole output with its loss."""

    def __init__(self, inner: nn.Module, train: bool = False) -> None:
        super().__init__()
        self.inner, self.train_ = inner, train

    def forward(self, ids: torch.Tensor) -> Any:
        if self.train_:  # the decoder's ids given, not derived from the labels: transformers
            # releases without a config's decoder_start_token_id cannot derive them
            return self.inner(input_ids=ids, decoder_input_ids=ids, labels=ids)
        return self.inner(input_ids=ids, decoder_input_ids=ids).logits


@model("t5", requires=REQUIRES, tags=("encoder-decoder",))
def t5(ctx: BuildContext):
    from transformers import T5Config, T5ForConditionalGeneration

    if ctx.large:
        cfg, (b, s) = T5Config(), (4, 256)
    else:
        cfg, (b, s) = T5Config(num_layers=2, d_model=64, d_ff=128, num_heads=4, d_kv=16,
                               vocab_size=1024), (2, 32)
    inner = _on(ctx, lambda: T5ForConditionalGeneration(cfg))
    return (T5Logits(inner, train=ctx.task == "training").to(ctx.device),
            (_ids(ctx, cfg.vocab_size, b, s),))


@model("llama", requires=REQUIRES, tags=("decoder",))
def llama(ctx: BuildContext):
    from transformers import LlamaConfig, LlamaForCausalLM

    if ctx.large:
        cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=8, vocab_size=32000)
        b, s = 4, 512
    else:
        cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, vocab_size=1024)
        b, s = 2, 32
    return _wrap(_on(ctx, lambda: LlamaForCausalLM(cfg)), ctx), (_ids(ctx, cfg.vocab_size, b, s),)
