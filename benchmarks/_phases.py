"""Where a ``pr``'s process-seconds went, from its results files: the per-phase budget that
``pr_wall.py`` and ``verdict_quality.py`` print."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

# imports (and Inductor's compile workers' start-up), compiles, timing and waiting for the
# device: measurement, not the harness's own work
MEASURED = {"import", "compile_workers", "compile", "timing", "wait_device", "wait_gpu", "memory",
            "save_artifact", "load_artifact"}


@dataclass
class Budget:
    phases: Counter[str]
    harness: float  # the harness's own process-seconds (every phase not in MEASURED)

    @property
    def total(self) -> float:
        return sum(self.phases.values())

    def share(self, without_cuda: bool = False) -> float:
        """The harness's share of all process-seconds; ``without_cuda``: less the workers' CUDA
        contexts (each worker needs its own: a context cannot be forked)."""
        own = self.harness - (self.phases.get("cuda_context", 0.0) if without_cuda else 0.0)
        return own / max(self.total, 1e-9)

    def line(self) -> str:
        phases = ", ".join(f"{k} {v:.1f}" for k, v in self.phases.most_common() if v >= 0.05)
        return (f"process-seconds {self.total:.0f} ({phases}); harness {self.harness:.1f} s, "
                f"{self.share():.1%} ({self.share(True):.1%} without CUDA contexts)")


def budget(sides: list[dict], fork: bool) -> Budget:
    """Sum ``harness_s`` over every result of these results files. With the fork server the
    import is paid once per server, not once per process: counted once."""
    phases: Counter[str] = Counter()
    for data in sides:
        for r in data["results"]:
            phases.update(r.get("harness_s") or {})
            if fork and r["compile"].get("import_s"):
                phases["import"] = r["compile"]["import_s"]
    return Budget(phases, sum(v for k, v in phases.items() if k not in MEASURED))
