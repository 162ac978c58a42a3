"""Kernel families. Each is a planner module with its own template folder `templates/<NAME>/`:

    NAME, SUMMARY
    gates(views, arch) -> [(constraint, reason)]    what rules the family out of a problem ([]: nothing)
    problem(views, arch) -> solving.Problem         its tiling graph, cost model and plan maker; solving.py
                                                    turns it into the best plan (and its graph, for
                                                    `explain`), the ranked candidates `tune` measures, or
                                                    the plan of a tuned assignment

A family's plan has `family`, `summary`, `cost_us` (the cost model's estimate, comparable across
families), `decisions`, `feasible`, `smem_bytes`, `threads`, `arch_features` (what its instructions and launch
need, names from `arch.FEATURES`), `runtime_align` (operand -> bytes the
plan needs at run time beyond what the spec promises) and `to_dict()`. `dgemm_cli.plan` chooses among
the families through a constraint graph; render dispatches on `family` through one table.
"""

from __future__ import annotations

from dgemm_cli.families import cta, gemv, hopper, splitk, tcgemv

# In order of preference on equal cost; `cta` runs everything and is every other family's fallback.
# hopper: TMA + wgmma (sm_90a); tcgemv: M = 2..16 on the tensor cores from registers; gemv: M <= 4 on the CUDA
# cores; splitk: M <= 64, K split over a cluster.
FAMILIES = {f.NAME: f for f in (hopper, tcgemv, gemv, splitk, cta)}
FALLBACK = cta.NAME
