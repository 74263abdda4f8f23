"""Portable compile-cache artifacts with real Inductor on CPU: save, verify, refuse, warm-start.

Compiles cost ~10 s each here, so one module fixture builds the artifacts (two cold compiles and
two verifying warm starts) and the tampering tests refuse files before any compile happens.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from compilewatch.bot.cache.publish import build_manifest, write_signed
from compilewatch.bot.measure.harness import collect_environment
from compilewatch.compiler import artifacts as art
from compilewatch.compiler.plan import Job
from compilewatch.core import signing
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.schema import Config, Status
from compilewatch.suites.loader import load_suite
from tests.factories import megacache
from tests.one_job import (
    RunOptions,
    WarmCache,
    run_job,
    run_job_full,
    verify_artifact,
)

SUITE = str(Path(__file__).parents[1] / "data" / "suites" / "cache_suite.py")
SLUG = Config().slug


def _job(name: str) -> Job:
    suite = load_suite(SUITE)
    return Job(suite, suite.models[name], Config())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("nightly") / "artifacts"
    opts = RunOptions(rounds=1, block_ms=1.0, timing_processes=0, measure=False, artifact_dir=out,
                      timeout_s=600)
    runs = [run_job_full(_job(n), opts) for n in ("scale2", "scale3")]
    env = collect_environment()
    art.write_manifest(build_manifest(runs, env, None), out / art.MANIFEST_NAME)
    return {"dir": out, "runs": runs, "env": env}


def _copy(built: dict, tmp_path: Path, key: bytes) -> Path:
    """The nightly's folder as published: its manifest signed with ``key``."""
    root = Path(shutil.copytree(built["dir"], tmp_path / "pub"))
    write_signed(art.read_manifest(root / art.MANIFEST_NAME), root / art.MANIFEST_NAME, key)
    return root


def _select(root: Path, env, public: str, model: str = "scale2", **over) -> Path:
    private = root.parent / "private"
    private.mkdir(exist_ok=True)
    kw = {"suite": "cachesuite", "model": model, "slug": SLUG, "trusted_keys": [public],
          "fingerprint": env.fingerprint, "torch_version": env.torch} | over
    return art.select(root, private=private, **kw)


def test_artifact_is_saved_and_verified_and_warm_start_hits(built: dict) -> None:
    for run in built["runs"]:
        assert run.rejected is None, run.rejected
        assert run.artifact is not None and run.artifact.stat().st_size == \
            run.artifact_info["size_bytes"]
        assert art.sha256_file(run.artifact) == run.artifact_info["sha256"]
        assert run.artifact_info["fx_keys"]
        c = run.result.compile
        start = run.result.cache.counters["warm_start"]
        assert start.fx_miss == 0 and start.fx_hit >= 1
        # timed, but not compared with cold here: speed lives in benchmarks/warm_start.py
        assert c.warm_start_s is not None and c.warm_start_s > 0
        # where the warm start spent its time, kept beside the cold and warm breakdowns
        assert c.warm_start_phases.get("total", 0) > 0 and "dynamo" in c.warm_start_phases
    man = art.read_manifest(built["dir"] / art.MANIFEST_NAME)
    assert [(e.model, e.verified) for e in man.artifacts] == [("scale2", True), ("scale3", True)]
    assert man.torch == built["env"].torch and man.fingerprint == built["env"].fingerprint


def test_run_with_warm_cache_hits_and_a_flipped_byte_goes_cold(
        built: dict, tmp_path: Path, signing_pair: tuple[bytes, str]) -> None:
    key, public = signing_pair
    env, root = built["env"], _copy(built, tmp_path, key)
    opts = RunOptions(rounds=1, block_ms=1.0, timing_processes=0, measure=False, timeout_s=600,
                      warm_cache=WarmCache(root, env.fingerprint, env.torch, (public,)))
    good = run_job(_job("scale2"), opts)
    assert good.status is Status.PASS and good.notes == []
    assert good.cache.counters["warm_start"].fx_miss == 0
    assert good.cache.counters["warm_start"].fx_hit >= 1
    assert good.compile.warm_start_s is not None
    f = root / art.artifact_name("cachesuite", "scale2", SLUG)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    cold = run_job(_job("scale2"), opts)
    assert cold.status is Status.PASS and cold.compile.cold_s is not None
    assert cold.compile.warm_start_s is None and "warm_start" not in cold.cache.counters
    assert len(cold.notes) == 1 and "corrupt: sha256" in cold.notes[0]
    # The exploit: an autotune entry whose key is an absolute path into site-packages, in a
    # manifest signed by the trusted key all the same. Inspection refuses it, the run goes on
    # cold, and no file appears where the key points.
    target = tmp_path / "site-packages" / "evil.pth"
    f.write_bytes(megacache({"autotune": [(str(target), b"import os\n")]}))
    man = art.read_manifest(root / art.MANIFEST_NAME)
    entry = man.artifacts[0].model_copy(update={"size_bytes": f.stat().st_size,
                                                "sha256": art.sha256_file(f)})
    write_signed(man.model_copy(update={"artifacts": [entry, *man.artifacts[1:]]}),
                 root / art.MANIFEST_NAME, key)
    crafted = run_job(_job("scale2"), opts)
    assert crafted.status is Status.PASS and crafted.compile.warm_start_s is None
    assert len(crafted.notes) == 1 and "outside the cache directory" in crafted.notes[0]
    assert not target.exists()


def test_truncated_artifact_is_refused(built: dict, tmp_path: Path,
                                      signing_pair: tuple[bytes, str]) -> None:
    key, public = signing_pair
    root = _copy(built, tmp_path, key)
    f = root / art.artifact_name("cachesuite", "scale2", SLUG)
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(CacheArtifactError, match="truncated"):
        _select(root, built["env"], public)


def _resign(root: Path, key: bytes, change: Callable[[dict], None]) -> None:
    """Change the manifest as its signer would (these are refused for what they say, not for
    the signature)."""
    mpath = root / art.MANIFEST_NAME
    data = json.loads(mpath.read_text())
    change(data)
    write_signed(art.Manifest.model_validate(data), mpath, key)


def test_wrong_torch_version_in_manifest_is_refused(built: dict, tmp_path: Path,
                                                    signing_pair: tuple[bytes, str]) -> None:
    key, public = signing_pair
    root = _copy(built, tmp_path, key)
    _resign(root, key, lambda d: d.update(torch="2.11.0+cu128"))
    with pytest.raises(CacheArtifactError, match=r"built with torch 2\.11\.0\+cu128"):
        _select(root, built["env"], public)


def test_other_fingerprint_and_unverified_and_bad_manifest_are_refused(
        built: dict, tmp_path: Path, signing_pair: tuple[bytes, str]) -> None:
    key, public = signing_pair
    root = _copy(built, tmp_path, key)
    with pytest.raises(CacheArtifactError, match="no artifact for this environment"):
        _select(root, built["env"], public, fingerprint="0" * 32)
    _resign(root, key, lambda d: d["artifacts"][0].update(
        verified=False, reason="hot-loaded outputs differ"))
    with pytest.raises(CacheArtifactError, match="not verified: hot-loaded outputs differ"):
        _select(root, built["env"], public)
    mpath = root / art.MANIFEST_NAME
    data = json.loads(mpath.read_text())
    data["artifacts"][0]["file"] = "../../etc/passwd"
    text = json.dumps(data).encode()
    mpath.write_bytes(text)
    (root / "manifest.json.sig").write_text(signing.sign(text, key).dumps())
    with pytest.raises(CacheArtifactError, match=r"invalid manifest: artifacts\.0\.file"):
        _select(root, built["env"], public)


def _relabel(source: Path, keys_of: Path, dest: Path) -> None:
    """File model A's compiled FX graph under model B's FX cache key (torch's own format)."""
    import torch.compiler._cache as tc
    from torch.utils._appending_byte_serializer import AppendingByteSerializer

    a = tc.CacheArtifactManager.deserialize(source.read_bytes())
    b = tc.CacheArtifactManager.deserialize(keys_of.read_bytes())
    (entry_a,), (entry_b,) = a["inductor"], b["inductor"]
    wrong = type(entry_a)(entry_b.key, entry_a.content)
    ser = AppendingByteSerializer(serialize_fn=tc._serialize_single_cache)
    ser.extend([("inductor", [wrong])])
    dest.write_bytes(ser.to_bytes())


def test_verification_refuses_an_artifact_that_hot_loads_wrong_outputs(built: dict,
                                                                       tmp_path: Path) -> None:
    """scale2's kernel (sin(x)*2+1) filed under scale3's key: the compile hits, output is off."""
    wrong = tmp_path / "wrong.megacache"
    runs = {r.result.model: r.artifact for r in built["runs"]}
    _relabel(runs["scale2"], runs["scale3"], wrong)
    opts = RunOptions(rounds=1, block_ms=1.0, timeout_s=600)
    outcome, reason = verify_artifact(_job("scale3"), wrong, opts)
    assert outcome.ok and outcome.counters is not None and outcome.counters.fx_miss == 0
    assert outcome.counters.fx_hit == 1
    assert reason is not None and reason.startswith("hot-loaded outputs differ from eager")
    assert outcome.accuracy is not None and (outcome.accuracy.max_abs_err or 0) > 0.5
    # The same check passes the honest artifact: the rule is not refusing everything.
    _, ok = verify_artifact(_job("scale3"), runs["scale3"], opts)
    assert ok is None


def test_artifact_of_another_model_misses_and_is_refused(built: dict) -> None:
    runs = {r.result.model: r.artifact for r in built["runs"]}
    opts = RunOptions(rounds=1, block_ms=1.0, timeout_s=600)
    outcome, reason = verify_artifact(_job("scale3"), runs["scale2"], opts)
    assert outcome.ok and reason is not None and "FX graph cache miss" in reason


def test_an_artifact_whose_hot_loaded_output_is_wrong_is_refused_naming_the_part() -> None:
    from compilewatch.compiler.protocol import WorkerOutput
    from compilewatch.core.schema import Accuracy, CacheCounters

    acc = Accuracy(passed=False, max_abs_err=None, atol=1e-4, rtol=1e-4, where="out['extra']",
                   failure="uncomparable",
                   reason="output type Opaque at out['extra'] cannot be compared")
    out = WorkerOutput(ok=True, phase="warm_start", counters=CacheCounters(fx_hit=1),
                       accuracy=acc)
    assert art.judge(out) == ("hot-loaded outputs differ from eager: output type Opaque "
                                    "at out['extra'] cannot be compared")
    passed = out.model_copy(update={"accuracy": acc.model_copy(update={"passed": True})})
    assert art.judge(passed) is None
