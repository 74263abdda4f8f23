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
