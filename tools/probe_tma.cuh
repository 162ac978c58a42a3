// What the TMA probes in tools/ share (read_patterns.cu, session14/smact_probe.cu, session15/kstart_probe.cu,
// session22/mcast_probe.cu):
// cuTensorMapEncodeTiled through the runtime's driver entry point (the probes link only the CUDA runtime); and for
// the weight-read probes (read_patterns.cu, session15/kstart_probe.cu, session16/box_probe.cu) the random weight,
// its tensor maps, the mains' setup, the graph-timed read, the grid-stride reference read and the consumer
// warpgroup that frees the stages without math.
// Include probe_common.cuh first (smem_u32, the mbarriers).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "graph_timing.cuh"

using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                            const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                            CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static Encode encoder() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
  return reinterpret_cast<Encode>(p);
}

// A [n rows][k] f16 weight (k contiguous, nn.Linear's layout), `copies` of it back to back (rotated past L2).
struct Weight {
  const void* base;
  int n, k, copies;
};

// Random finite f16 pairs in every word.
__global__ void fill_random(uint32_t* p, size_t words) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) * 40503u;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    p[i] = x & 0x3bff3bffu;  // finite f16 pairs
  }
}

// One tensor map a copy of the weight: boxes of `rows` rows x 64 k, 128-byte swizzle, the given L2 promotion.
static std::vector<CUtensorMap> weight_maps(const Weight& w, int rows, CUtensorMapL2promotion promo) {
  static const Encode encode = encoder();
  std::vector<CUtensorMap> maps(w.copies);
  const size_t bytes = size_t(w.n) * w.k * 2;
  for (int c = 0; c < w.copies; ++c) {
    const cuuint64_t dims[2] = {cuuint64_t(w.k), cuuint64_t(w.n)}, strides[1] = {cuuint64_t(w.k) * 2};
    const cuuint32_t box[2] = {64, cuuint32_t(rows)}, estr[2] = {1, 1};
    void* g = const_cast<char*>(static_cast<const char*>(w.base) + c * bytes);
    if (encode(&maps[c], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, g, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::printf("tensor map failed\n");
      std::exit(1);
    }
  }
  return maps;
}

__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}

// Thread 0 sets up a read probe's stage barriers (`full`: the producer's expect_tx; `empty`: one arrive a consumer
// warp), then the block waits for them.
template <int STAGES>
__device__ __forceinline__ void init_stage_barriers(uint64_t* full, uint64_t* empty) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// What the weight-read probes' mains set up: 470 MB of random f16 holding 4 copies of the [14336, 4096] weight and
// 14 of the [4096, 4096] one (each copy rotated past L2), a small output and a stream.
struct ReadSetup {
  float* out;
  cudaStream_t s;
  Weight big, small;
};

static ReadSetup read_setup() {
  const size_t total = size_t(4) * 14336 * 4096 * 2;
  void* buf;
  float* out;
  CK(cudaMalloc(&buf, total));
  CK(cudaMalloc(&out, 1 << 20));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fill_random<<<1024, 256>>>(static_cast<uint32_t*>(buf), total / 4);
  CK(cudaDeviceSynchronize());
  return {out, s, Weight{buf, 14336, 4096, 4}, Weight{buf, 4096, 4096, 14}};
}

// µs of one read of `w` by a 256-thread tile-read kernel on `blocks` blocks with `smem` bytes of dynamic shared
// memory: launched over the copies' maps in turn (the map its first argument, `args` after it), graph-timed.
template <typename Kernel, typename... Args>
static double time_map_read(Kernel kern, const Weight& w, const std::vector<CUtensorMap>& maps, int blocks, int smem,
                            cudaStream_t s, Args... args) {
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double us = graph_median_us(s, 8 * w.copies, [&](int l) {
    kern<<<blocks, 256, smem, s>>>(maps[l % w.copies], args...);
  });
  CK(cudaGetLastError());
  return us;
}

// The reference read of the same weight: grid-stride 16-byte loads (read_kernel) on `blocks` blocks of 512 threads,
// timed as the probes' TMA reads are; `what` names the data in the line printed.
static void flat_row(const Weight& w, int blocks, float* out, cudaStream_t s, const char* what = "random") {
  const size_t bytes = size_t(w.n) * w.k * 2;
  const double us = graph_median_us(s, 8 * w.copies, [&](int l) {
    read_kernel<8><<<blocks, 512, 0, s>>>(
        reinterpret_cast<const uint4*>(static_cast<const char*>(w.base) + (l % w.copies) * bytes), bytes / 16, out);
  });
  std::printf("flat  N=%5d  grid-stride (%s), %4d blocks of 512 threads  %7.2f us  %5.0f GB/s\n", w.n, what, blocks, us,
              bytes / us / 1e3);
}

// The consumer warpgroup of a read probe (thread t of 128): waits for each of `iters` stages in ring order, reads one
// word of it (so the load is used) and frees it, one arrive a warp (`empty` counts 4).
template <int STAGES>
__device__ __forceinline__ void consume_stages(const unsigned char* smem, int stage_bytes, uint64_t* full,
                                               uint64_t* empty, int iters, int t, float* out) {
  float sum = 0.0f;
  int s = 0;
  uint32_t phase = 0;
  for (int i = 0; i < iters; ++i) {
    mbar_wait(&full[s], phase);
    sum += reinterpret_cast<const float*>(smem + s * stage_bytes)[t];
    __syncwarp();
    if (t % 32 == 0) mbar_arrive(&empty[s]);
    if (++s == STAGES) s = 0, phase ^= 1;
  }
  if (sum == 1234.5f) out[blockIdx.x] = sum;
}
