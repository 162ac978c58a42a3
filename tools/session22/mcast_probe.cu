// Does a TMA multicast read its box from L2 once a cluster on the H200? Session 22 (calls 4, 5) found our hopper
// kernel's A multicast leaving L2's read sectors where they were, while cuBLAS's multicast reads exactly A's half
// fewer. This probe takes the kernel's loads without its math: 128 blocks (one an SM), each walking the whole
// [128, 4096] activation (1 MB, what the 128-row decode kernel reads per tile) in 64-wide k boxes through a ring of
// STAGES stages, and with WITH_B also its own 112 rows of the [14336, 4096] weight (the weight stream, its copies
// rotated past L2). Modes:
//   0  no cluster: every block loads A's whole 128-row box itself (the kernel as planned)
//   1  clusters of 2: each block loads half of A's box and multicasts it into both (tools/session22/multicast.py)
//   2  clusters of 2: block 0 of the cluster loads A's whole box and multicasts it into both
//   3  clusters of 2, no multicast: as mode 0 inside a cluster launch (does the cluster alone change anything?)
// Prints µs a launch per mode, graph-timed as `deepgemm bench` times a kernel (tools/graph_timing.cuh); `once`
// launches each mode once, for ncu (one profiled kernel a mode):
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I tools tools/session22/mcast_probe.cu -o mcast_probe
//   ncu --clock-control none -k regex:probe -c 8 --metrics lts__t_sectors_srcunit_tex_op_read.sum,... ./mcast_probe once
// (tools/session22/call7.sh runs it; written in session 22, run as session 23's call 1: docs/RESULTS.md, "The multicast
// has nothing to save".)
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "probe_common.cuh"
#include "probe_tma.cuh"

constexpr int ROWS = 128, BK = 64, BN = 112, STAGES = 6, BLOCKS = 128, K_ITERS = 4096 / BK;
constexpr int A_BYTES = ROWS * BK * 2, B_BYTES = BN * BK * 2;
constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024;

// ---- What the cluster needs beyond probe_common.cuh's mbarriers and probe_tma.cuh's load.
// An arrive on the barrier at `bar`'s offset in block `block` of the cluster.
__device__ __forceinline__ void mbar_arrive_in_block(uint64_t* bar, uint32_t block) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(block));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
// One box into the same shared-memory offset of every block in `mask`, completing on each one's `bar`.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t mask, int c0,
                                                   int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, { %4, %5}], [%2], %3;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "h"(mask), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// One thread loads and "consumes" (waits for) every stage, STAGES - 1 behind; a stage is refilled once every block
// whose loads write into it has seen it land (with the multicast, both blocks of the cluster).
template <int MODE, bool WITH_B>
__global__ void __launch_bounds__(128) probe(const __grid_constant__ CUtensorMap map_a,
                                             const __grid_constant__ CUtensorMap map_a_half,
                                             const __grid_constant__ CUtensorMap map_b) {
  constexpr bool CLUSTER = MODE != 0, SHARED = MODE == 1 || MODE == 2;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + STAGES * (A_BYTES + B_BYTES));
  uint64_t* const empty = full + STAGES;
  const uint32_t rank = CLUSTER ? cluster_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], SHARED ? 2 : 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CLUSTER) cluster_sync(); else __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned tx = A_BYTES + (WITH_B ? B_BYTES : 0);
    for (int kt = 0; kt < K_ITERS + STAGES - 1; ++kt) {
      if (kt < K_ITERS) {
        const int s = kt % STAGES;
        mbar_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);
        mbar_expect_tx(&full[s], tx);
        unsigned char* const a = smem + s * A_BYTES;
        if (WITH_B) tma_load_2d(smem + STAGES * A_BYTES + s * B_BYTES, &map_b, &full[s], kt * BK, int(blockIdx.x) * BN);
        if (MODE == 1)
          tma_load_multicast(a + rank * (A_BYTES / 2), &map_a_half, &full[s], 0x3, kt * BK, int(rank) * (ROWS / 2));
        else if (MODE == 2) {
          if (rank == 0) tma_load_multicast(a, &map_a, &full[s], 0x3, kt * BK, 0);
        } else {
          tma_load_2d(a, &map_a, &full[s], kt * BK, 0);
        }
      }
      const int kc = kt - (STAGES - 1);
      if (kc >= 0) {
        const int s = kc % STAGES;
        mbar_wait(&full[s], (kc / STAGES) & 1);
        if (SHARED) {
          mbar_arrive_in_block(&empty[s], 0);
          mbar_arrive_in_block(&empty[s], 1);
        } else {
          mbar_arrive(&empty[s]);
        }
      }
    }
  }
  if (CLUSTER) cluster_sync();  // no block leaves while its peer may still write into it or arrive on its barriers
}

// One mode: with `once`, a single launch (for ncu); otherwise graph-timed over the weight's copies in turn.
template <int MODE, bool WITH_B>
static void run(const CUtensorMap& a, const CUtensorMap& a_half, const std::vector<CUtensorMap>& b, cudaStream_t s,
                bool once) {
  auto kernel = probe<MODE, WITH_B>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(BLOCKS);
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = SMEM;
  config.stream = s;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = MODE != 0 ? 1 : 0;
  if (once) {
    CK(cudaLaunchKernelEx(&config, kernel, a, a_half, b[0]));
    CK(cudaStreamSynchronize(s));
    return;
  }
  const int copies = int(b.size());
  const double us = graph_median_us(s, 8 * copies, [&](int l) { CK(cudaLaunchKernelEx(&config, kernel, a, a_half, b[l % copies])); });
  std::printf("mode %d %s: %7.2f us a launch\n", MODE, WITH_B ? "A + weight" : "A alone   ", us);
}

int main(int argc, char** argv) {
  const bool once = argc > 1 && std::string(argv[1]) == "once";
  const ReadSetup rs = read_setup();  // 4 copies of the [14336, 4096] f16 weight, rotated past L2
  void* a;
  CK(cudaMalloc(&a, size_t(ROWS) * 4096 * 2));
  fill_random<<<256, 256>>>(static_cast<uint32_t*>(a), size_t(ROWS) * 4096 / 2);
  CK(cudaDeviceSynchronize());
  // The 128-row decode kernel's promotion (256 B) on every map.
  const Weight act{a, ROWS, 4096, 1};
  const CUtensorMap map_a = weight_maps(act, ROWS, CU_TENSOR_MAP_L2_PROMOTION_L2_256B)[0];
  const CUtensorMap map_a_half = weight_maps(act, ROWS / 2, CU_TENSOR_MAP_L2_PROMOTION_L2_256B)[0];
  const std::vector<CUtensorMap> maps_b = weight_maps(rs.big, BN, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  run<0, false>(map_a, map_a_half, maps_b, rs.s, once);
  run<1, false>(map_a, map_a_half, maps_b, rs.s, once);
  run<2, false>(map_a, map_a_half, maps_b, rs.s, once);
  run<3, false>(map_a, map_a_half, maps_b, rs.s, once);
  run<0, true>(map_a, map_a_half, maps_b, rs.s, once);
  run<1, true>(map_a, map_a_half, maps_b, rs.s, once);
  run<2, true>(map_a, map_a_half, maps_b, rs.s, once);
  run<3, true>(map_a, map_a_half, maps_b, rs.s, once);
  CK(cudaDeviceSynchronize());
  return 0;
}
