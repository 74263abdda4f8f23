"""Parsing torch's cache-key debug lines into per-component hashes."""

from compilewatch.compiler.probes import parse_debug_lines

LINES = [
    "[abc123] gm: <lambda>()\n    mm = torch.ops.aten.mm.default(arg0_1, arg1_1)",
    "[def456] example_inputs[0]: TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 16]), "
    "stride=(16, 1), device=device(type='cpu'), layout=torch.strided)",
    "[ghi789] inductor_config[max_autotune]: False",
    "[jkl000] torch_version: \x00\xff binary",
    "not a component line",
]


def test_components_and_readable_values():
    comps, values = parse_debug_lines(LINES)
    assert comps == {"gm": "abc123", "example_inputs[0]": "def456",
                     "inductor_config[max_autotune]": "ghi789", "torch_version": "jkl000"}
    assert values == {"example_inputs[0]": "float32[8, 16] stride=(16, 1) cpu"}


def test_lookup_verdict_beats_the_counter_window():
    """A miss followed, in the same window, by another graph's AOT-path hit stays a miss."""
    from torch._dynamo.utils import counters

    from compilewatch.compiler.probes import CompileProbe, KeyEvent, counters_now

    counters.clear()
    probe = CompileProbe()
    probe.events.append(KeyEvent("fx", "keyA", {}, {}, counters_now()))
    counters["inductor"]["fxgraph_cache_miss"] += 1
    counters["inductor"]["fxgraph_cache_hit"] += 1  # loaded for another graph, no key event
    probe.resolve_states()
    assert probe.events[0].state == "hit"  # what the window alone concludes
    probe.fx_states["keyA"] = "miss"
    probe.resolve_states()
    assert probe.events[0].state == "miss"
    counters.clear()
