"""The results schema refuses bad input with an error that names the field."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import decode_results, load_results, parse_results, save_results
from compilewatch.core.schema import (
    INT32_MAX,
    INT64_MAX,
    MAX_CONTAINERS,
    MAX_DEPTH,
    MAX_FILE_SAMPLES,
    MAX_MODEL_SAMPLES,
    MAX_MODELS,
    SCHEMA_VERSION,
    Compile,
    Config,
    json_schema,
)
from tests.factories import model_result, run_results


def _write(tmp_path, data) -> str:
    p = tmp_path / "r.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(p)


def _valid() -> dict:
    return json.loads(run_results([model_result("a"), model_result("b")]).model_dump_json())


def test_atomic_write_leaves_no_temp_file_and_honours_umask(tmp_path):
    import os

    from compilewatch.core.files import write_atomic

    write_atomic(tmp_path / "a.txt", "text")
    write_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"


def test_round_trip(tmp_path):
    res = run_results([model_result("a", graph_breaks=["x"], recompiles=["y"])])
    save_results(res, tmp_path / "r.json")
    assert load_results(tmp_path / "r.json") == res


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(schema_version=99), "newer"),
        (lambda d: d.pop("schema_version"), "schema_version"),
        (lambda d: d["results"][0].pop("model"), "results.0.model"),
        (lambda d: d["results"][1].update(model="<img src=x>"), "results.1.model"),
        (lambda d: d["results"][0].update(model="@org/team"), "results.0.model"),
        (lambda d: d["results"][0].update(status="great"), "results.0.status"),
        (lambda d: d["results"][0].update(error="x" * 10_000_000), "results.0.error"),
        (lambda d: d["results"][0]["compile"].update(cold_s="fast"), "compile.cold_s"),
        (lambda d: d["results"][0].update(surprise=1), "results.0.surprise"),
        (lambda d: d["results"][0]["config"].update(device="tpu"), "config.device"),
    ],
)
def test_bad_fields_are_named(tmp_path, mutate, needle):
    data = _valid()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ResultsFileError, match=needle.replace(".", r"\.")) as err:
        load_results(path)
    assert str(err.value).startswith(f"{path}: ")  # every error names the file


def test_non_finite_numbers_rejected(tmp_path):
    text = json.dumps(_valid()).replace('"cold_s": 1', '"cold_s": NaN', 1)
    text = text.replace('"duration_s": ', '"duration_s": Infinity, "x": ', 1)
    with pytest.raises(ResultsFileError, match="non-finite"):
        load_results(_write(tmp_path, text))


def test_corrupt_and_missing_files(tmp_path):
    with pytest.raises(ResultsFileError, match="not valid JSON"):
        load_results(_write(tmp_path, '{"schema_version": 1, "resu'))
    with pytest.raises(ResultsFileError, match="cannot read"):
        load_results(tmp_path / "absent.json")
    with pytest.raises(ResultsFileError, match="JSON object"):
        load_results(_write(tmp_path, "[1, 2]"))


def test_config_slug_is_stable_identity():
    assert Config().slug == "cpu-default-float32-auto"
    assert Config(device="cuda", mode="reduce-overhead", dtype="bfloat16",
                  dynamic=False).slug == "cuda-reduce-overhead-bfloat16-static"


def test_the_slug_names_the_task_only_for_training():
    """Every inference slug stays what it was before tasks existed (stored runs, golden files,
    baselines); a result without a task reads as inference."""
    assert Config(task="inference").slug == "cpu-default-float32-auto"
    assert Config(task="training").slug == "cpu-default-float32-auto-training"
    assert Config.model_validate({"device": "cuda"}).task == "inference"
    with pytest.raises(ValidationError):
        Config.model_validate({"task": "serving"})


def test_published_json_schema_matches_code():
    """docs/results-schema.json is generated from the code; regenerate when this fails."""
    from pathlib import Path

    doc = Path(__file__).parents[2] / "docs" / "results-schema.json"
    assert json.loads(doc.read_text()) == json_schema()
    assert json_schema()["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(("raw", "needle"), [
    (_nested(MAX_DEPTH), None),
    (_nested(MAX_DEPTH + 1), "MAX_DEPTH"),
    (b'{"a": "' + b"[{" * 100 + b'\\" [[[[", "b": "\\\\", "c": [[1]]}', None),  # in strings
    (b'[' * MAX_DEPTH + b'"\\\\"' + b']' * MAX_DEPTH, None),
    (b"[" + b"[]," * (MAX_CONTAINERS - 2) + b"[]]", None),
    (b"[" + b"[]," * (MAX_CONTAINERS - 1) + b"[]]", "MAX_CONTAINERS"),
    (b"[-9223372036854775808, 9223372036854775807]", None),
    (b"[-92233720368547758080]", "MAX_INT_CHARS"),
    (b'{"a": 1, "b": {"a": 1}}', None),
    (b'{"a": 1, "b": 2, "a": 1}', "duplicate key 'a'"),
])
def test_structure_limits_hold_exactly(raw: bytes, needle: str | None) -> None:
    if needle is None:
        decode_results(raw)
    else:
        with pytest.raises(ResultsFileError, match=needle):
            decode_results(raw)


def _with_samples(models: int, per_list: int) -> dict:
    data = _valid()
    template = data["results"][0]
    data["results"] = [{**template, "model": f"m{i}", "latency": {
        **template["latency"], "eager_us": [1.0] * per_list, "compiled_us": [1.0] * per_list}}
        for i in range(models)]
    return data


@pytest.mark.parametrize(("models", "per_list", "needle"), [
    (1, MAX_MODEL_SAMPLES // 2, None),
    (1, MAX_MODEL_SAMPLES // 2 + 1, r"results\.0\.latency: .*MAX_MODEL_SAMPLES"),
    (MAX_FILE_SAMPLES // MAX_MODEL_SAMPLES, MAX_MODEL_SAMPLES // 2, None),
    (MAX_FILE_SAMPLES // MAX_MODEL_SAMPLES + 1, MAX_MODEL_SAMPLES // 2, "MAX_FILE_SAMPLES"),
    (MAX_MODELS, 0, None),
    (MAX_MODELS + 1, 0, "MAX_MODELS"),
])
def test_count_limits_hold_exactly(models: int, per_list: int, needle: str | None) -> None:
    data = _with_samples(models, per_list)
    if needle is None:
        assert len(parse_results(data).results) == models
    else:
        with pytest.raises(ResultsFileError, match=needle):
            parse_results(data)


@pytest.mark.parametrize("text", ["nul\x00", "\ud800 lone surrogate"])
def test_strings_no_database_can_store_are_refused_when_built_too(text: str) -> None:
    with pytest.raises(ValidationError, match="error"):
        model_result("a", error=text)
    with pytest.raises(ValidationError, match="phases"):
        Compile(phases={text: 1.0})


def test_integers_are_bounded_by_their_column_when_built_too() -> None:
    assert Compile(frames=INT32_MAX, cold_instructions=INT64_MAX).frames == INT32_MAX
    with pytest.raises(ValidationError, match="frames"):
        Compile(frames=INT32_MAX + 1)
    with pytest.raises(ValidationError, match="cold_instructions"):
        Compile(cold_instructions=INT64_MAX + 1)


def test_reference_samples_count_toward_the_sample_limit() -> None:
    data = _with_samples(1, MAX_MODEL_SAMPLES // 2)
    lat = data["results"][0]["latency"]
    lat.update(processes=1, process_sizes=[MAX_MODEL_SAMPLES // 2], reference_us=[1.0],
               reference_sizes=[1])
    with pytest.raises(ResultsFileError, match=r"reference_us\) is over the limit"):
        parse_results(data)


@pytest.mark.parametrize(("sizes", "refs", "groups", "refused"), [
    ([2, 2], ([0, 2], [4.0, 4.0]), [[0.25, 0.25]], None),          # one process timed one
    ([2, 2], ([2, 2], [0.0, 0.0, 2.0, 2.0]), [[0.5, 0.5]], None),   # all-zero: tells nothing
    ([2, 2], ([2], [1.0, 1.0]), None, "each process times"),        # sizes for one process only
    ([2, 2], ([0, 1], [1.0]), None, "each process times"),          # part of a process's rounds
    ([2, 2], ([0, 2], [1.0]), None, "add up to 2"),                 # sizes and samples disagree
    ([], ([4], [1.0] * 4), [[1.0, 1.0, 1.0, 1.0]], None),           # version-1 sizes (one process)
    ([2, 2], ([], [1.0, 1.0]), None, "add up to 0"),                # samples without sizes
])
def test_reference_samples_pair_with_their_own_process_or_the_file_is_refused(
        sizes: list[int], refs: tuple[list[int], list[float]], groups: list | None,
        refused: str | None) -> None:
    from compilewatch.core.schema import Latency

    fields = {"method": "interleaved-blocks", "timer": "cuda_event", "calls_per_block": 1,
              "eager_us": [1.0] * 4, "compiled_us": [1.0] * 4, "eager_median_us": 1.0,
              "compiled_median_us": 1.0, "processes": len(sizes) or 1, "process_sizes": sizes,
              "reference_sizes": refs[0], "reference_us": refs[1]}
    if refused:
        with pytest.raises(ValidationError, match=refused):
            Latency(**fields)
    else:
        assert Latency(**fields).referenced_per_process() == groups


def test_accuracy_from_before_where_and_why_were_recorded_still_loads() -> None:
    """``where``, ``failure`` and ``reason`` were added within version 2: a file without them
    loads, and so does one whose output could not be compared (its own category)."""
    from compilewatch.core.schema import STATUS_OF, Category, Status

    data = _valid()
    for r in data["results"]:
        for key in ("where", "failure", "reason"):
            del r["accuracy"][key]
    old = parse_results(data)
    assert old.results[0].accuracy is not None and old.results[0].accuracy.where is None
    new = _valid()
    new["results"][0].update(status="fail", category="accuracy_uncomparable")
    new["results"][0]["accuracy"].update(
        passed=False, where="out['extra']", failure="uncomparable",
        reason="output type Opaque at out['extra'] cannot be compared")
    loaded = parse_results(new).results[0]
    assert loaded.category is Category.ACCURACY_UNCOMPARABLE
    assert STATUS_OF[loaded.category] is Status.FAIL and loaded.accuracy is not None
    assert loaded.accuracy.failure == "uncomparable"
    new["results"][0]["accuracy"]["failure"] = "maybe"
    with pytest.raises(ResultsFileError, match="failure"):
        parse_results(new)


def _gpu_latency(uuids: list[str], sizes: list[int], refs: list[int] | None = None):
    from compilewatch.core.schema import GpuIdentity, Latency

    n = sum(sizes)
    return Latency(method="interleaved-blocks", timer="cuda_event", calls_per_block=1,
                   eager_us=[float(i) for i in range(n)], compiled_us=[float(i) for i in range(n)],
                   eager_median_us=1.0, compiled_median_us=1.0, processes=len(sizes),
                   process_sizes=sizes, reference_sizes=refs or [],
                   reference_us=[1.0] * sum(refs or []),
                   gpus=[GpuIdentity(index=i, uuid=u) for i, u in enumerate(uuids)])


def test_a_latency_names_one_gpu_a_process_or_the_file_is_refused() -> None:
    with pytest.raises(ValidationError, match="one a process"):
        _gpu_latency(["GPU-a"], [2, 2])
    assert _gpu_latency([], [2, 2]).gpu_uuids() == set()


def test_a_latency_keeps_only_the_processes_of_the_gpus_asked_for() -> None:
    lat = _gpu_latency(["GPU-a", "GPU-b", "GPU-a"], [2, 3, 2], refs=[2, 0, 2])
    kept = lat.on_gpus({"GPU-a"})
    assert kept.process_sizes == [2, 2] and kept.processes == 2
    assert kept.compiled_us == [0.0, 1.0, 5.0, 6.0]  # the first and the third process
    assert kept.reference_sizes == [2, 2] and [g.uuid for g in kept.gpus] == ["GPU-a", "GPU-a"]
    assert lat.on_gpus({"GPU-a", "GPU-b"}) is lat
