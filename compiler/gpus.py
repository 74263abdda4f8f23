"""Which GPU a timing process ran on, and its clocks: samples of two GPUs are never compared
(``bot/judge/verdicts.py``), so each timing process says where it timed."""

from __future__ import annotations

import shutil
import subprocess

from compilewatch.core.schema import GpuIdentity

SMI_TIMEOUT_S = 5.0


def identity(device: str) -> GpuIdentity | None:
    """This process's current CUDA device: torch's index, the physical UUID, its name and its
    SM and memory clocks now (asked right after timing, outside the device lock: the clocks
    it timed at). None on a CPU, or where torch cannot say; a clock it cannot read is None."""
    if device != "cuda":
        return None
    import torch

    try:
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
    except Exception:
        return None
    raw = getattr(props, "uuid", None)
    uuid = None if raw is None else (str(raw) if str(raw).startswith("GPU-") else f"GPU-{raw}")
    sm, mem = clocks(uuid)
    return GpuIdentity(index=index, uuid=uuid, name=str(props.name)[:200],
                       sm_clock_mhz=sm, mem_clock_mhz=mem)


def clocks(uuid: str | None) -> tuple[int | None, int | None]:
    """The GPU's current SM and memory clocks in MHz from ``nvidia-smi`` (None, None where it
    is missing, slow or says something else)."""
    smi = shutil.which("nvidia-smi")
    if uuid is None or smi is None:
        return None, None
    try:
        out = subprocess.run([smi, "-i", uuid, "--query-gpu=clocks.sm,clocks.mem",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=SMI_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return parse_clocks(out)


def parse_clocks(text: str) -> tuple[int | None, int | None]:
    """``"1980, 3201"`` -> (1980, 3201); anything else -> None for that clock."""
    parts = [p.strip() for p in text.strip().splitlines()[0].split(",")] if text.strip() else []

    def mhz(i: int) -> int | None:
        return int(parts[i]) if i < len(parts) and parts[i].isdigit() else None

    return mhz(0), mhz(1)
