"""Look at a page as a person would: headless Chromium at 1400 px, a screenshot and the DOM.

``look(page, shots)`` writes ``<shots>/<name>.png`` and returns what the page's DOM says after
its scripts ran: the document's and every table's width against the window, the charts, the
hover text of the first point and what a click on it shows. The DOM is read by a copy of the
page with a probe script appended (the pages allow inline scripts, nothing else), dumped with
``--dump-dom``.

The screenshots go to a folder under the test's tmp path; ``COMPILEWATCH_SCREENSHOTS=DIR``
keeps them in ``DIR`` instead, to look at after the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1400
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                    "(.ci/run installs it with apt-get install chromium)")

PROBE = """<script>
(function () {
  var doc = document.documentElement, out = {};
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  out.scrollWidth = doc.scrollWidth; out.clientWidth = doc.clientWidth;
  out.tables = Array.from(document.querySelectorAll("table")).map(function (t) {
    return Math.ceil(t.getBoundingClientRect().right); });
  out.svgs = Array.from(document.querySelectorAll("svg")).map(function (s) {
    return {label: s.getAttribute("aria-label"), cls: s.getAttribute("class"),
            right: Math.ceil(s.getBoundingClientRect().right)}; });
  var pt = document.querySelector("svg circle title");
  out.hover = pt ? pt.textContent : null;
  var click = document.querySelector("svg circle[data-i]");
  var panel = document.querySelector("svg.panel[data-v]");
  out.bands = document.querySelectorAll("svg.panel .band").length;
  out.panels = document.querySelectorAll("svg.panel").length;
  if (panel) {  // a dashboard panel: the pointer over its first point, then a click there
    var p = panel.createSVGPoint();
    p.x = +panel.getAttribute("data-x").split(",")[0]; p.y = 100;
    var c = p.matrixTransform(panel.getScreenCTM());
    var at = {bubbles: true, clientX: c.x, clientY: c.y};
    panel.dispatchEvent(new MouseEvent("mousemove", at));
    var tip = document.getElementById("tip");
    out.hover = tip && tip.style.display === "block" ? tip.textContent : null;
    click = panel;
  }
  if (click) {
    click.dispatchEvent(new MouseEvent("click", panel ? at :
                                       {bubbles: true, clientX: 50, clientY: 50}));
    var pop = document.getElementById("pop");
    out.popup = pop ? {text: pop.textContent, shown: pop.style.display,
      links: Array.from(pop.querySelectorAll("a")).map(function (a) {
        return a.getAttribute("href"); })} : null;
  }
  var pre = document.createElement("pre"); pre.id = "probe-out";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();
</script>"""


@dataclass(frozen=True)
class Look:
    screenshot: Path
    dom: dict[str, Any]

    @property
    def overflow(self) -> int:
        """Pixels the page is wider than the window (0: fits)."""
        return max(0, self.dom["scrollWidth"] - self.dom["clientWidth"])

    def charts(self, cls: str | None = None) -> list[dict[str, Any]]:
        return [s for s in self.dom["svgs"] if cls is None or s["cls"] == cls]


def shots_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``$COMPILEWATCH_SCREENSHOTS`` or ``<tmp_path>/screenshots``."""
    where = Path(os.environ.get("COMPILEWATCH_SCREENSHOTS") or tmp_path / "screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def look(page: Path, shots: Path, name: str, height: int = 2000) -> Look:
    """Screenshot ``page`` at 1400 px into ``shots/<name>.png`` and read its DOM."""
    profile = shots.parent / f".chromium-{name}"
    shot = shots / f"{name}.png"
    proc = _chromium([f"--screenshot={shot}", f"--window-size={WIDTH},{height}",
                      page.as_uri()], profile)
    assert shot.is_file(), proc.stderr[-2000:]
    probe = page.with_name(f".probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    try:
        proc = _chromium(["--dump-dom", f"--window-size={WIDTH},{height}", probe.as_uri()],
                         profile)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="probe-out">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stderr[-2000:]
    text = found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return Look(shot, json.loads(text))
