"""Nightly publishing: only verified artifacts leave, to a folder and to a (fake) GitHub release,
and ``--warm-cache release`` finds them again. No compiles: the artifacts here are bytes."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from github.Repository import Repository

from compilewatch.bot.cache.fetch import fetch_release
from compilewatch.bot.cache.publish import publish_dir, publish_release
from compilewatch.bot.cli import main
from compilewatch.compiler import artifacts as art
from compilewatch.core.errors import CacheArtifactError
from tests.factories import megacache
from tests.fakegithub import FakeGitHub

FP = "f" * 32


@pytest.fixture(autouse=True)
def _keys(signing_pair: tuple[bytes, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The nightly's key in its environment, as the workflow's secret puts it there."""
    global KEY, PUBLIC
    KEY, PUBLIC = signing_pair
    monkeypatch.setenv("COMPILEWATCH_SIGNING_KEY", KEY.decode())


KEY, PUBLIC = b"", ""


def payload(model: str, extra: bytes = b"") -> bytes:
    return megacache({"inductor": [("f" + model, model.encode() * 100 + extra)]})


def _payload_of(model: str, extra: bytes) -> bytes:
    return payload(model, extra)


def _folder(tmp_path: Path, models: tuple[tuple[str, bool], ...] = (("good", True),
                                                                    ("bad", False)),
            fingerprint: str = FP, out: str = "out", payload: bytes = b"") -> Path:
    folder = tmp_path / out / "artifacts"
    folder.mkdir(parents=True)
    entries = []
    for model, ok in models:
        data = _payload_of(model, payload)
        name = art.artifact_name("micro", model, "cpu-default-float32-auto")
        (folder / name).write_bytes(data)
        entries.append(art.ArtifactEntry(
            suite="micro", model=model, config_slug="cpu-default-float32-auto", file=name,
            size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), verified=ok,
            reason=None if ok else "hot-loaded outputs differ from eager"))
    art.write_manifest(art.Manifest(manifest_version=1, created_at="2026-01-01T00:00:00",
                                    fingerprint=fingerprint, torch="2.13.0",
                                    artifacts=entries),
                       folder / art.MANIFEST_NAME)
    return folder


def test_publish_dir_copies_only_verified_artifacts(tmp_path: Path) -> None:
    target = publish_dir(_folder(tmp_path), tmp_path / "pub", "nightly-1", KEY)
    assert sorted(p.name for p in target.iterdir()) == [
        "manifest.json", "manifest.json.sig", "micro-good-cpu-default-float32-auto.megacache"]
    assert [e.model for e in art.read_manifest(target / "manifest.json").artifacts] == ["good"]
    # What is returned is a checked copy in the private dir: a later change to the published
    # file cannot reach the loader.
    copy = _select(tmp_path / "pub", "good", tmp_path / "private")
    published = target / "micro-good-cpu-default-float32-auto.megacache"
    assert copy.parent == tmp_path / "private" and copy.read_bytes() == published.read_bytes()
    published.write_bytes(b"tampered")
    assert copy.read_bytes() == payload("good")


def test_publish_refuses_a_file_altered_after_verification(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    f = folder / "micro-good-cpu-default-float32-auto.megacache"
    f.write_bytes(b"x" * f.stat().st_size)
    result = CliRunner().invoke(main, ["nightly", "--publish-only", "--out",
                                       str(folder.parent), "--publish-dir",
                                       str(tmp_path / "pub"), "--no-db"])
    assert result.exit_code == 2
    assert "corrupt: sha256" in result.output
    assert not (tmp_path / "pub").exists() or not any((tmp_path / "pub").rglob("*.megacache"))


def test_release_publish_keeps_last_n_and_warm_cache_downloads(
        fake_github: FakeGitHub, gh_repo: Repository, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    for tag in ("nightly-20260101", "nightly-20260102", "nightly-20260103"):
        names = publish_release(folder, gh_repo, tag, key=KEY, prefix="nightly-", keep_last=2)
        assert names == ["micro-good-cpu-default-float32-auto.megacache", "manifest.json",
                         "manifest.json.sig"]
    assert sorted(r.tag_name for r in gh_repo.get_releases()) == [
        "nightly-20260102", "nightly-20260103"]
    root = fetch_release(gh_repo, "nightly-", tmp_path / "dl", [FP], [PUBLIC])
    assert (root / "nightly-20260103" / "manifest.json.sig").is_file()
    assert _select(root, "good").read_bytes() == payload("good")
    # Another environment downloads the manifest only, and is refused with the reason.
    other = fetch_release(gh_repo, "nightly-", tmp_path / "dl2", ["0" * 32], [PUBLIC])
    assert not list(other.rglob("*.megacache"))


def _downloads(fake: FakeGitHub, name: str) -> int:
    """GETs of asset ``name`` (PyGithub downloads through the asset's API URL)."""
    ids = [a["id"] for a in fake.assets.values() if a["name"] == name]
    return sum(len(fake.calls("GET", rf"/releases/assets/{i}$")) for i in ids) + \
        len(fake.calls("GET", rf"/releases/download/[^/]+/{re.escape(name)}$"))


def _many_entries(tmp_path: Path, n: int) -> Path:
    """A nightly folder whose manifest lists ``n`` models that all name one file."""
    folder = _folder(tmp_path, (("good", True),))
    man = art.read_manifest(folder / art.MANIFEST_NAME)
    (entry,) = man.artifacts
    many = [entry.model_copy(update={"model": f"m{i}"}) for i in range(n)]
    art.write_manifest(man.model_copy(update={"artifacts": many}), folder / art.MANIFEST_NAME)
    return folder


def test_an_unsigned_release_manifest_downloads_nothing_it_lists(
        fake_github: FakeGitHub, gh_repo: Repository, tmp_path: Path) -> None:
    """200 entries naming one asset, and the signature removed from the release: the
    manifest is refused before a single artifact is fetched."""
    publish_release(_many_entries(tmp_path, 200), gh_repo, "nightly-1", key=KEY,
                    prefix="nightly-", keep_last=None)
    release = gh_repo.get_release("nightly-1")
    (sig,) = [a for a in release.get_assets() if a.name.endswith(".sig")]
    sig.delete_asset()
    name = art.artifact_name("micro", "good", "cpu-default-float32-auto")
    before = _downloads(fake_github, name)
    with pytest.raises(CacheArtifactError, match="unsigned"):
        fetch_release(gh_repo, "nightly-", tmp_path / "dl", [FP], [PUBLIC])
    assert _downloads(fake_github, name) == before
    assert not list((tmp_path / "dl").rglob("*.megacache"))
    # signed by a key that is not pinned: refused as early
    with pytest.raises(CacheArtifactError):
        fetch_release(gh_repo, "nightly-", tmp_path / "dl2", [FP], [])
    assert _downloads(fake_github, name) == before


def test_a_signed_manifest_naming_one_asset_many_times_downloads_it_once(
        fake_github: FakeGitHub, gh_repo: Repository, tmp_path: Path) -> None:
    publish_release(_many_entries(tmp_path, 200), gh_repo, "nightly-1", key=KEY,
                    prefix="nightly-", keep_last=None)
    name = art.artifact_name("micro", "good", "cpu-default-float32-auto")
    before = _downloads(fake_github, name)
    root = fetch_release(gh_repo, "nightly-", tmp_path / "dl", [FP, FP], [PUBLIC])
    assert _downloads(fake_github, name) == before + 1
    assert (root / "nightly-1" / name).is_file()


def _models(root: Path) -> list[str]:
    return sorted(e.model for e in art.read_manifest(root / art.MANIFEST_NAME).artifacts)


def _select(root: Path, model: str, private: Path | None = None, **over: object) -> Path:
    private = private or root.parent / f"private-{model}"
    private.mkdir(exist_ok=True)
    kw = {"suite": "micro", "model": model, "slug": "cpu-default-float32-auto",
          "fingerprint": FP, "torch_version": "2.13.0", "trusted_keys": [PUBLIC]} | over
    return art.select(root, private=private, **kw)  # type: ignore[arg-type]


def test_publishing_twice_under_one_tag_adds_up(tmp_path: Path) -> None:
    """Per-suite nightlies (or a re-run) under one tag: the later keeps the earlier's entries,
    replaces what it rebuilt, and a tag of another environment is refused untouched."""
    pub = tmp_path / "pub"
    publish_dir(_folder(tmp_path, (("good", True),), out="a"), pub, "nightly-1", KEY)
    target = publish_dir(_folder(tmp_path, (("other", True),), out="b"), pub, "nightly-1", KEY)
    assert _models(target) == ["good", "other"]
    assert _select(pub, "good").read_bytes() == payload("good")
    assert _select(pub, "other").read_bytes() == payload("other")
    # A re-run rebuilds "good": its entry and file are replaced, "other" stays.
    publish_dir(_folder(tmp_path, (("good", True),), out="c", payload=b"v2"), pub, "nightly-1",
                KEY)
    assert _models(target) == ["good", "other"]
    assert _select(pub, "good").read_bytes() == payload("good", b"v2")
    assert not list(target.glob(".*.part"))
    # An earlier entry whose file went missing is not listed again.
    (target / art.artifact_name("micro", "other", "cpu-default-float32-auto")).unlink()
    publish_dir(_folder(tmp_path, (("good", True),), out="d"), pub, "nightly-1", KEY)
    assert _models(target) == ["good"]
    before = (target / art.MANIFEST_NAME).read_bytes()
    result = CliRunner().invoke(main, ["nightly", "--publish-only", "--out",
                                       str(_folder(tmp_path, (("new", True),), "0" * 32,
                                                   out="e").parent),
                                       "--publish-dir", str(pub), "--tag", "nightly-1",
                                       "--no-db"])
    assert result.exit_code == 2, result.output
    assert f"fingerprint {FP}" in result.output and "another --tag" in result.output
    assert (target / art.MANIFEST_NAME).read_bytes() == before
    assert not (target / art.artifact_name("micro", "new", "cpu-default-float32-auto")).exists()


def test_a_corrupt_published_manifest_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "pub" / "nightly-1"
    target.mkdir(parents=True)
    (target / art.MANIFEST_NAME).write_text("{not json")
    publish_dir(_folder(tmp_path), tmp_path / "pub", "nightly-1", KEY)
    assert _models(target) == ["good"]


def test_the_cli_says_on_stderr_what_the_library_logged(tmp_path: Path) -> None:
    """The replaced manifest is said through logging; the command shows it, once."""
    target = tmp_path / "pub" / "nightly-1"
    target.mkdir(parents=True)
    (target / art.MANIFEST_NAME).write_text("{not json")
    result = CliRunner().invoke(main, ["nightly", "--publish-only", "--out",
                                       str(_folder(tmp_path).parent), "--publish-dir",
                                       str(tmp_path / "pub"), "--tag", "nightly-1", "--no-db"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("replacing the published manifest") == 1
    assert "cache artifacts: 1 verified of 2" in result.stderr
    assert _models(target) == ["good"]


def test_release_publishing_twice_under_one_tag_adds_up(
        fake_github: FakeGitHub, gh_repo: Repository, tmp_path: Path) -> None:
    publish_release(_folder(tmp_path, (("good", True),), out="a"), gh_repo, "nightly-1",
                    key=KEY, prefix="nightly-", keep_last=None)
    publish_release(_folder(tmp_path, (("other", True),), out="b"), gh_repo, "nightly-1",
                    key=KEY, prefix="nightly-", keep_last=None)
    root = fetch_release(gh_repo, "nightly-", tmp_path / "dl", [FP], [PUBLIC])
    assert _models(root / "nightly-1") == ["good", "other"]
    assert _select(root, "good").read_bytes() == payload("good")
    assert _select(root, "other").read_bytes() == payload("other")


def _publish_one(folder: str, pub: str, key: bytes, barrier) -> None:  # type: ignore[no-untyped-def]
    import time

    merge = art.merge

    def slow_merge(*a, **kw):  # type: ignore[no-untyped-def]
        out = merge(*a, **kw)
        time.sleep(0.2)  # as if copying large artifacts: the window a second shard would hit
        return out

    art.merge = slow_merge  # this child process only
    barrier.wait()
    publish_dir(Path(folder), Path(pub), "nightly-1", key)


def test_shards_publishing_into_one_tag_at_once_lose_nothing(tmp_path: Path) -> None:
    import multiprocessing

    names = [f"shard{i}" for i in range(5)]
    folders = [str(_folder(tmp_path, ((n, True),), out=n)) for n in names]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(names))
    procs = [ctx.Process(target=_publish_one, args=(f, str(tmp_path / "pub"), KEY, barrier))
             for f in folders]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(names)
    assert _models(tmp_path / "pub" / "nightly-1") == names
    for n in names:
        assert _select(tmp_path / "pub", n).read_bytes() == payload(n)


def test_a_killed_nightly_keeps_its_results_and_publishable_artifacts(
        harness_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints after each model: results.json (finished_at null) and a manifest of the
    artifacts verified so far, which ``--publish-only`` can publish. The real loop runs; no
    process starts (each cold compile "saves" a file, each warm start "verifies" it)."""
    import functools

    from compilewatch.bot.commands.nightly import NightlyRequest, measure_nightly
    from compilewatch.bot.measure.harness import MeasureOptions
    from compilewatch.compiler.protocol import SavedArtifact
    from compilewatch.core.results_file import load_results
    from compilewatch.core.schema import CacheCounters
    from tests.factories import FakeLauncher, worker_output

    def output(spec, name):  # type: ignore[no-untyped-def]
        out = worker_output(spec)
        if spec.save_artifact:
            data = payload(spec.model)
            Path(spec.save_artifact).parent.mkdir(parents=True, exist_ok=True)
            Path(spec.save_artifact).write_bytes(data)
            out = out.model_copy(update={"artifact": SavedArtifact(
                size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest())})
        if spec.phase == "warm_start":
            out = out.model_copy(update={"counters": CacheCounters(fx_hit=1)})
        return out

    # cancelled in the second model's cold compile (launches: cold, warm start, cold...)
    out = tmp_path / "nightly"
    with pytest.raises(KeyboardInterrupt):
        req = NightlyRequest(
            out=out, suites=(harness_suite,), models=("breaks", "branchy"),
            measure=MeasureOptions(timeout_s=60.0, rounds=3, block_ms=2.0, timing_processes=0,
                                   quiet=True))
        measure_nightly(req, req.measure.resolve(),
                        launcher=functools.partial(FakeLauncher, output=output, raise_on=3))
    partial = load_results(out / "results.json")
    assert [r.model for r in partial.results] == ["breaks"] and partial.finished_at is None
    assert partial.settings.trigger == "nightly"
    assert _publishable(out) == ["breaks"]
    target = publish_dir(out / "artifacts", tmp_path / "pub", "nightly-1", KEY)
    assert [e.model for e in art.read_manifest(target / art.MANIFEST_NAME).artifacts] == [
        "breaks"]


def _publishable(out: Path) -> list[str]:
    man = art.read_manifest(out / "artifacts" / art.MANIFEST_NAME)
    return [e.model for e in man.artifacts if e.verified]


def test_a_nightly_publishing_says_what_it_published_in_the_job_summary(
        tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    summary = tmp_path / "summary.md"
    result = CliRunner().invoke(main, ["nightly", "--publish-only", "--out",
                                       str(folder.parent), "--publish-dir",
                                       str(tmp_path / "pub"), "--tag", "nightly-9", "--no-db"],
                                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 0, result.output
    text = summary.read_text()
    assert text.startswith("### compilewatch: nightly")
    assert "1 verified of 2" in text and "published" in text and "nightly\\-9" in text


def test_publishing_without_a_signing_key_is_refused_before_anything_is_copied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILEWATCH_SIGNING_KEY")
    folder = _folder(tmp_path)
    args = ["nightly", "--publish-only", "--out", str(folder.parent), "--publish-dir",
            str(tmp_path / "pub"), "--no-db"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "publishing needs a signing key" in result.output
    assert not (tmp_path / "pub").exists()
    monkeypatch.setenv("COMPILEWATCH_SIGNING_KEY", "-----BEGIN PRIVATE KEY-----\nnope\n")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "not an unencrypted PEM private key" in result.output
    assert not (tmp_path / "pub").exists()


def test_keys_generate_writes_a_private_key_once_and_prints_the_public_key(
        tmp_path: Path) -> None:
    from compilewatch.core import signing

    out = tmp_path / "signing.pem"
    result = CliRunner().invoke(main, ["keys", "generate", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o600
    public = next(w.strip('"[]') for w in result.output.split() if w.startswith('["ed25519:'))
    sig = signing.sign(b"manifest", out.read_bytes())
    assert sig.public_key == public
    assert signing.verify(b"manifest", sig.dumps().encode(), [public], "m") == public
    again = CliRunner().invoke(main, ["keys", "generate", "--out", str(out)])
    assert again.exit_code == 2 and "never overwritten" in again.output


def test_the_nightlys_timing_cores_are_those_the_preflight_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight decides the GPU lanes and with them the timing cores (one a lane): the
    processes a nightly runs get the cores of the options after it, not before."""
    import dataclasses

    from compilewatch.bot.commands.nightly import NightlyRequest, measure_nightly
    from compilewatch.bot.measure import side
    from compilewatch.bot.measure.harness import MeasureOptions

    seen = []

    class Stop(Exception):
        pass

    def lanes(measuring, env, python):  # type: ignore[no-untyped-def]
        return None, dataclasses.replace(measuring, pin_cpus=(0,))

    def measure(sides, options, **kw):  # type: ignore[no-untyped-def]
        seen.extend(side.opts.pin_cpus for side in sides)
        raise Stop

    monkeypatch.setattr(side, "preflight", lanes)
    monkeypatch.setattr(side, "measure_sides", measure)
    req = NightlyRequest(out=tmp_path / "n", suites=("micro",), models=("gelu_mm",),
                         measure=MeasureOptions(quiet=True), no_db=True)
    with pytest.raises(Stop):
        measure_nightly(req, req.measure.resolve())
    assert seen == [(0,)]
