"""Copying a model's output keeps every part the accuracy check walks, in its own types."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

import pytest
import torch

from compilewatch.compiler import outputs


@dataclasses.dataclass
class Pred:
    logits: torch.Tensor
    score: float
    extra: Any = None


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    hidden: torch.Tensor


class Pair(NamedTuple):
    logits: torch.Tensor
    steps: int


def _model_output(t: torch.Tensor) -> Any:
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=t, hidden_states=(t,))


# kind -> an output holding the tensor, and how to reach the tensor again
KINDS = {
    "dataclass": (lambda t: Pred(t, 1.5, [t]), lambda o: o.extra[0]),
    "frozen dataclass with slots": (lambda t: Frozen(t), lambda o: o.hidden),
    "named tuple": (lambda t: Pair(t, 2), lambda o: o.logits),
    "OrderedDict": (lambda t: collections.OrderedDict(a=t), lambda o: o["a"]),
    "defaultdict": (lambda t: collections.defaultdict(list, a=t), lambda o: o["a"]),
    "HF ModelOutput": (_model_output, lambda o: o.hidden_states[0]),
    "torch.return_types": (lambda t: torch.max(t.reshape(1, 3), dim=0), lambda o: o.values),
    "list in a tuple": (lambda t: ([t], "s"), lambda o: o[0][0]),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_copy_keeps_the_types_and_owns_its_tensors(kind: str) -> None:
    make, reach = KINDS[kind]
    t = torch.ones(3)
    out = make(t)
    copied = outputs.copy_tensors(out)
    assert type(copied) is type(out)
    t.add_(1)  # a CUDA-graph replay would overwrite its output buffer like this
    assert torch.equal(reach(copied), torch.ones(3)), kind
    assert outputs.pair(copied, make(torch.ones(3))).problem is None


def test_a_copy_walks_into_the_same_parts_as_the_comparison() -> None:
    t = torch.ones(3)
    out = {"a": [Pred(t, 0.5), Pair(t, 1)], "b": _model_output(t)}
    walk = outputs.pair(outputs.copy_tensors(out), out)
    assert walk.problem is None
    assert [leaf.path for leaf in walk.leaves] == [
        "out['a'][0].logits", "out['a'][0].score", "out['a'][1].logits",
        "out['b'].last_hidden_state", "out['b'].hidden_states[0]"]


def test_what_cannot_be_walked_is_returned_as_it_is() -> None:
    class Opaque:
        pass

    thing = Opaque()
    assert outputs.copy_tensors(thing) is thing
    cycle: list[Any] = []
    cycle.append(cycle)
    assert outputs.copy_tensors(cycle)  # no RecursionError
