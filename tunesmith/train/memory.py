"""The memory cap: a run ends itself when it passes it, instead of taking the machine down.

`cap` is in gigabytes (10⁹ bytes); by default three quarters of the memory the run draws on:
the GPU's on CUDA (what torch's caching allocator has reserved, since that is what other
processes cannot have), the machine's RAM otherwise (this process's resident set). Checked
after every step, so a run stops at the first step past the cap with its adapter whole.

Not handled: Apple's unified memory is counted as RAM (the process's resident set), which
undercounts what Metal has wired; the cap then acts later than it should.
"""

from __future__ import annotations

import psutil

DEFAULT_FRACTION = 0.75


class MemoryCap:
    def __init__(self, cap_gb: float | None, device: str = "cpu") -> None:
        self.device = str(device)
        self.cuda = self.device.startswith("cuda")  # torch imported only then (the fit asks
        # for a CPU's cap in builds that load no model library)
        total = _gpu_memory(self.device) if self.cuda else psutil.virtual_memory().total
        self.limit = int(cap_gb * 1e9) if cap_gb is not None else int(DEFAULT_FRACTION * total)
        self.where = "GPU memory" if self.cuda else "RAM"
        self.process = psutil.Process()

    def used(self) -> int:
        if self.cuda:
            import torch

            return torch.cuda.memory_reserved(self.device)
        return self.process.memory_info().rss

    def passed(self) -> str | None:
        """None while under the cap; otherwise what was used against what was allowed."""
        used = self.used()
        if used <= self.limit:
            return None
        return f"{self.where} {used / 1e9:.2f} GB passed the cap of {self.limit / 1e9:.2f} GB"


def _gpu_memory(device: str) -> int:
    import torch

    return torch.cuda.get_device_properties(torch.device(device)).total_memory
