"""The arch table: per-target limits the planner must respect and rough rates its cost model uses.

Limits are the CUDA programming guide's per-compute-capability numbers; the rates and SM counts
are those of each arch's flagship data-centre part and only rank candidate plans against each
other (the real ranking belongs to `deepgemm bench` and, later, an autotuner).
"""

from __future__ import annotations

from dataclasses import dataclass

from dgemm_cli.errors import DeepGemmError


@dataclass(frozen=True)
class Arch:
    name: str  # the --arch spelling
    compute: str  # nvcc virtual arch, e.g. "compute_90a"
    sm: str  # nvcc real arch, e.g. "sm_90a"
    cc: tuple[int, int]
    smem_per_block: int  # bytes of dynamic shared memory one block may opt in to
    smem_per_sm: int
    regs_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    sms: int  # multiprocessors of the reference part (cost model only)
    tc_flops_per_sm_clk: int  # dense f16/bf16 mma.sync FLOP per SM per clock
    fma_flops_per_sm_clk: int  # f32 FFMA FLOP per SM per clock
    clock_ghz: float
    dram_gbps: float
    part: str  # the part the rates describe
    wgmma_flops_per_sm_clk: int = 0  # dense f16/bf16 wgmma FLOP per SM per clock (0: the arch has no wgmma)
    # (cluster size, SMs whose blocks clusters of that size can fill at once): a cluster's blocks share one GPC,
    # and the GPCs' SM counts are not all multiples of the cluster size. Sizes left out fill every SM.
    cluster_sms: tuple[tuple[int, int], ...] = ()
    # The instruction and launch features (FEATURES' keys) this arch has; a plan lists the ones it uses.
    features: frozenset[str] = frozenset()
    # What the target runs: "cuda" (nvcc, a .cu and a GPU harness) or "cpu" (the host compiler, a .cpp; the
    # families of one backend never see another's target: plan.family_gates).
    backend: str = "cuda"

    def resident_blocks(self, per_sm: int, cluster: int = 1) -> int:
        """Blocks of a grid that run at once, `per_sm` an SM, in clusters of `cluster` (cost model only); at least
        one cluster (a cluster that fits no GPC is for the tiling graph to refuse, not the model to divide by)."""
        sms = dict(self.cluster_sms).get(cluster, self.sms)
        return max(cluster, sms * per_sm // cluster * cluster)

    @property
    def grid_dependency(self) -> bool:
        """griddepcontrol and programmatic dependent launch: sm_90 PTX and launch attribute."""
        return "griddepcontrol" in self.features

    @property
    def gencode(self) -> list[str]:
        """SASS for the target (runs on a CUDA 13.0 driver without JIT) plus PTX of the same arch."""
        return [f"-gencode=arch={self.compute},code=[{self.sm},{self.compute}]"]


# What a plan's `arch_features` may name, with the PTX or launch API that needs it. Every arch in the table has
# mma.sync (f16/bf16), ldmatrix and cp.async (sm_80), so no plan lists them.
FEATURES: dict[str, str] = {
    "griddepcontrol": "programmatic dependent launch (griddepcontrol, sm_90)",
    "clusters": "thread-block clusters and distributed shared memory (sm_90)",
    "tma": "TMA bulk tensor copies and transaction-count mbarriers (sm_90)",
    "wgmma": "warpgroup MMA (wgmma, sm_90a only)",
    "setmaxnreg": "register reallocation between warpgroups (setmaxnreg, sm_90a only)",
    "stmatrix": "stmatrix (sm_90)",
}
_HOPPER = frozenset(FEATURES)

ARCHES: dict[str, Arch] = {
    a.name: a
    for a in (
        Arch("sm_80", "compute_80", "sm_80", (8, 0), 166912, 167936, 65536, 2048, 32, 108, 2048, 128, 1.41,
             2039.0, "A100-SXM4-80GB"),
        Arch("sm_86", "compute_86", "sm_86", (8, 6), 101376, 102400, 65536, 1536, 16, 84, 1024, 256, 1.70,
             936.0, "RTX 3090 / A40"),
        Arch("sm_89", "compute_89", "sm_89", (8, 9), 101376, 102400, 65536, 1536, 24, 142, 1024, 256, 2.52,
             864.0, "L40S"),
        # mma.sync on Hopper runs at about half of wgmma's peak (4096 FLOP/clk/SM dense 16-bit).
        # cluster_sms: cudaOccupancyMaxActiveClusters on the H200 at one block an SM (30 clusters of 4, 15 of 8,
        # 7 of 16); more blocks an SM fit slightly more, so these, the lower counts, are kept.
        Arch("sm_90a", "compute_90a", "sm_90a", (9, 0), 232448, 233472, 65536, 2048, 32, 132, 2048, 256, 1.98,
             4800.0, "H200-SXM", wgmma_flops_per_sm_clk=4096, cluster_sms=((4, 120), (8, 120), (16, 112)),
             features=_HOPPER),
    )
}


# The host: C++17 kernels for the machine that builds them (families/cpu/). Its GPU fields are zero; sms is the
# cores and fma_flops_per_sm_clk the f32 FLOP a core issues a clock (two 256-bit FMA pipes, AVX-512 or AVX2),
# for the reference part below (CI's and the development machine), cost model only.
CPU = Arch("cpu", "", "", (0, 0), 0, 0, 0, 0, 0, 2, 0, 32, 2.6, 40.0, "2-core AMD EPYC (Zen 4) host",
           backend="cpu")
# Every target `--arch` and a spec's `arch:` may name: the CUDA arches, then the host.
TARGETS: dict[str, Arch] = {**ARCHES, CPU.name: CPU}


def nominal_tflops(arch: Arch, dtype: str) -> float:
    """The reference part's dense peak for inputs of `dtype` from the table's rates (SMs x FLOP a clock x clock), not
    a measurement: what a plot draws, labelled nominal, where a run timed no compute roof. f16 and bf16 run on the
    tensor cores (wgmma where the arch has it), e4m3 at twice their rate, f32 on FFMA (the f32 kernels take no
    TF32); the host converts every dtype to f32."""
    if arch.backend == "cpu" or dtype == "f32":
        per_clock = arch.fma_flops_per_sm_clk
    else:
        per_clock = (arch.wgmma_flops_per_sm_clk or arch.tc_flops_per_sm_clk) * (2 if dtype == "e4m3" else 1)
    return arch.sms * per_clock * arch.clock_ghz / 1e3


def lowest_arch(features: frozenset[str]) -> str | None:
    """The first arch of the table that has every feature, or None when every arch has them all."""
    if all(features <= a.features for a in ARCHES.values()):
        return None
    return next(a.name for a in ARCHES.values() if features <= a.features)


def unbuildable(features: list[str], target: Arch) -> str | None:
    """Why a plan using `features` cannot be built for `target`, or None when it can."""
    unknown = sorted(set(features) - set(FEATURES))
    if unknown:
        return f"it uses {', '.join(unknown)}, which this deepgemm does not know (generated by a newer one?)"
    missing = [f for f in features if f not in target.features]
    if not missing:
        return None
    return f"it uses {'; '.join(FEATURES[f] for f in missing)}, which {target.name} lacks"


def get_arch(name: str) -> Arch:
    try:
        return TARGETS[name]
    except KeyError:
        raise DeepGemmError(f"unsupported arch '{name}': use one of {', '.join(TARGETS)}") from None
