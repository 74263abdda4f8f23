"""Nightly publishing: only verified artifacts leave, to a folder and to a (fake) GitHub release,
and ``--warm-cache release`` finds them again. No compiles: the artifacts here are bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner
from github.Repository import Repository

from compilewatch.bot.cli import main
from compilewatch.bot.nightly import fetch_release, publish_dir, publish_release
from compilewatch.compiler import artifacts as art
from tests.fakegithub import FakeGitHub

FP = "f" * 32


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "out" / "artifacts"
    folder.mkdir(parents=True)
    entries = []
    for model, ok in (("good", True), ("bad", False)):
        data = model.encode() * 100
        name = art.artifact_name("micro", model, "cpu-default-float32-auto")
        (folder / name).write_bytes(data)
        entries.append(art.ArtifactEntry(
            suite="micro", model=model, config_slug="cpu-default-float32-auto", file=name,
            size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), verified=ok,
            reason=None if ok else "hot-loaded outputs differ from eager"))
    art.write_manifest(art.Manifest(manifest_version=1, created_at="2026-01-01T00:00:00",
                                    fingerprint=FP, torch="2.13.0", artifacts=entries),
                       folder / art.MANIFEST_NAME)
    return folder


def test_publish_dir_copies_only_verified_artifacts(tmp_path: Path) -> None:
    target = publish_dir(_folder(tmp_path), tmp_path / "pub", "nightly-1")
    assert sorted(p.name for p in target.iterdir()) == [
        "manifest.json", "micro-good-cpu-default-float32-auto.megacache"]
    assert [e.model for e in art.read_manifest(target / "manifest.json").artifacts] == ["good"]
    found = art.select(tmp_path / "pub", suite="micro", model="good",
                       slug="cpu-default-float32-auto", fingerprint=FP, torch_version="2.13.0")
    assert found == target / "micro-good-cpu-default-float32-auto.megacache"
    # With a private dir the checked copy is what is returned: a later change to the published
    # file cannot reach the loader.
    private = tmp_path / "private"
    private.mkdir()
    copy = art.select(tmp_path / "pub", suite="micro", model="good",
                      slug="cpu-default-float32-auto", fingerprint=FP, torch_version="2.13.0",
                      private=private)
    assert copy.parent == private and copy.read_bytes() == found.read_bytes()
    found.write_bytes(b"tampered")
    assert copy.read_bytes() != b"tampered"


def test_publish_refuses_a_file_altered_after_verification(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "micro-good-cpu-default-float32-auto.megacache").write_bytes(b"x" * 400)
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
        names = publish_release(folder, gh_repo, tag, prefix="nightly-", keep_last=2)
        assert names == ["micro-good-cpu-default-float32-auto.megacache", "manifest.json"]
    assert sorted(r.tag_name for r in gh_repo.get_releases()) == [
        "nightly-20260102", "nightly-20260103"]
    root = fetch_release(gh_repo, "nightly-", tmp_path / "dl", FP)
    path = art.select(root, suite="micro", model="good", slug="cpu-default-float32-auto",
                      fingerprint=FP, torch_version="2.13.0")
    assert path.parent.name == "nightly-20260103"
    assert path.read_bytes() == b"good" * 100
    # Another environment downloads the manifest only, and is refused with the reason.
    other = fetch_release(gh_repo, "nightly-", tmp_path / "dl2", "0" * 32)
    assert not list(other.rglob("*.megacache"))
