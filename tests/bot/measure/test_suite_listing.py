"""The listing child: a suite's module-level code runs there, and nothing it starts outlives it."""

from __future__ import annotations

import time
from pathlib import Path

from compilewatch.bot.measure.listing import list_suite
from compilewatch.compiler import proctree

SUITE = '''
import subprocess

import torch

from compilewatch.suites import model

# started at import: one in the child's own process group, one in a session of its own
subprocess.Popen(["sleep", "3601.5"])
subprocess.Popen(["setsid", "sh", "-c", "sleep 3601.75 &"]).wait()
# ... and with an emptied environment (no marker to find them by): one in a session of its
# own, one in a process group of its own in the child's session, and a daemon that keeps a
# child of its own (killing it hands that child on)
subprocess.Popen(["setsid", "env", "-i", "sh", "-c", "sleep 3601.25 &"]).wait()
subprocess.Popen(["sleep", "3601.125"], env={}, process_group=0)
subprocess.Popen(["setsid", "env", "-i", "sh", "-c", "sleep 3601.0625 & wait"])
SUITE_NAME = "daemons"


@model("net")
def net():
    return torch.nn.Linear(2, 2), (torch.randn(1, 2),)
'''


def _alive(arg: str) -> list[int]:
    out = []
    for pid in proctree.descendants(1):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd[:2] == [b"sleep", arg.encode()] and state != "Z":
            out.append(pid)
    return out


DAEMONS = ["3601.5", "3601.75", "3601.25", "3601.125", "3601.0625"]


def test_what_a_suite_starts_at_import_dies_with_the_listing(tmp_path: Path) -> None:
    """Whatever its session, process group or environment: nothing is left, not even
    re-parented to init (ppid 1)."""
    path = tmp_path / "daemons.py"
    path.write_text(SUITE)
    suite = list_suite(str(path))
    assert [m for m in suite.models] == ["net"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(d) for d in DAEMONS):
        time.sleep(0.1)
    assert {d: _alive(d) for d in DAEMONS} == {d: [] for d in DAEMONS}
