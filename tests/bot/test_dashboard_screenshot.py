"""The dashboard renders in headless Chromium: a screenshot of the right size that is not blank."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from compilewatch.bot.history.dashboard import write_site
from compilewatch.bot.history.series import load_trends
from compilewatch.db import connect, ingest
from tests.factories import nightly_history

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 2000


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test.sh "
                                             "installs it with apt-get)")
def test_dashboard_screenshot_is_not_blank(tmp_path: Path) -> None:
    with connect(f"sqlite:///{tmp_path / 'runs.db'}") as db:
        for run in nightly_history(models=("mlp", "convnet"),
                                   step=("mlp", 15, {"cold_s": 15.0})):
            ingest(db, run)
        index = write_site(load_trends(db), tmp_path / "site").index
    shot = tmp_path / "dashboard.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
           f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", index.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert shot.is_file(), proc.stderr[-2000:]
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[:2] == (HEIGHT, WIDTH)
    colours = np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 200  # text, the header, the charts' lines and markers
    dark_header = img[:40, :, :3].mean()
    assert dark_header < 0.4  # the header bar drew (the page's CSS applied)
    assert (img[..., :3] < 0.9).any(axis=2).mean() > 0.05  # more than a white page
