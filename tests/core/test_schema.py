"""The results schema refuses bad input with an error that names the field."""

from __future__ import annotations

import json

import pytest

from compilewatch.core.errors import ResultsFileError
from compilewatch.core.schema import (
    SCHEMA_VERSION,
    Config,
    json_schema,
    load_results,
    save_results,
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


def test_published_json_schema_matches_code():
    """docs/results-schema.json is generated from the code; regenerate when this fails."""
    from pathlib import Path

    doc = Path(__file__).parents[2] / "docs" / "results-schema.json"
    assert json.loads(doc.read_text()) == json_schema()
    assert json_schema()["properties"]["schema_version"]["const"] == SCHEMA_VERSION
