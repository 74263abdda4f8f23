"""One run rendered on its own: numbers, reasons, and untrusted text escaped."""

from __future__ import annotations

import html as html_lib

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.render.formats import render_run_html
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import Category, HostCheck
from compilewatch.db import store_runs
from tests.factories import model_result, run_results

ATTACK = "<script>alert(1)</script> @org/team"


def _run():
    return run_results([
        model_result("mlp", eager_us=100.0, compiled_us=50.0, graph_breaks=["print in fn"],
                     recompiles=["tensor 'x' size mismatch at index 0"]),
        model_result("broken", category=Category.COMPILE_ERROR, error=ATTACK),
    ])


def test_run_report_shows_numbers_and_reasons_escaped():
    html = render_run_html(_run())
    assert "1 of 2 passed" in html
    assert "micro/mlp" in html and "micro/broken" in html
    assert "print in fn" in html and "size mismatch at index 0" in html
    assert "compile error" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "2.00×" in html  # the mlp's speedup, eager 100 µs / compiled 50 µs


def test_run_report_shows_warm_start_only_when_there_is_one():
    from compilewatch.core.schema import CacheCounters

    run = _run()
    assert "warm start" not in render_run_html(run)
    mlp = run.results[0]
    mlp.compile = mlp.compile.model_copy(update={
        "warm_start_s": 1.25, "warm_start_phases": {"dynamo": 0.5, "aot_autograd": 0.7}})
    mlp.cache = mlp.cache.model_copy(update={"counters": {
        **mlp.cache.counters, "warm_start": CacheCounters(fx_hit=2)}})
    html = render_run_html(run)
    assert "<th>warm start</th>" in html and "warm start total<b>1.25 s</b>" in html
    assert "Warm-start compile phases (empty cache dir + artifact): dynamo 0.50 s · " \
           "aot_autograd 0.70 s · FX cache 2 hits, 0 misses" in html


def _shared(run, *, refused: int = 0):  # type: ignore[no-untyped-def]
    """``run`` as a trusted writer of the shared compile cache left it: the mlp's cold compile
    stored 2 graphs, its remote phase loaded them (or refused them)."""
    from compilewatch.core.schema import CacheCounters

    run.settings = run.settings.model_copy(update={"remote_cache": "write"})
    mlp = run.results[0]
    mlp.compile = mlp.compile.model_copy(update={"remote_s": 3.5, "remote_phases": {
        "dynamo": 0.5, "inductor": 2.0}})
    loaded = 2 - refused
    mlp.cache = mlp.cache.model_copy(update={"counters": {
        "cold": CacheCounters(fx_miss=2, fx_remote_put=2),
        "remote": CacheCounters(fx_hit=loaded, fx_miss=refused, fx_remote_hit=loaded,
                                fx_remote_miss=0, fx_remote_refused=refused)}})
    return run


def test_run_report_shows_which_phases_used_the_shared_cache():
    run = _run()
    assert "shared compile cache" not in render_run_html(run).lower()
    html = render_run_html(_shared(run))
    assert "<th>remote phase (shared cache)</th>" in html and "remote phase total<b>3.50 s</b>" \
        in html
    assert "Shared compile cache (read and stored): cold compiles of 1 model: 2 stored; remote " \
           "phases of 1 model: 2 loaded (0 local hits), 0 missed, 0 refused." in html
    assert "FX cache 2 loaded from the shared cache, 0 local hits, 0 misses, 0 refused" in html
    assert "Stored in the shared compile cache from the first cold compile: 2 FX graphs" in html
    refused = render_run_html(_shared(_run(), refused=2))
    assert '<span class="fail">2 refused</span>' in refused
    assert "0 loaded (0 local hits), 0 missed, 2 refused" in refused


def test_the_summary_table_says_it_too():
    from rich.console import Console

    from compilewatch.bot.render.run_table import summary_table

    console = Console(width=200, record=True)
    console.print(summary_table(_shared(_run()), width=200))
    text = console.export_text()
    assert "remote s" in text and "3.50" in text
    assert "Shared compile cache (read and stored): cold compiles of 1 model: 2 stored" in text


def test_report_command_from_a_file_and_from_a_run_id(tmp_path):
    run = _run()
    save_results(run, tmp_path / "r.json")
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    store_runs(url, run)
    for source in (str(tmp_path / "r.json"), run.run_id):
        out = tmp_path / "report.html"
        result = CliRunner().invoke(main, ["report", source, "--out", str(out), "--db", url])
        assert result.exit_code == 0, result.output
        assert "micro/mlp" in out.read_text()
        out.unlink()


def _golden_run():
    from compilewatch.core.schema import Config

    run = run_results([
        model_result("mlp", eager_us=100.0, compiled_us=50.0, graph_breaks=["print in fn"],
                     recompiles=["tensor 'x' size mismatch at index 0"]),
        model_result("mlp", config=Config(dtype="bfloat16"), warm_start_s=1.5),
        model_result("broken", category=Category.COMPILE_ERROR, error=ATTACK),
        model_result("gpu_only", category=Category.UNSUPPORTED,
                     error="needs cuda; this machine has no GPU"),
    ], run_id="0123456789abcdef0123456789abcdef", commit="c" * 40, ref="main")
    return run


def test_every_run_report_table_has_one_cell_per_header():
    from tests.html_tables import check_tables

    for run in (_run(), _golden_run()):
        (table,) = check_tables(render_run_html(run))
    row = table.row("micro/broken")
    assert row["breaks"] == "0" and row["status"].startswith("error")
    assert table.row("micro/mlp")["breaks"] == "1"


def test_run_report_golden():
    from tests.bot.render.test_formats import check_golden

    check_golden("run_report.html", render_run_html(_golden_run()))


@pytest.mark.parametrize(("host", "said"), [
    (None, None),  # not checked (an older file): nothing claimed
    (HostCheck(cpu_spread=0.05, noisy=False, detail="CPU workload spread 5.0%"), None),
    (HostCheck(cpu_spread=0.30, noisy=True, detail="CPU workload spread 30.0% (quietest of 3 "
               "tries: 65.2%, 65.3%, 30.0%)"), "the host's CPU was too noisy during this run "
                                               "(CPU workload spread 30.0% (quietest of 3 tries"),
    (HostCheck(cpu_spread=0.02, gpu_spread=0.09, noisy=True, detail="GPU matmul spread 9.0%"),
     "the host's GPU was too noisy during this run (GPU matmul spread 9.0%): its timings"),
    (HostCheck(cpu_spread=0.90, gpu_spread=0.01, noisy=True, detail="CPU workload spread 90%"),
     "CPU was too noisy during this run (CPU workload spread 90%): its compile times and "
     "launch-bound models' timings"),
])
def test_run_report_says_when_the_host_was_noisy(tmp_path, host, said):
    run = _run().model_copy(update={"host": host})
    save_results(run, tmp_path / "r.json")
    res = CliRunner().invoke(main, ["report", str(tmp_path / "r.json"), "--out",
                                    str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    html = html_lib.unescape((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert ("Noisy host:" in html) == (said is not None)
    if said:
        assert said in html and "too noisy to judge" in html


def test_run_report_shows_a_training_step_s_setup_and_compression_ratio():
    from compilewatch.core.schema import Config, Memory, Training

    train = model_result("mlp", config=Config(device="cuda", task="training")).model_copy(
        update={"training": Training(optimizer="adam", autocast="bfloat16", mode="train",
                                     dropouts_zeroed=3),
                "memory": Memory(eager_peak_bytes=300 * 2**20, compiled_peak_bytes=200 * 2**20,
                                 eager_fwd_bwd_peak_bytes=250 * 2**20,
                                 compiled_fwd_bwd_peak_bytes=150 * 2**20)})
    html = html_lib.unescape(render_run_html(run_results([train, model_result("plain")])))
    assert ("Training step: train mode (3 dropout probabilities set to zero) · loss: the "
            "output's own, else a reduction · optimizer adam (eager, outside the compile) · "
            "autocast bfloat16") in html
    assert html.count("Training step:") == 1  # the inference model has no training setup
    assert "300.0 MiB → 200.0 MiB" in html and "1.50×" in html
    assert "forward+backward 250.0 MiB → 150.0 MiB" in html


def test_run_report_names_the_gpu_each_timing_process_ran_on():
    from compilewatch.core.schema import GpuIdentity

    r = model_result("mlp", processes=2)
    assert r.latency is not None
    gpus = [GpuIdentity(index=0, uuid="GPU-8f4e2c1a-77", name="NVIDIA H200", sm_clock_mhz=1980,
                        mem_clock_mhz=3201), GpuIdentity(index=1, uuid="GPU-1234", name=None)]
    r = r.model_copy(update={"latency": r.latency.model_copy(update={"gpus": gpus})})
    html = render_run_html(run_results([r, model_result("cpu_only")]))
    assert ("Timed on: GPU 0 NVIDIA H200 (GPU-8f4e2c1a…), SM 1980 MHz, memory 3201 MHz · "
            "GPU 1 (GPU-1234…)") in html
    assert html.count("Timed on:") == 1
