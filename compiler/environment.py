"""Where a run happened: versions, hardware and the config that decides cache compatibility.

Run as ``python -m compilewatch.compiler.environment`` with the interpreter under test, so that a
comparison of two torch builds records each build's own environment.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any

from compilewatch.core.schema import fingerprint

# Settings that change what Inductor generates or how long it takes; recorded when set.
_CONFIG_ENV = ("TORCHINDUCTOR_COMPILE_THREADS", "TORCHINDUCTOR_MAX_AUTOTUNE",
               "TORCHINDUCTOR_FREEZING", "TORCHINDUCTOR_CPP_WRAPPER", "TORCH_LOGS",
               "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")


def _driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def _cpu() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()[:200]
    except OSError:
        pass
    return platform.processor() or None


def collect() -> dict[str, Any]:
    import torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    cuda_ok = torch.cuda.is_available()
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.release()}"[:200],
        "machine": platform.machine(),
        "cpu": _cpu(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "triton": triton_version,
        "cuda": torch.version.cuda,
        "cudnn": str(torch.backends.cudnn.version()) if cuda_ok else None,
        "driver": _driver() if cuda_ok else None,
        "gpu": torch.cuda.get_device_name(0) if cuda_ok else None,
        "gpu_count": torch.cuda.device_count() if cuda_ok else 0,
        "config": {k: os.environ[k][:200] for k in _CONFIG_ENV if k in os.environ},
    }
    env["fingerprint"] = fingerprint({
        k: str(env[k]) for k in ("torch", "torch_git", "triton", "cuda", "gpu", "machine")
    } | {"python": ".".join(env["python"].split(".")[:2])})
    return env


if __name__ == "__main__":
    json.dump(collect(), sys.stdout)
