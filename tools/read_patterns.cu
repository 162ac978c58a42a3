// How the order in which a decode kernel pulls its weight from DRAM sets its speed. No math: each block streams
// its tile of a [N rows][K] f16 weight (k contiguous, nn.Linear's layout) through a TMA pipeline the way the
// hopper family does (one producer thread, a consumer warpgroup freeing the stages), and the grid-stride read of
// tools/launch_floor.cu is the reference. Timed as `deepgemm bench` times a kernel: launches captured in one
// CUDA graph, each on its own copy of the weight in a rotation past L2; time / launches.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o read_patterns tools/read_patterns.cu && ./read_patterns
// A row `rows R, KB boxes a stage, S stages, split P`: a block owns R rows of the weight and 1/P of K; a stage holds
// KB boxes of R rows x 64 k (128 bytes of each row), adjacent along k, so a stage asks DRAM for KB x 128
// contiguous bytes of each of its rows. KB = 1 is the hopper family's stage today.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "probe_common.cuh"
#include "probe_tma.cuh"

template <int ROWS, int KB, int STAGES>
constexpr int smem_bytes() { return STAGES * KB * ROWS * 128 + 2 * STAGES * 8 + 1024; }

// Block b: rows [(b / splits) * ROWS, + ROWS), k-tiles [(b % splits) * k_tiles / splits, + k_tiles / splits).
template <int ROWS, int KB, int STAGES>
__global__ void __launch_bounds__(256) tile_read(const __grid_constant__ CUtensorMap map, int k_tiles, int splits,
                                                 float* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* const smem = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
  constexpr int BOX = ROWS * 128, STAGE = KB * BOX;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE);
  uint64_t* const empty = full + STAGES;
  const int row0 = (blockIdx.x / splits) * ROWS;
  const int per = k_tiles / splits, kt0 = (blockIdx.x % splits) * per;
  init_stage_barriers<STAGES>(full, empty);
  if (threadIdx.x < 128) {
    if (threadIdx.x == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int kt = kt0; kt < kt0 + per; kt += KB) {
        mbar_wait(&empty[s], phase ^ 1);
        mbar_expect_tx(&full[s], STAGE);
#pragma unroll
        for (int j = 0; j < KB; ++j) tma_load_2d(smem + s * STAGE + j * BOX, &map, &full[s], (kt + j) * 64, row0);
        if (++s == STAGES) s = 0, phase ^= 1;
      }
    }
  } else {
    consume_stages<STAGES>(smem, STAGE, full, empty, (per + KB - 1) / KB, threadIdx.x - 128, out);
  }
}

template <int ROWS, int KB, int STAGES>
static void tile_row(const Weight& w, int splits, float* out, cudaStream_t s) {
  const std::vector<CUtensorMap> maps = weight_maps(w, ROWS, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  const size_t bytes = size_t(w.n) * w.k * 2;
  constexpr int SMEM = smem_bytes<ROWS, KB, STAGES>();
  auto* kern = tile_read<ROWS, KB, STAGES>;
  const int blocks = (w.n / ROWS) * splits, k_tiles = w.k / 64;
  const double us = time_map_read(kern, w, maps, blocks, SMEM, s, k_tiles, splits, out);
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, SMEM));
  std::printf("tile  N=%5d  rows %3d, %d box(es) a stage (%4d B a row), %d stages (%6.1f KB), split %d: %4d blocks, "
              "%d an SM  %7.2f us  %5.0f GB/s\n",
              w.n, ROWS, KB, KB * 128, STAGES, (KB * ROWS * 128 * STAGES) / 1024.0, splits, blocks, per_sm, us,
              bytes / us / 1e3);
}


int main() {
  const ReadSetup setup = read_setup();  // 4 copies of the big weight, 14 of the small one
  float* const out = setup.out;
  const cudaStream_t s = setup.s;
  const Weight big = setup.big, small = setup.small;
  void* const buf = const_cast<void*>(big.base);
  const size_t total = size_t(big.copies) * big.n * big.k * 2;

  // Zeros first (does the data matter?), then the random weight again.
  CK(cudaMemset(buf, 0, total));
  for (int b : {132, 264}) flat_row(big, b, out, s, "zeros");
  fill_random<<<1024, 256>>>(static_cast<uint32_t*>(buf), total / 4);
  CK(cudaDeviceSynchronize());
  for (int b : {132, 264, 528}) flat_row(big, b, out, s);
  for (int b : {132, 264}) flat_row(small, b, out, s);

  // N = 14336: the hopper family's 64x112 tile today (rows 112, one box, 8 stages), then the same bytes in
  // flight in fewer, longer stages; 2 blocks an SM; a K split.
  tile_row<112, 1, 8>(big, 1, out, s);
  tile_row<112, 2, 4>(big, 1, out, s);
  tile_row<112, 4, 2>(big, 1, out, s);
  tile_row<112, 2, 6>(big, 1, out, s);
  tile_row<112, 4, 3>(big, 1, out, s);
  tile_row<112, 8, 1>(big, 1, out, s);
  tile_row<56, 1, 8>(big, 1, out, s);
  tile_row<56, 2, 6>(big, 1, out, s);
  tile_row<56, 4, 3>(big, 1, out, s);
  tile_row<112, 1, 6>(big, 2, out, s);
  tile_row<112, 2, 3>(big, 2, out, s);
  tile_row<224, 1, 6>(big, 2, out, s);
  tile_row<224, 2, 3>(big, 2, out, s);
  tile_row<128, 1, 8>(big, 1, out, s);
  tile_row<128, 4, 2>(big, 1, out, s);
  // N = 4096: 64x64 tiles split 2 today.
  tile_row<64, 1, 8>(small, 2, out, s);
  tile_row<64, 2, 4>(small, 2, out, s);
  tile_row<64, 4, 2>(small, 2, out, s);
  tile_row<64, 4, 3>(small, 2, out, s);
  tile_row<32, 1, 8>(small, 1, out, s);
  tile_row<32, 4, 4>(small, 1, out, s);
  tile_row<64, 2, 4>(small, 4, out, s);
  tile_row<64, 4, 2>(small, 4, out, s);
  return 0;
}
