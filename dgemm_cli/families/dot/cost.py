"""The `dot` family's cost model (pure) and the facts of a block it prices and the tiling graph checks: the chunk a
thread loads, the vector width of each input's loads, a block's K slice, a thread's registers and the blocks an SM
holds. The estimate (µs) only ranks candidates against each other and the other families; the launch, DRAM and
second-kernel constants are the splitk family's (families/ksplit.py)."""

from __future__ import annotations

import math

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Assignment
from dgemm_cli.families.ksplit import GROUPS_US, LAUNCH_US, MEMORY_LATENCY_US, WARPS_TO_HIDE_LATENCY
from dgemm_cli.views import ProblemViews

DOT_BASE_REGISTERS = 32  # registers of a dot thread besides its loaded chunks (the estimate stays within about
# 16 of what ptxas 13.0 allocates on sm_90a at unroll 8)
FULL_REGISTER_FILE = 255  # registers a thread may hold at most
DOT_REDUCE_US = 0.2  # the block's shuffle tree and the warps' sums
# DRAM latency a stream sees when it keeps DRAM busy (about twice the idle round trip, MEMORY_LATENCY_US): the
# bytes in flight a dot block keeps must cover it (Little's law); set a priori, to be measured.
DOT_LOADED_LATENCY_US = 2.0


def dot_chunk(views: ProblemViews) -> int:
    """Elements along k a thread takes at a time: one 16-byte load of the narrower input."""
    return 16 // min(views.operands["A"].elem_bytes, views.operands["B"].elem_bytes)


def dot_vectors(views: ProblemViews) -> tuple[dict[str, int], dict[str, int]]:
    """Per input, the elements of one load along k (1: element loads through the view's offsets): as the
    spec promises, and when the view pointers are 16-byte aligned. Only an input whose k role is its
    stride-1 role loads vectors; the views cap them so that none straddles a segment."""
    chunk = dot_chunk(views)
    vec, aligned = {}, {}
    for x in ("A", "B"):
        f = views.operands[x]
        unit = f.unit_role == "k"
        vec[x] = min(chunk, f.vector_elems) if unit else 1
        aligned[x] = max(vec[x], min(chunk, f.vector_elems_aligned)) if unit else 1
    return vec, aligned


def dot_slice(views: ProblemViews, groups: int) -> int:
    """Elements of K a block sums: K over the groups, rounded up to whole chunks (aligned vector loads)."""
    chunk = dot_chunk(views)
    return math.ceil(math.ceil(views.k / groups) / chunk) * chunk


def dot_registers(views: ProblemViews, unroll: int, wide: bool) -> int:
    """A thread's registers: its loaded chunks (a vector load packs 16-bit elements two a register, an
    element load takes a register an element) and DOT_BASE_REGISTERS."""
    vec, aligned = dot_vectors(views)
    chunk = dot_chunk(views)
    per_chunk = 0
    for x in ("A", "B"):
        v = (aligned if wide else vec)[x]
        per_chunk += math.ceil(chunk * views.operands[x].elem_bytes / 4) if v > 1 else chunk
    return DOT_BASE_REGISTERS + unroll * per_chunk


def dot_resident(views: ProblemViews, arch: Arch, threads: int, unroll: int) -> int:
    """Blocks an SM holds (the wide instantiation's registers)."""
    return max(1, min(arch.max_threads_per_sm // threads, arch.max_blocks_per_sm,
                      arch.regs_per_sm // (threads * dot_registers(views, unroll, True))))


def _dot_bytes_per_k(views: ProblemViews) -> float:
    """Bytes one k element costs from both inputs: the element where k is the input's stride-1 role, four
    times it where the loads along k are strided (a sector each; L2 absorbs part), nothing where the
    input is broadcast over K."""
    out = 0.0
    for x in ("A", "B"):
        f = views.operands[x]
        if "k" in f.roles:
            out += f.elem_bytes * (1 if f.unit_role == "k" else 4)
    return out


def _dot_cost(views: ProblemViews, arch: Arch):
    """Estimated µs, only to rank: both inputs streamed once at the bandwidth the blocks' loads in flight
    sustain (Little's law against DOT_LOADED_LATENCY_US, capped by the busy SMs' share of DRAM), or the
    instruction issue; plus the block reduction, the launch, and with groups the second kernel."""
    chunk = dot_chunk(views)
    dram = arch.dram_gbps * 1e3  # bytes per µs
    tiles = views.batch
    per_k = _dot_bytes_per_k(views)
    load_bytes = chunk * sum(views.operands[x].elem_bytes for x in ("A", "B"))
    sixteen_bit = max(views.operands[x].elem_bytes for x in ("A", "B")) < 4

    def cost(a: Assignment) -> float:
        threads, unroll, groups = a["threads"], a["unroll"], a["groups"]
        blocks = tiles * groups
        k_slice = dot_slice(views, groups)
        resident = dot_resident(views, arch, threads, unroll)
        concurrent = min(blocks, arch.sms * resident)
        busy = min(blocks, arch.sms)
        # A block has at most its slice in flight.
        per_block = min(threads * unroll * load_bytes, k_slice * load_bytes / chunk)
        in_flight = concurrent * per_block
        warps_per_sm = min(resident, math.ceil(blocks / arch.sms)) * threads / 32
        bandwidth = (min(dram * busy / arch.sms, in_flight / DOT_LOADED_LATENCY_US)
                     * min(1.0, warps_per_sm / WARPS_TO_HIDE_LATENCY))
        mem_us = tiles * views.k * per_k / bandwidth
        # An FMA (and two conversions for 16-bit inputs) an element pair, issued a warp at a time, four an SM a clock.
        waves = math.ceil(blocks / (arch.sms * resident))
        rounds = math.ceil(k_slice / (threads * chunk * unroll))
        per_sm = min(resident, math.ceil(blocks / arch.sms))  # blocks an SM runs at once
        issue_us = (waves * per_sm * rounds * unroll * chunk * (3 if sixteen_bit else 1)
                    * threads / 32 / 4 / (arch.clock_ghz * 1e3))
        total = max(mem_us, issue_us) + DOT_REDUCE_US + LAUNCH_US + MEMORY_LATENCY_US
        if groups > 1:
            total += GROUPS_US + 2 * blocks * 4 / dram
        return total

    return cost
