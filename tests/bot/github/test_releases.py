"""Nightly release assets: publish, replace in place, keep the last N, download."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from github.Repository import Repository

from compilewatch.bot.github.releases import (
    download_asset,
    list_release_assets,
    publish_release_assets,
)
from compilewatch.core.errors import GitHubError, UsageError
from tests.fakegithub import REPO, FakeGitHub


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_publish_then_download_round_trips(fake_github: FakeGitHub, gh_repo: Repository,
                                           tmp_path: Path) -> None:
    cache = _file(tmp_path, "megacache.bin", bytes(range(256)) * 4000)
    meta = _file(tmp_path, "megacache.json", b'{"sha256": "abc"}')
    published = publish_release_assets(gh_repo, "nightly-20260101", [cache, meta])
    assert [a.name for a in published.assets] == ["megacache.bin", "megacache.json"]
    assert [a.name for a in list_release_assets(gh_repo, "nightly-20260101")] == [
        "megacache.bin", "megacache.json"]
    out = download_asset(gh_repo, "nightly-20260101", "megacache.bin", tmp_path / "dl" / "c.bin")
    assert out.read_bytes() == cache.read_bytes()
    # The public download link serves the same bytes, without a token.
    public = requests.get(published.assets[1].download_url, timeout=5)
    assert public.status_code == 200 and public.content == meta.read_bytes()


def test_same_named_asset_is_replaced(fake_github: FakeGitHub, gh_repo: Repository,
                                      tmp_path: Path) -> None:
    publish_release_assets(gh_repo, "nightly-1", [_file(tmp_path, "a.bin", b"old")])
    publish_release_assets(gh_repo, "nightly-1", [_file(tmp_path, "a.bin", b"new!")])
    assets = list(fake_github.assets.values())
    assert [(a["name"], a["size"]) for a in assets] == [("a.bin", 4)]
    assert len(fake_github.releases) == 1
    assert download_asset(gh_repo, "nightly-1", "a.bin", tmp_path / "x").read_bytes() == b"new!"


def test_failed_upload_keeps_the_previous_asset(fake_github: FakeGitHub, gh_repo: Repository,
                                                tmp_path: Path) -> None:
    publish_release_assets(gh_repo, "nightly-1", [_file(tmp_path, "a.bin", b"good")])
    fake_github.fail_next(100, status=502, method="POST", path="/api/uploads/")
    with pytest.raises(GitHubError, match=r"upload a\.bin"):
        publish_release_assets(gh_repo, "nightly-1", [_file(tmp_path, "a.bin", b"broken")])
    fake_github.up()
    assert download_asset(gh_repo, "nightly-1", "a.bin", tmp_path / "x").read_bytes() == b"good"


def test_upload_retried_after_502_sends_the_whole_file(fake_github: FakeGitHub,
                                                       gh_repo: Repository,
                                                       tmp_path: Path) -> None:
    fake_github.fail_next(1, status=502, method="POST", path="/api/uploads/")
    data = b"z" * 300_000
    publish_release_assets(gh_repo, "nightly-1", [_file(tmp_path, "big.bin", data)])
    [blob] = fake_github.blobs.values()
    assert blob == data


def test_keep_last_prunes_old_nightlies_and_their_tags(fake_github: FakeGitHub,
                                                       gh_repo: Repository,
                                                       tmp_path: Path) -> None:
    f = _file(tmp_path, "a.bin", b"x")
    publish_release_assets(gh_repo, "v1.0", [f], prerelease=False)
    for day in ("nightly-20260101", "nightly-20260102", "nightly-20260103"):
        publish_release_assets(gh_repo, day, [f], keep_last=2)
    result = publish_release_assets(gh_repo, "nightly-20260104", [f], keep_last=2)
    tags = sorted(r["tag_name"] for r in fake_github.releases.values())
    assert tags == ["nightly-20260103", "nightly-20260104", "v1.0"]
    assert result.deleted_tags == ("nightly-20260102",)
    assert sorted(fake_github.tags[REPO]) == tags


def test_missing_release_or_asset_is_a_clear_error(fake_github: FakeGitHub,
                                                   gh_repo: Repository,
                                                   tmp_path: Path) -> None:
    with pytest.raises(GitHubError, match="'nightly-x' not found"):
        list_release_assets(gh_repo, "nightly-x")
    assert list_release_assets(gh_repo, "nightly-x", missing_ok=True) == []
    publish_release_assets(gh_repo, "nightly-1", [_file(tmp_path, "a.bin", b"1")])
    with pytest.raises(GitHubError, match=r"'b\.bin' not found"):
        download_asset(gh_repo, "nightly-1", "b.bin", tmp_path / "b.bin")
    assert not (tmp_path / "b.bin").exists()


def test_bad_arguments_are_refused_before_any_request(fake_github: FakeGitHub,
                                                      gh_repo: Repository,
                                                      tmp_path: Path) -> None:
    before = len(fake_github.requests)
    with pytest.raises(UsageError, match="not a file"):
        publish_release_assets(gh_repo, "nightly-1", [tmp_path / "missing.bin"])
    with pytest.raises(UsageError, match="keep_last"):
        publish_release_assets(gh_repo, "v2", [_file(tmp_path, "a", b"")], keep_last=3)
    assert len(fake_github.requests) == before
