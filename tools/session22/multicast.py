"""Session 22's variant of hopper's one-tile-row kernels: A multicast over clusters of MULTICAST blocks.

    python3 tools/session22/multicast.py SRC DST NAME=MULTICAST...

Each named directory of SRC is copied to DST/<name>_mc<MULTICAST> (session 19's copy_renamed.py) and patched.
The blocks of a cluster (consecutive along x) hold neighbouring tiles of the one tile row, so they read the same A
stages: each loads 1/MULTICAST of every A box and multicasts it into the same stage of every block of the cluster.
A stage is free when the consumers of every block of the cluster have released it (each consumer warp arrives on
every block's `empty` barrier, with the default .release.cta arrive: session 11's call 5 found .release.cluster
compiling to a memory barrier before each arrive). Cluster barriers after the barrier setup and before exit.

Why (session 22, call 1, ncu at boost clocks): the L2 throughput's largest part is the fabric between the two L2
partitions (lts__ltcfabric2ltc_cycles_active 80.6-82.6% in ours at 64 and 128 rows and in cuBLAS's 128-row
kernel), and its busy time follows A's L2 reads: ours at 128 rows (128 MB of A) is 3.3 µs-equivalents busier than
at 64 rows (64 MB), cuBLAS's 128-row kernel (A multicast over clusters of 2: 64 MB) about as busy as our 64-row one.
Session 11 measured a multicast 0.8 µs slower at 128 rows, on a kernel without the later launch and prefetch.

Valid only for the fixed-size kernels of one tile row whose grid gives every block one tile (TILES <= SMs, TILES a
multiple of MULTICAST): the variant static_asserts the first and rounds the grid to whole clusters."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import patch_copies  # noqa: E402

HELPERS = r'''
// ---- The A multicast (tools/session22/multicast.py).
// One box into the same shared-memory offset of every block in `cta_mask`, completing on each one's `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                      uint16_t cta_mask, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, { %4, %5}], [%2], %3;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "h"(cta_mask), "r"(c0), "r"(c1) : "memory");
}
// An arrive on the barrier at `bar`'s offset in block `block` of the cluster (.release.cta: the stage's readers are
// this warp's finished wgmmas).
__device__ __forceinline__ void mbar_arrive_in_block(uint64_t* bar, uint32_t block) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(block));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
// Every thread of every block of the cluster (threads arrive from divergent paths: not .aligned).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}
'''

LAUNCH_OLD = '''  cudaLaunchAttribute attrs[1];
  // This grid may be scheduled while the previous kernel in the stream finishes (it waits for it before
  // touching memory): a kernel's launch and prologue overlap its predecessor's tail.
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attrs;
  config.numAttrs = (dependent) ? 1 : 0;'''
LAUNCH_NEW = '''  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = MULTICAST;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attrs;
  config.numAttrs = (dependent) ? 2 : 1;'''


def patch(text: str, mc: int) -> str:
    subs = [
        (r"(constexpr int RASTER = \d+;[^\n]*\n)",
         rf"\1constexpr int MULTICAST = {mc};  // blocks a cluster, each loading 1/MULTICAST of every A box\n"),
        (r"(constexpr int TILES = \d+;[^\n]*\n)",
         r"\1static_assert(TILES_M == 1 && TILES % MULTICAST == 0, "
         '"the multicast variant: one tile row, whole clusters");\n'),
        (r"(constexpr int STAGE_TX_BYTES = A_STAGE_BYTES \+ B_STAGE_BYTES;[^\n]*\n)",
         r"\1constexpr int A_SHARE_ROWS = BM / MULTICAST;  // rows of A's box each block loads and multicasts\n"
         "static_assert(A_SHARE_ROWS % 8 == 0, \"a block's share of A is whole swizzle atoms\");\n"),
        (r"(// ---- wgmma\. A shared-memory matrix descriptor)", HELPERS.replace("\\", "\\\\") + r"\n\1"),
        (r"mbar_init\(&empty\[s\], CONSUMERS \* 4\);", "mbar_init(&empty[s], CONSUMERS * 4 * MULTICAST);"),
        (r"  __syncthreads\(\);\n  // Barriers are set up",
         "  cluster_sync();  // every block's barriers are set up before a peer's multicast completes on them\n"
         "  const int rank = int(blockIdx.x) % MULTICAST;  // this block's place in its cluster\n"
         "  // Barriers are set up"),
        (r"tma_load_2d\(smem \+ A_OFFSET \+ stage \* A_STAGE_BYTES, &tmap_a, &full\[stage\], k0, tile\.m0\);",
         "tma_load_2d_multicast(smem + A_OFFSET + stage * A_STAGE_BYTES + rank * A_SHARE_ROWS * 128, &tmap_a, "
         "&full[stage], uint16_t((1u << MULTICAST) - 1), k0, tile.m0 + rank * A_SHARE_ROWS);"),
        (r"\n}\n\n// ---- Host side",
         "\n  cluster_sync();  // no block leaves while a peer may still multicast into it or arrive on its barriers\n"
         "}\n\n// ---- Host side"),
        (r"(bool encode_a\(CUtensorMap\* map, const void\* view\) \{\n(?:[^\n]*\n){2}"
         r"  const cuuint32_t box\[2\] = \{ 64, )(\d+) \};",
         r"\1\2 / MULTICAST };"),
        (r"(  const int grid = [^\n]*\n)",
         r"\1  static_assert(TILES <= 132, " '"the multicast variant: every block one tile on the H200");\n'),
    ]
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text, count=1)
        assert n == 1, pattern
    text, n = re.subn(r"if \(lane == 0\) mbar_arrive\(&empty\[last\]\);",
                      "if (lane < MULTICAST) mbar_arrive_in_block(&empty[last], lane);", text)
    assert n == 2, "release"
    assert text.count(LAUNCH_OLD) == 1, "launch"
    text = text.replace(LAUNCH_OLD, LAUNCH_NEW)
    text = text.replace("  config.gridDim = dim3(grid);", "  config.gridDim = dim3(grid / MULTICAST * MULTICAST);")
    return text


if __name__ == "__main__":
    patch_copies(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:],
                 lambda text, v: patch(text, int(v)), lambda v: f"_mc{v}")
