"""Kernel diffs (``bot/judge/kernels.py``, ``kernelmatch.py``) on real profile processes of
Inductor's C++ kernels (``tests/data/suites/kernels_suite.py``, the ``kernel_profiles``
fixture): which kernel got heavier, which is new, which was split, across index shifts; the
host side; two processes of the same code; and the noise rule."""

from __future__ import annotations

from typing import Any

import pytest

from compilewatch.bot.judge.comparison import KernelDiff, KernelLine
from compilewatch.bot.judge.kernelmatch import match
from compilewatch.bot.judge.kernels import diff
from compilewatch.core.kernels import Kernel, KernelOrigin, KernelProfile

# one test process makes the kernel_profiles fixture and runs every test that reads it
# (scripts/test.sh: --dist loadgroup); the other goes on with the rest
pytestmark = pytest.mark.xdist_group("kernel_profiles")


def _diff(profiles: dict[str, Any], base: str, head: str, **kw: Any) -> KernelDiff:
    b, h = profiles[base], profiles[head]
    assert b.ok and h.ok, (b.error, h.error)
    d = diff(b.kernels, h.kernels, **kw)
    assert d is not None
    return d


def _line(d: KernelDiff, status: str, head: str | None = None) -> KernelLine:
    return next(x for x in d.lines if x.status == status and (head is None or head in x.head))


def test_a_heavier_kernel_comes_first_and_beyond_its_noise(
        kernel_profiles: dict[str, Any]) -> None:
    """``heavier``'s second kernel does 200 times the work under the same name: it is first
    in the diff, matched one to one, and nothing else moved as much."""
    d = _diff(kernel_profiles, "base", "heavier")
    first = d.lines[0]
    assert (first.status, first.base, first.head) == ("same", ["cpp_fused_mul_tanh_1"],
                                                      ["cpp_fused_mul_tanh_1"])
    assert first.beyond_noise and first.delta_us > 10 * abs(d.lines[1].delta_us)
    assert first.head_share > first.base_share and first.head_share > 0.5
    assert first.fuses == ["mul", "tanh"] and first.where[0].startswith("kernels_suite.py:")
    assert [x.status for x in d.lines] == ["same"] * 3
    assert d.host.finding is None  # as many launches a step: not a launch story


def test_a_new_kernel_before_the_others_moves_their_numbers_and_they_still_match(
        kernel_profiles: dict[str, Any]) -> None:
    d = _diff(kernel_profiles, "base", "added")
    got = {(x.status, tuple(x.base), tuple(x.head)) for x in d.lines}
    assert ("same", ("cpp_fused_add_cos_mul_sin_0",), ("cpp_fused_add_cos_mul_sin_1",)) in got
    assert ("same", ("cpp_fused_mul_tanh_1",), ("cpp_fused_mul_tanh_2",)) in got
    assert ("new", (), ("cpp_fused_relu_0",)) in got
    # two calls of aten::mm on head: base's one is the call of the same line, the other new
    same_mm = _line(d, "same", "aten::mm")
    new_mm = _line(d, "new", "aten::mm")
    assert any("y = b @ w" in w for w in same_mm.where)
    assert any("torch.relu(x) @ w" in w for w in new_mm.where)
    assert new_mm.beyond_noise and new_mm.base_us == 0.0
    assert d.host.finding is not None and d.host.finding.startswith(
        "more kernel launches a step: 3 → 5")
    assert not any(x.status in ("gone", "split", "merged", "changed") for x in d.lines)


def test_a_custom_op_between_two_fused_ops_splits_their_kernel(
        kernel_profiles: dict[str, Any]) -> None:
    d = _diff(kernel_profiles, "base", "fenced")
    split = _line(d, "split")
    assert split.base == ["cpp_fused_add_cos_mul_sin_0"]
    assert sorted(split.head) == ["cpp_fused_add_fence_mul_sin_0", "cpp_fused_cos_mul_1"]
    assert split.base_calls == 1.0 and split.head_calls == 2.0
    assert _line(d, "new").head == ["kernels_suite::fence"]
    assert _line(d, "same", "cpp_fused_mul_tanh_2").base == ["cpp_fused_mul_tanh_1"]
    assert d.host.finding is not None
    assert "3 → 5, from 1 kernel split (a lost fusion)" in d.host.finding


def test_a_graph_break_that_splits_a_kernel_is_named_in_the_launches(
        kernel_profiles: dict[str, Any]) -> None:
    d = _diff(kernel_profiles, "base", "broken", launch_bound=True, breaks=(0, 1))
    split = _line(d, "split")
    assert sorted(split.head) == ["cpp_fused_add_mul_sin_0", "cpp_fused_cos_mul_0"]
    assert (d.host.base_graphs, d.host.head_graphs) == (1, 2)
    assert d.host.finding is not None
    assert "3 → 4, from 1 → 2 compiled graphs (a graph break); 1 kernel split (a lost " \
           "fusion)" in d.host.finding
    assert "launch-bound" in d.host.finding
    # graphs called that differ without a break that does (a training step's forward and
    # backward, a graph whose cache is bypassed): counted, never blamed on a break
    quiet = _diff(kernel_profiles, "base", "broken", breaks=(2, 2))
    assert quiet.host.finding is not None and "1 → 2 compiled graphs;" in quiet.host.finding
    assert "graph break" not in quiet.host.finding


def test_a_second_process_of_the_same_code_matches_every_kernel_one_to_one(
        kernel_profiles: dict[str, Any]) -> None:
    """Two profile processes of the same code: each kernel is the same one, and neither the
    launches nor the graphs moved. (Whether a kernel's time moved beyond its noise is the
    GPU's A/A target: on this shared 2-core machine one kernel of an A/A pair once read 48 µs
    in one process and 105 µs in the other, past the band the model's verdict needed;
    docs/measurement.md, "Kernel profiles".)"""
    d = _diff(kernel_profiles, "base", "again")
    assert [(x.status, x.base, x.head) for x in d.lines if x.base != x.head] == []
    assert [x.status for x in d.lines] == ["same"] * 3
    assert d.host.finding is None and d.host.base_launches == d.host.head_launches == 3


def _timed(us: float, spread: float = 0.0) -> Kernel:
    return Kernel(name="triton_poi_fused_add_0", kind="generated", graph="0_forward", calls=20,
                  launches=20, total_us=us * 20, step_us=us, step_spread_us=spread)


def _one(k: Kernel, device_us: float) -> KernelProfile:
    return KernelProfile(activity="cuda", steps=20, device_us=device_us, kernels=[k])


def test_a_kernel_is_beyond_its_noise_only_past_its_spread_the_band_and_the_floor() -> None:
    """The three terms, each deciding once: the kernel's own spread over the calls, the
    band the model's verdict needed of its time, and 0.2% of the step."""
    def line(base: Kernel, head: Kernel, band: float, step: float = 100.0) -> KernelLine:
        d = diff(_one(base, step), _one(head, step), band=band)
        assert d is not None
        return d.lines[0]

    assert line(_timed(50.0), _timed(52.5), band=0.05).beyond_noise is False  # 2.5 < 2.625
    assert line(_timed(50.0), _timed(54.0), band=0.05).beyond_noise is True  # 4 > 2.7
    spread = line(_timed(50.0, spread=9.0), _timed(54.0, spread=9.0), band=0.05)
    assert not spread.beyond_noise and spread.noise_us == 9.0
    floor = line(_timed(1.0), _timed(1.5), band=0.05, step=5000.0)  # +50%, a 5 ms step
    assert not floor.beyond_noise and floor.noise_us == 10.0


def _kernel(name: str, us: float, *ops: str, line: int = 1, kind: str = "generated"
            ) -> Kernel:
    return Kernel(name=name, kind=kind, graph="0_forward", calls=10, launches=10,  # type: ignore[arg-type]
                  total_us=us * 10, step_us=us,
                  origins=[KernelOrigin(node=op, aten=f"aten.{op}", location=f"m.py:{line}",
                                        code=f"line {line}") for op in ops])


def test_kernels_of_one_name_are_paired_by_their_origins_not_their_order() -> None:
    """Two kernels fusing the same ops on base; head adds a third like them in front: each
    base kernel pairs with the head kernel of its own lines, and the new one is new."""
    base = [_kernel("triton_poi_fused_add_0", 5, "add", line=10),
            _kernel("triton_poi_fused_add_1", 5, "add", line=20)]
    head = [_kernel("triton_poi_fused_add_0", 5, "add", line=5),
            _kernel("triton_poi_fused_add_1", 5, "add", line=10),
            _kernel("triton_poi_fused_add_2", 5, "add", line=20)]
    got = {(m.status, tuple(u.kernel.name for u in m.base), tuple(u.kernel.name for u in m.head))
           for m in match(base, head)}
    assert got == {("same", ("triton_poi_fused_add_0",), ("triton_poi_fused_add_1",)),
                   ("same", ("triton_poi_fused_add_1",), ("triton_poi_fused_add_2",)),
                   ("new", (), ("triton_poi_fused_add_0",))}


def test_kernels_merged_into_one_and_one_that_fuses_another_op() -> None:
    base = [_kernel("triton_poi_fused_add_0", 5, "add", line=1),
            _kernel("triton_poi_fused_mul_1", 5, "mul", line=2),
            _kernel("triton_red_fused_sum_2", 9, "sum", "exp", line=3)]
    head = [_kernel("triton_poi_fused_add_mul_0", 6, "add", "mul", line=1),
            _kernel("triton_red_fused_exp_sub_sum_1", 12, "sum", "exp", "sub", line=3)]
    head[0].origins[1:] = [KernelOrigin(node="mul", aten="aten.mul", location="m.py:2",
                                        code="line 2")]
    got = {(m.status, len(m.base), len(m.head)) for m in match(base, head)}
    assert got == {("merged", 2, 1), ("changed", 1, 1)}


def test_no_diff_without_both_profiles_and_a_failed_one_says_why() -> None:
    ok = KernelProfile(activity="cpu", steps=1)
    assert diff(None, ok) is None and diff(ok, None) is None
    failed = KernelProfile(activity="cpu", unknown_reason="the profiler crashed")
    d = diff(ok, failed)
    assert d is not None and d.lines == []
    assert d.notes == ["head's kernel profile: the profiler crashed"]


def test_one_more_call_of_a_kernel_base_has_is_that_kernel_not_a_new_one() -> None:
    """Six layers call cuDNN's attention backward from one line; head's seventh layer calls it
    once more: one line, six instances on base and seven on head, its time the sum (the H100
    profile of the 7-layer PR had read the seventh "new")."""
    def attn(i: int, us: float) -> Kernel:
        return _kernel(f"aten::_cudnn_attention_backward_{i}", us, "attn_bwd", line=30,
                       kind="extern").model_copy(update={
                           "name": "aten::_cudnn_attention_backward", "shapes": "[8,12,512,64]"})

    base = [attn(i, 100.0) for i in range(6)]
    head = [attn(i, 100.0) for i in range(7)]
    [m] = match(base, head)
    assert (m.status, len(m.base), len(m.head)) == ("same", 6, 7)
    d = diff(KernelProfile(activity="cuda", steps=10, device_us=600.0, kernels=base),
             KernelProfile(activity="cuda", steps=10, device_us=700.0, kernels=head), band=0.05)
    assert d is not None and [x.status for x in d.lines] == ["same"]
    assert d.lines[0].head_us - d.lines[0].base_us == 100.0
    # a leftover from another line of the user's code stays new
    other = [*head, _kernel("aten::_cudnn_attention_backward", 100.0, "attn_bwd", line=99,
                            kind="extern").model_copy(update={"shapes": "[8,12,512,64]"})]
    assert sorted(m.status for m in match(base, other)) == ["new", "same"]


def test_a_product_whose_origins_all_moved_is_the_same_op_changed() -> None:
    """Activation checkpointing recomputes an ``aten::mm`` from another graph: the same op and
    shapes, other origins; read before as one "gone" and one "new"."""
    mm = _kernel("aten::mm", 437.0, "mm", line=12, kind="extern").model_copy(
        update={"shapes": "[4096,768],[768,3072]"})
    moved = _kernel("aten::mm", 438.0, "mm_recompute", line=40, kind="extern").model_copy(
        update={"shapes": "[4096,768],[768,3072]", "graph": "1_backward"})
    assert [(m.status, len(m.base), len(m.head)) for m in match([mm], [moved])] == [
        ("changed", 1, 1)]
    other = moved.model_copy(update={"shapes": "[1,1],[1,1]"})
    assert sorted(m.status for m in match([mm], [other])) == ["gone", "new"]
