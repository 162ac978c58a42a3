"""Kernel families: the one registry. Each family module defines `FAMILY`, a `base.KernelFamily` (its gates, its
tiling problem, the plan types it makes and the renderer module that renders them), and its plans implement
`base.FamilyPlan`. `dgemm_cli.plan` chooses among the families through a constraint graph; `render` dispatches
each plan to `FAMILIES[plan.family].renderer`.
"""

from __future__ import annotations

from dgemm_cli.families import cpu, cta, dot, fp8_cta, fp8_hopper, gemv, hopper, splitk, tcgemv, wq, wqtc
from dgemm_cli.families.base import FamilyPlan, KernelFamily

# In order of preference on equal cost; `cta` runs every 16- and 32-bit problem and is every other family's
# fallback (wq is wqtc's: KernelFamily.fallback). fp8_hopper: e4m3 inputs with scales on TMA + wgmma (sm_90a; its
# plans check nothing at run time); fp8_cta: e4m3 on mma.sync m16n8k32 (sm_89+), every view and scale layout
# fp8_hopper refuses; hopper: TMA + wgmma (sm_90a, 16-bit); tcgemv: M = 2..16 on the tensor cores from registers;
# gemv: M <= 4 on the CUDA cores; splitk: M <= 64, K split over a cluster; dot: M = N = 1, blocks along K; wqtc: 4-bit
# weights (dg layout, GPTQ's words) and k-contiguous 8-bit ones on the tensor cores, M <= 64
# (docs/design/weight-only.md); wq: integer weights, every view and packing, on the CUDA cores.
# cpu: the host backend's one family (arch "cpu"); a target sees only its backend's families.
FAMILIES: dict[str, KernelFamily] = {f.name: f for f in (fp8_hopper.FAMILY, fp8_cta.FAMILY, hopper.FAMILY,
                                                          tcgemv.FAMILY, gemv.FAMILY, splitk.FAMILY, dot.FAMILY,
                                                          cta.FAMILY, wqtc.FAMILY, wq.FAMILY, cpu.FAMILY)}
FALLBACK = cta.NAME

__all__ = ["FALLBACK", "FAMILIES", "FamilyPlan", "KernelFamily"]
