// Why do our 128-row decode loads cross L2's partition fabric more than cuBLAS's? Session 23, call 1 (ncu, one
// kernel at a time): at [128,4096]x[4096,14336] bf16 cuBLAS's kernel moves 1.94 M sectors over the fabric, 90 K of
// them hits in the far partition; ours (and tools/session22/mcast_probe.cu's loads alone) 2.8-3.2 M, 1.3 M of them
// hits: A's lines read again from the far partition instead of the near one's copy, while the fabric is what bounds
// L2 (80% busy). This probe issues the kernel's loads without its math (128 blocks, one an SM; each walks the whole
// [128, 4096] activation and its own 112 rows of the [14336, 4096] weight in 64-wide k boxes, 6 stages; the weight's
// copies rotated past L2) under each of: both maps' L2 promotion (none, 256 B), and an L2 eviction priority on the
// weight's loads (evict_first) and on A's (evict_last), given as TMA cache hints. Lines "variant: µs", graph-timed as
// `deepgemm bench` times a kernel (tools/graph_timing.cuh); `once` launches each variant once in the same order,
// for ncu:
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I tools tools/session23/l2_probe.cu -o l2_probe
//   ncu --clock-control none -k regex:probe -c 10 --metrics lts__t_sectors_srcunit_ltcfabric.sum,... ./l2_probe once
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

enum Hint { NONE = 0, EVICT_FIRST = 1, EVICT_LAST = 2 };

// One box, with an L2 eviction priority for the lines it brings in when `hint` is set.
template <int HINT>
__device__ __forceinline__ void load_hinted(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  if constexpr (HINT == NONE) {
    tma_load_2d(dst, map, bar, c0, c1);
  } else {
    uint64_t policy;
    if constexpr (HINT == EVICT_FIRST)
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    else
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%3, %4}], [%2], %5;\n"
                 ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "l"(policy) : "memory");
  }
}

// One thread loads every stage (the weight's box first, as the kernel does) and waits for each, STAGES - 1 behind.
template <bool WITH_A, int HINT_A, int HINT_B>
__global__ void __launch_bounds__(128) probe(const __grid_constant__ CUtensorMap map_a,
                                             const __grid_constant__ CUtensorMap map_b) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + STAGES * (A_BYTES + B_BYTES));
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  constexpr unsigned tx = B_BYTES + (WITH_A ? A_BYTES : 0);
  for (int kt = 0; kt < K_ITERS + STAGES - 1; ++kt) {
    if (kt < K_ITERS) {
      const int s = kt % STAGES;
      mbar_expect_tx(&full[s], tx);
      load_hinted<HINT_B>(smem + STAGES * A_BYTES + s * B_BYTES, &map_b, &full[s], kt * BK, int(blockIdx.x) * BN);
      if (WITH_A) load_hinted<HINT_A>(smem + s * A_BYTES, &map_a, &full[s], kt * BK, 0);
    }
    const int kc = kt - (STAGES - 1);
    if (kc >= 0) mbar_wait(&full[kc % STAGES], (kc / STAGES) & 1);  // the stage is free again once it landed
  }
}

struct Maps {
  CUtensorMap a;
  std::vector<CUtensorMap> b;
};

template <bool WITH_A, int HINT_A, int HINT_B>
static void run(const char* name, const Maps& m, cudaStream_t s, bool once) {
  auto kernel = probe<WITH_A, HINT_A, HINT_B>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  if (once) {
    kernel<<<BLOCKS, 128, SMEM, s>>>(m.a, m.b[0]);
    CK(cudaStreamSynchronize(s));
    std::printf("%s\n", name);
    return;
  }
  const int copies = int(m.b.size());
  const double us = graph_median_us(s, 8 * copies, [&](int l) { kernel<<<BLOCKS, 128, SMEM, s>>>(m.a, m.b[l % copies]); });
  CK(cudaGetLastError());
  std::printf("%-40s %7.2f us a launch\n", name, us);
}

int main(int argc, char** argv) {
  const bool once = argc > 1 && std::string(argv[1]) == "once";
  const ReadSetup rs = read_setup();  // 4 copies of the [14336, 4096] f16 weight, rotated past L2
  void* a;
  CK(cudaMalloc(&a, size_t(ROWS) * 4096 * 2));
  fill_random<<<256, 256>>>(static_cast<uint32_t*>(a), size_t(ROWS) * 4096 / 2);
  CK(cudaDeviceSynchronize());
  const Weight act{a, ROWS, 4096, 1};
  auto maps = [&](CUtensorMapL2promotion pa, CUtensorMapL2promotion pb) {
    return Maps{weight_maps(act, ROWS, pa)[0], weight_maps(rs.big, BN, pb)};
  };
  const auto P256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B, PNONE = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  const Maps both256 = maps(P256, P256), none = maps(PNONE, PNONE), a256 = maps(P256, PNONE), b256 = maps(PNONE, P256);
  run<false, NONE, NONE>("weight alone, 256B", both256, rs.s, once);
  run<false, NONE, NONE>("weight alone, no promotion", none, rs.s, once);
  run<true, NONE, NONE>("A 256B, B 256B (the kernel)", both256, rs.s, once);
  run<true, NONE, NONE>("A none, B none", none, rs.s, once);
  run<true, NONE, NONE>("A 256B, B none", a256, rs.s, once);
  run<true, NONE, NONE>("A none, B 256B", b256, rs.s, once);
  run<true, NONE, EVICT_FIRST>("256B, B evict_first", both256, rs.s, once);
  run<true, EVICT_LAST, NONE>("256B, A evict_last", both256, rs.s, once);
  run<true, EVICT_LAST, EVICT_FIRST>("256B, A evict_last, B evict_first", both256, rs.s, once);
  run<true, EVICT_LAST, EVICT_FIRST>("none, A evict_last, B evict_first", none, rs.s, once);
  CK(cudaDeviceSynchronize());
  return 0;
}
