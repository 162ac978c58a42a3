// Does a TMA multicast read its box from L2 once a cluster on the H200? Session 22 (calls 4, 5) found our hopper
// kernel's A multicast leaving L2's read sectors where they were, while cuBLAS's multicast reads exactly A's half
// fewer. This probe takes the kernel's loads without its math: 128 blocks (one an SM), each walking the whole
// [128, 4096] bf16 activation (1 MB, what the 128-row decode kernel reads per tile) in 64-wide k boxes through a
// ring of STAGES stages, and with WITH_B also its own 112 rows of a [14336, 4096] weight (the weight stream).
// Modes:
//   0  no cluster: every block loads A's whole 128-row box itself (the kernel as planned)
//   1  clusters of 2: each block loads half of A's box and multicasts it into both (tools/session22/multicast.py)
//   2  clusters of 2: block 0 of the cluster loads A's whole box and multicasts it into both
//   3  clusters of 2, no multicast: as mode 0 inside a cluster launch (does the cluster alone change anything?)
// Prints µs a launch per mode (CUDA events, 20 launches); `mcast_probe once` launches each mode once, for ncu:
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/session22/mcast_probe.cu -o mcast_probe
//   ncu --clock-control none -k regex:probe --metrics lts__t_sectors_srcunit_tex_op_read.sum,... ./mcast_probe once
// (tools/session22/call7.sh runs it; written in session 22 after the device time ran out, not yet run.)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

constexpr int ROWS = 128, K = 4096, BK = 64, N = 14336, BN = 112, STAGES = 6, BLOCKS = 128;
constexpr int A_BYTES = ROWS * BK * 2, B_BYTES = BN * BK * 2, K_ITERS = K / BK;
constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// An arrive on the barrier at `bar`'s offset in block `block` of the cluster (the block itself included).
__device__ __forceinline__ void mbar_arrive_in_block(uint64_t* bar, uint32_t block) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(block));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, { %3, %4}], [%2];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}
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
__global__ void __launch_bounds__(128) probe(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_a_half,
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
        if (WITH_B) tma_load(smem + STAGES * A_BYTES + s * B_BYTES, &map_b, &full[s], kt * BK, int(blockIdx.x) * BN);
        if (MODE == 1)
          tma_load_multicast(a + rank * (A_BYTES / 2), &map_a_half, &full[s], 0x3, kt * BK, int(rank) * (ROWS / 2));
        else if (MODE == 2) {
          if (rank == 0) tma_load_multicast(a, &map_a, &full[s], 0x3, kt * BK, 0);
        } else {
          tma_load(a, &map_a, &full[s], kt * BK, 0);
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

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static bool encode(EncodeTiledFn fn, CUtensorMap* map, void* base, uint64_t rows, uint32_t box_rows,
                   CUtensorMapL2promotion promotion) {
  const cuuint64_t dims[2] = {K, rows};
  const cuuint64_t strides[1] = {K * 2};
  const cuuint32_t box[2] = {BK, box_rows};
  const cuuint32_t unit[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Each mode launched 3 times untimed, then 20 times between two events; with `once`, one launch and no timing
// (for ncu: one profiled kernel a mode).
template <int MODE, bool WITH_B>
static int run(const CUtensorMap& a, const CUtensorMap& a_half, const CUtensorMap& b, cudaStream_t stream, bool once) {
  auto kernel = probe<MODE, WITH_B>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(BLOCKS);
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = SMEM;
  config.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = MODE != 0 ? 1 : 0;
  for (int i = 0; i < (once ? 1 : 3); ++i) CK(cudaLaunchKernelEx(&config, kernel, a, a_half, b));
  if (once) return 0;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, stream));
  for (int i = 0; i < 20; ++i) CK(cudaLaunchKernelEx(&config, kernel, a, a_half, b));
  CK(cudaEventRecord(e1, stream));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  printf("mode %d %s: %.2f us a launch\n", MODE, WITH_B ? "A + weight" : "A alone   ", 1000.0f * ms / 20);
  return 0;
}

int main(int argc, char** argv) {
  const bool once = argc > 1 && std::string(argv[1]) == "once";
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess) { printf("no cuTensorMapEncodeTiled\n"); return 1; }
  const auto fn = reinterpret_cast<EncodeTiledFn>(p);
  __nv_bfloat16 *a, *b;
  CK(cudaMalloc(&a, size_t(ROWS) * K * 2));
  CK(cudaMalloc(&b, size_t(N) * K * 2));
  CK(cudaMemset(a, 0, size_t(ROWS) * K * 2));
  CK(cudaMemset(b, 0, size_t(N) * K * 2));
  CUtensorMap map_a, map_a_half, map_b;
  // The promotions of the 128-row decode kernel's maps (256 B on both).
  if (!encode(fn, &map_a, a, ROWS, ROWS, CU_TENSOR_MAP_L2_PROMOTION_L2_256B) ||
      !encode(fn, &map_a_half, a, ROWS, ROWS / 2, CU_TENSOR_MAP_L2_PROMOTION_L2_256B) ||
      !encode(fn, &map_b, b, N, BN, CU_TENSOR_MAP_L2_PROMOTION_L2_256B)) {
    printf("encode failed\n");
    return 1;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int rc = 0;
  rc |= run<0, false>(map_a, map_a_half, map_b, s, once);
  rc |= run<1, false>(map_a, map_a_half, map_b, s, once);
  rc |= run<2, false>(map_a, map_a_half, map_b, s, once);
  rc |= run<3, false>(map_a, map_a_half, map_b, s, once);
  rc |= run<0, true>(map_a, map_a_half, map_b, s, once);
  rc |= run<1, true>(map_a, map_a_half, map_b, s, once);
  rc |= run<2, true>(map_a, map_a_half, map_b, s, once);
  rc |= run<3, true>(map_a, map_a_half, map_b, s, once);
  CK(cudaDeviceSynchronize());
  return rc;
}
