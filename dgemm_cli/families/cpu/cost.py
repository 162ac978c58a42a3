"""The cpu family's cost model (pure): a roofline of the reference host (arch.CPU) and its cache sizes.

The estimate ranks the host's plan against nothing but itself today (one family a backend), and block sizes the
engine picks at run time cost what the analytical model would pick; `deepgemm bench` measures. The constants are
estimates, not fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment
from dgemm_cli.views import ProblemViews


@dataclass(frozen=True)
class HostCaches:
    """The reference host's caches, a core's L1d and L2 and the shared L3 (lscpu on CI's machine)."""

    part: str
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int


HOST = HostCaches("2-core AMD EPYC (Zen 4)", 32 << 10, 1 << 20, 32 << 20)
# dg/cpu_gemm.hpp's register micro-tile (kMR x kNR) for each ISA it compiles for; the rendered traits assert it.
MICRO_TILES: dict[str, tuple[int, int]] = {"avx512": (14, 32), "avx2": (6, 16), "portable": (4, 8)}
# The share of the FMA peak a packed GEMM sustains, and the fixed cost of a call (the scatter vectors, waking the
# OpenMP team): estimates.
PACKED_EFFICIENCY = 0.85
CALL_US = 5.0


def cpu_cost(views: ProblemViews, arch: Arch) -> Callable[[Assignment], float]:
    flops_per_us = arch.sms * arch.fma_flops_per_sm_clk * arch.clock_ghz * 1e3 * PACKED_EFFICIENCY
    moved = sum(views.operands[x].span * views.operands[x].elem_bytes for x in views.operands)
    bytes_per_us = arch.dram_gbps * 1e3
    estimate = CALL_US + max(views.flops / flops_per_us, moved / bytes_per_us)
    return lambda a: estimate
