// Does the k order of concurrently running tiles set the TMA read speed of a decode weight? The hopper family's
// blocks all walk K from k = 0 at about the same pace, so at any moment every SM asks for the same 128-byte column
// of its rows: addresses that differ only in the bits above the row stride (8 KB at K = 4096). Here each tile can
// start its k walk at its own k-tile and wrap around (`start` modes below); the set of k-tiles a tile reads is
// unchanged, only the order. No math, as tools/read_patterns.cu (whose pipeline this is: one producer thread, a
// consumer warpgroup freeing the stages), timed as `deepgemm bench` times a kernel (CUDA graph, the weight rotated
// past L2). Call 1 ran the start modes (slower: kept at NONE) and found the map's L2 promotion mattering; the main
// now times every promotion with and without an L2 eviction hint on the loads (`createpolicy`), as call 4 ran it.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o kstart tools/session15/kstart_probe.cu
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "probe_common.cuh"
#include "probe_tma.cuh"

// The same load with an L2 eviction-priority hint (createpolicy): the weight is read once.
__device__ __forceinline__ void tma_load_2d_hint(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                                 uint64_t policy) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "l"(policy) : "memory");
}

template <int ROWS, int STAGES>
constexpr int smem_bytes() { return STAGES * ROWS * 128 + 2 * STAGES * 8 + 1024; }

// start modes: the first k-tile of tile t's slice of `per` k-tiles.
enum Start { NONE = 0, SPREAD = 1, STEP = 2, HASH = 3, HALF = 4 };
// hint: 0 none, 1 evict_first, 2 evict_last, 3 evict_normal (the load's L2 eviction priority).
__device__ __forceinline__ int first_tile(int mode, int t, int tiles, int per) {
  switch (mode) {
    case SPREAD: return int((long long)t * per / tiles) % per;  // tiles spread evenly over the slice
    case STEP: return t % per;                                   // neighbours one k-tile apart
    case HASH: return (t * 29) % per;
    case HALF: return (t % 2) * (per / 2);
    default: return 0;
  }
}

// Block b: rows [(b / splits) * ROWS, + ROWS), k-tiles [(b % splits) * per, + per), per = k_tiles / splits,
// walked from its first tile (mode) round to it.
template <int ROWS, int STAGES>
__global__ void __launch_bounds__(256) tile_read(const __grid_constant__ CUtensorMap map, int k_tiles, int splits,
                                                 int mode, int hint, float* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* const smem = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
  constexpr int STAGE = ROWS * 128;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE);
  uint64_t* const empty = full + STAGES;
  const int tile = blockIdx.x / splits, tiles = gridDim.x / splits;
  const int row0 = tile * ROWS;
  const int per = k_tiles / splits, kt0 = (blockIdx.x % splits) * per;
  init_stage_barriers<STAGES>(full, empty);
  if (threadIdx.x < 128) {
    if (threadIdx.x == 0) {
      int s = 0;
      uint32_t phase = 0;
      int j = first_tile(mode, tile, tiles, per);
      uint64_t policy = 0;
      if (hint == 1) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
      if (hint == 2) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
      if (hint == 3) asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
      for (int i = 0; i < per; ++i) {
        mbar_wait(&empty[s], phase ^ 1);
        mbar_expect_tx(&full[s], STAGE);
        if (hint)
          tma_load_2d_hint(smem + s * STAGE, &map, &full[s], (kt0 + j) * 64, row0, policy);
        else
          tma_load_2d(smem + s * STAGE, &map, &full[s], (kt0 + j) * 64, row0);
        if (++j == per) j = 0;
        if (++s == STAGES) s = 0, phase ^= 1;
      }
    }
  } else {
    consume_stages<STAGES>(smem, STAGE, full, empty, per, threadIdx.x - 128, out);
  }
}

static const char* const MODE_NAMES[] = {"none", "spread", "step", "hash", "half"};

template <int ROWS, int STAGES>
static void tile_row(const Weight& w, int splits, int mode, float* out, cudaStream_t s,
                     CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B, int hint = 0) {
  const std::vector<CUtensorMap> maps = weight_maps(w, ROWS, promo);
  const size_t bytes = size_t(w.n) * w.k * 2;
  constexpr int SMEM = smem_bytes<ROWS, STAGES>();
  auto* kern = tile_read<ROWS, STAGES>;
  const int blocks = (w.n / ROWS) * splits, k_tiles = w.k / 64;
  const double us = time_map_read(kern, w, maps, blocks, SMEM, s, k_tiles, splits, mode, hint, out);
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, SMEM));
  std::printf("tile  N=%5d  rows %3d, %2d stages (%6.1f KB), split %d, start %-6s promo %d hint %d: %4d blocks, "
              "%d an SM  %7.2f us  %5.0f GB/s\n",
              w.n, ROWS, STAGES, (ROWS * 128 * STAGES) / 1024.0, splits, MODE_NAMES[mode], int(promo), hint, blocks,
              per_sm, us, bytes / us / 1e3);
}


int main(int argc, char** argv) {
  const ReadSetup setup = read_setup();  // 4 copies of the big weight, 14 of the small one
  float* const out = setup.out;
  const cudaStream_t s = setup.s;
  const Weight big = setup.big, small = setup.small;

  const int round_count = argc > 1 ? std::atoi(argv[1]) : 2;
  constexpr auto P0 = CU_TENSOR_MAP_L2_PROMOTION_NONE, P1 = CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                 P2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B, P3 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  for (int round = 0; round < round_count; ++round) {
    std::printf("-- round %d\n", round);
    for (int b : {132, 264}) flat_row(big, b, out, s);
    // N = 14336, 112 rows, 8 stages: every promotion, with and without eviction hints.
    for (auto p : {P0, P1, P2, P3})
      for (int h : {0, 1, 2}) tile_row<112, 8>(big, 1, NONE, out, s, p, h);
    // Without promotion: more stages, 224 rows split 2, 128 rows, 56 rows at 2 an SM.
    for (auto p : {P0, P3}) tile_row<112, 12>(big, 1, NONE, out, s, p, 1);
    for (auto p : {P0, P3}) tile_row<224, 6>(big, 2, NONE, out, s, p);
    for (auto p : {P0, P3}) tile_row<112, 6>(big, 2, NONE, out, s, p);
    for (auto p : {P0, P3}) tile_row<128, 8>(big, 1, NONE, out, s, p);
    // N = 4096: 64 rows split 2 (the pick at M = 64).
    for (int b : {132, 264}) flat_row(small, b, out, s);
    for (auto p : {P0, P2, P3})
      for (int h : {0, 1}) tile_row<64, 8>(small, 2, NONE, out, s, p, h);
  }
  return 0;
}
