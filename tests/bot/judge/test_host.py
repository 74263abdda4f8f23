"""What a host preflight silences: the timings of the unit it found unsteady, never the others.

A matrix of preflight readings (CPU run, GPU run with the CPU, the GPU or both unsteady, a file
whose flag alone says noisy) by kinds of change (a GPU-bound model's compiled time, a
launch-bound model's, a cold compile, peak memory), each change +20-50%: silenced ones say
"too noisy to judge" and never gate, the rest are found.
"""

from __future__ import annotations

from typing import Any

import pytest

from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.host import HostNoise, host_noise, of_check, steady_state_units
from compilewatch.bot.judge.verdicts import compare
from compilewatch.core.schema import Config, HostCheck, RunResults
from tests.factories import model_result, one_loop, run_results

GPU_BOUND = {"processes": 3, "process_spread": 0.007, "spread": 0.01, "launch_bound": False}
LAUNCH_BOUND = {"processes": 3, "process_spread": 0.02, "spread": 0.02, "launch_bound": True}

HOSTS = {
    "cpu run, quiet": HostCheck(cpu_spread=0.1),
    "cpu run, noisy": HostCheck(cpu_spread=0.4, noisy=True),
    "gpu run, quiet": HostCheck(cpu_spread=0.33, gpu_spread=0.018),
    # the H200 preflight that silenced a whole run whose GPU-bound processes agreed within 1%
    "gpu run, cpu noisy": HostCheck(cpu_spread=0.909, gpu_spread=0.021, noisy=True),
    "gpu run, gpu noisy": HostCheck(cpu_spread=0.1, gpu_spread=0.08, noisy=True),
    "gpu run, both noisy": HostCheck(cpu_spread=0.9, gpu_spread=0.08, noisy=True),
    "gpu run, flagged by other limits": HostCheck(cpu_spread=0.1, gpu_spread=0.01, noisy=True),
}

# (base kwargs, head kwargs, the metric the change is in)
CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "gpu-bound compiled time": ({**GPU_BOUND, "compiled_us": 50.0},
                                {**GPU_BOUND, "compiled_us": 60.0}, "compiled_time"),
    "launch-bound compiled time": ({**LAUNCH_BOUND, "compiled_us": 50.0},
                                   {**LAUNCH_BOUND, "compiled_us": 60.0}, "compiled_time"),
    "cold compile": ({"cold_processes": 3, "cold_spread": 0.02, "cold_s": 10.0},
                     {"cold_processes": 3, "cold_spread": 0.02, "cold_s": 13.0}, "cold_compile"),
    "peak memory": ({"peak_bytes": 2**30}, {"peak_bytes": 3 * 2**29}, "memory"),
}

SILENCED = {  # host -> the changes whose verdict it silences
    "cpu run, quiet": set(),
    "cpu run, noisy": {"gpu-bound compiled time", "launch-bound compiled time", "cold compile"},
    "gpu run, quiet": set(),
    "gpu run, cpu noisy": {"launch-bound compiled time", "cold compile"},
    "gpu run, gpu noisy": {"gpu-bound compiled time", "launch-bound compiled time"},
    "gpu run, both noisy": {"gpu-bound compiled time", "launch-bound compiled time",
                            "cold compile"},
    "gpu run, flagged by other limits": {"gpu-bound compiled time",
                                         "launch-bound compiled time", "cold compile"},
}


def _config(host: HostCheck) -> Config:
    """The device the preflight was taken for: a GPU run's models ran on the GPU."""
    return Config(device="cuda" if host.gpu_spread is not None else "cpu")


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_preflight_silences_the_timings_of_the_unit_it_found_unsteady(host: str,
                                                                         change: str) -> None:
    b_kw, h_kw, metric = CHANGES[change]
    config = _config(HOSTS[host])
    base, head = one_loop(run_results([model_result("m", seed=1, config=config, **b_kw)]),
                          run_results([model_result("m", seed=2, config=config, **h_kw)]))
    row = compare(base.model_copy(update={"host": HOSTS[host]}),
                  head.model_copy(update={"host": HOSTS[host]})).rows[0]
    got = getattr(row, metric)
    assert got is not None
    if change in SILENCED[host]:
        assert got.verdict is Verdict.NOISY and not got.gating
    else:
        assert got.verdict is Verdict.REGRESSION


@pytest.mark.parametrize("host", list(HOSTS))
def test_an_aa_pair_is_never_flagged_whatever_the_preflight(host: str) -> None:
    config = _config(HOSTS[host])
    for kind, (b_kw, _, metric) in CHANGES.items():
        base = run_results([model_result("m", seed=3, config=config, **b_kw)])
        head = run_results([model_result("m", seed=4, config=config, **b_kw)])
        row = compare(base.model_copy(update={"host": HOSTS[host]}),
                      head.model_copy(update={"host": HOSTS[host]})).rows[0]
        assert getattr(row, metric).verdict not in (Verdict.REGRESSION,
                                                    Verdict.IMPROVEMENT), kind


def test_the_report_says_which_unit_and_what_it_silenced() -> None:
    base = run_results([model_result("m", seed=1)])
    other = base.model_copy(update={"run_id": "other-run-0001"})  # not the same run
    cpu = HostCheck(cpu_spread=0.909, gpu_spread=0.021, noisy=True,
                    detail="CPU workload spread 90.9%, GPU matmul spread 2.1%")
    c = compare(base.model_copy(update={"host": cpu}), other.model_copy(update={"host": cpu}))
    assert c.notes[0].startswith("the host's CPU was too noisy to judge (CPU workload spread "
                                 "90.9%, GPU matmul spread 2.1%)")
    assert "GPU-bound models are judged on their own processes" in c.notes[0]
    gpu = HostCheck(cpu_spread=0.1, gpu_spread=0.08, noisy=True, detail="GPU matmul 8%")
    c = compare(base.model_copy(update={"host": cpu}), other.model_copy(update={"host": gpu}))
    assert "the base run's CPU was too noisy" in c.notes[0]
    assert "the head run's GPU was too noisy" in c.notes[0]
    assert "timing and compile-time verdicts say so" in c.notes[0]  # both units, together
    assert compare(base, other).notes == []
    flagged = HOSTS["gpu run, flagged by other limits"].model_copy(update={"detail": "x"})
    c = compare(base.model_copy(update={"host": flagged}),
                other.model_copy(update={"host": flagged}))
    assert c.notes[0].startswith("the host's preflight said it was too noisy to judge (x)")


def test_a_unit_unsteady_on_either_side_is_unsteady_for_the_comparison() -> None:
    quiet = run_results([model_result("m")]).model_copy(update={"host": HOSTS["gpu run, quiet"]})
    loud = quiet.model_copy(update={"host": HOSTS["gpu run, gpu noisy"]})
    for b, h in ((quiet, loud), (loud, quiet)):
        noise = host_noise(b, h)
        assert noise.gpu and not noise.cpu and noise.gpu_run
    assert host_noise(quiet, quiet) == HostNoise(gpu_run=True)


def test_of_check_reads_one_preflight() -> None:
    assert of_check(None) == HostNoise()
    n = of_check(HOSTS["gpu run, cpu noisy"])
    assert n.silences("host") and not n.silences("device") and n.silences("host", "device")
    cpu = of_check(HOSTS["cpu run, noisy"])
    assert cpu.silences("device") and cpu.silences("host")  # a CPU run's CPU times everything


@pytest.mark.parametrize(("flags", "units"), [
    ((False, False), ("device",)),
    ((True, False), ("host", "device")),
    ((False, None), ("host", "device")),  # a side that did not measure it: not known GPU-bound
    ((None, None), ("host", "device")),
])
def test_only_a_model_both_sides_measured_gpu_bound_is_timed_on_the_device_alone(
        flags: tuple[bool | None, bool | None], units: tuple[str, ...]) -> None:
    assert steady_state_units(*flags) == units


def test_a_model_of_unknown_kind_is_silenced_by_a_noisy_cpu_beside_a_gpu() -> None:
    kw = {**GPU_BOUND, "launch_bound": None, "config": Config(device="cuda")}
    base = run_results([model_result("m", seed=1, compiled_us=50.0, **kw)])
    head = run_results([model_result("m", seed=2, compiled_us=60.0, **kw)])
    host = HOSTS["gpu run, cpu noisy"]
    row = compare(base.model_copy(update={"host": host}),
                  head.model_copy(update={"host": host})).rows[0]
    assert row.compiled_time.verdict is Verdict.NOISY


def test_a_run_of_several_gpus_names_its_lanes_and_the_gpu_it_left_out() -> None:
    """The preflight left GPU 1 out: the comparison (and the run report) says where the run
    timed and why GPU 1 was not used; a one-GPU run says nothing of lanes."""
    import html as html_lib

    from compilewatch.bot.render.formats import render_markdown, render_run_html
    from compilewatch.core.schema import GpuSpread

    lanes = HostCheck(cpu_spread=0.05, gpu_spread=0.012, gpus=[
        GpuSpread(index=0, spread=0.01), GpuSpread(index=1, spread=0.09, left_out=True),
        GpuSpread(index=2, spread=0.012)])
    def side(run: RunResults, name: str | None) -> RunResults:
        return run.model_copy(update={"settings": run.settings.model_copy(
            update={"side": name})})

    base = run_results([model_result("m", seed=1)], run_id="base-run-0001").model_copy(
        update={"host": lanes})
    head = run_results([model_result("m", seed=2)], run_id="head-run-0001").model_copy(
        update={"host": lanes})
    c = compare(side(base, "base"), side(head, "head"))  # a pr: one preflight, both sides
    said = ("timed on GPUs 0, 2, one timing lane each (a model's processes of both sides on one "
            "GPU); GPU 1 left out of timing: its preflight spread 9.0% against 1.0%-1.2% on "
            "the others")
    assert c.notes.count(said) == 1  # one preflight for both sides: said once
    md = render_markdown(c)  # escaped for markdown: its words are there
    assert "timed on GPUs 0\\, 2" in md and "GPU 1 left out of timing" in md
    # a pr side's page says the same; a run's (one side) how its models got their GPU
    side = head.model_copy(update={"settings": head.settings.model_copy(update={"side": "head"})})
    assert said in html_lib.unescape(render_run_html(side))
    alone = said.replace("a model's processes of both sides on one GPU",
                         "each model's processes on one GPU: the one its name picks where "
                         "a run measured one side")
    assert alone in html_lib.unescape(render_run_html(head))
    # two runs compared (each its own preflight): each side's lanes as that run timed them
    other = lanes.model_copy(update={"cpu_spread": 0.04})
    runs = compare(base, head.model_copy(update={"host": other}))
    assert [n for n in runs.notes if "timing lane" in n] == [f"base: {alone}", f"head: {alone}"]
    one = HostCheck(cpu_spread=0.05, gpu_spread=0.01)
    plain = compare(base.model_copy(update={"host": one}), head.model_copy(update={"host": one}))
    assert not [n for n in plain.notes if "timing lane" in n]
