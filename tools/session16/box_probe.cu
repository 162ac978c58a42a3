// Does the order in which a tile's TMA boxes ask DRAM for the weight set the decode read speed? The hopper family
// streams each block's 112 weight rows in boxes of 112 rows x 64 k: every box asks for 112 separate 128-byte pieces,
// 8 KB apart, and the next 128 bytes of each row come a stage later. Here a stage holds CHUNKS consecutive 64-k
// pieces of every row, loaded as
//   SEP:     CHUNKS 2-d boxes (112 x 64) issued back to back (the family's layout, CHUNKS boxes a stage);
//   GROUPED: one 4-d box (k 64, rows 8, chunks, row groups): for each 8-row group its CHUNKS pieces together,
//            landing as CHUNKS 1024-byte swizzle atoms a group (a layout wgmma reads with SBO = CHUNKS x 1024);
//   ROWWISE: one 3-d box (k 64, chunks, rows): each row's CHUNKS x 128 contiguous bytes together (no wgmma layout:
//            a read ceiling only).
// No math; the pipeline of tools/session15/kstart_probe.cu (one producer thread, a consumer warpgroup freeing the
// stages), timed as `deepgemm bench` times a kernel (CUDA graph, the weight rotated past L2).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o box tools/session16/box_probe.cu
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "probe_common.cuh"
#include "probe_tma.cuh"

enum Mode { SEP = 0, GROUPED = 1, ROWWISE = 2 };
static const char* const MODE_NAMES[] = {"sep", "grouped", "rowwise"};

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}

// One map a copy of the weight for the mode's box.
static std::vector<CUtensorMap> mode_maps(const Weight& w, int mode, int rows, int chunks, CUtensorMapL2promotion promo) {
  if (mode == SEP) return weight_maps(w, rows, promo);
  static const Encode encode = encoder();
  std::vector<CUtensorMap> maps(w.copies);
  const size_t bytes = size_t(w.n) * w.k * 2;
  const cuuint64_t row = cuuint64_t(w.k) * 2;
  for (int c = 0; c < w.copies; ++c) {
    void* g = const_cast<char*>(static_cast<const char*>(w.base) + c * bytes);
    CUresult r;
    if (mode == GROUPED) {
      const cuuint64_t dims[4] = {64, 8, cuuint64_t(w.k / 64), cuuint64_t(w.n / 8)}, strides[3] = {row, 128, 8 * row};
      const cuuint32_t box[4] = {64, 8, cuuint32_t(chunks), cuuint32_t(rows / 8)}, estr[4] = {1, 1, 1, 1};
      r = encode(&maps[c], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, g, dims, strides, box, estr,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    } else {
      const cuuint64_t dims[3] = {64, cuuint64_t(w.k / 64), cuuint64_t(w.n)}, strides[2] = {128, row};
      const cuuint32_t box[3] = {64, cuuint32_t(chunks), cuuint32_t(rows)}, estr[3] = {1, 1, 1};
      r = encode(&maps[c], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, g, dims, strides, box, estr,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    if (r != CUDA_SUCCESS) {
      std::printf("tensor map failed (mode %s, rows %d, chunks %d): %d\n", MODE_NAMES[mode], rows, chunks, int(r));
      return {};
    }
  }
  return maps;
}

// Block b: rows [(b / splits) * ROWS, + ROWS), k-tiles [(b % splits) * per, + per), per = k_tiles / splits, walked
// CHUNKS k-tiles a stage.
template <int ROWS, int STAGES, int CHUNKS, int MODE>
__global__ void __launch_bounds__(256) box_read(const __grid_constant__ CUtensorMap map, int k_tiles, int splits,
                                                float* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* const smem = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
  constexpr int STAGE = ROWS * 128 * CHUNKS;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE);
  uint64_t* const empty = full + STAGES;
  const int row0 = (blockIdx.x / splits) * ROWS;
  const int per = k_tiles / splits, kt0 = (blockIdx.x % splits) * per;
  init_stage_barriers<STAGES>(full, empty);
  if (threadIdx.x < 128) {
    if (threadIdx.x == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int i = 0; i < per; i += CHUNKS) {
        mbar_wait(&empty[s], phase ^ 1);
        mbar_expect_tx(&full[s], STAGE);
        unsigned char* const dst = smem + s * STAGE;
        if (MODE == SEP) {
#pragma unroll
          for (int c = 0; c < CHUNKS; ++c) tma_load_2d(dst + c * ROWS * 128, &map, &full[s], (kt0 + i + c) * 64, row0);
        } else if (MODE == GROUPED) {
          tma_load_4d(dst, &map, &full[s], 0, 0, kt0 + i, row0 / 8);
        } else {
          tma_load_3d(dst, &map, &full[s], 0, kt0 + i, row0);
        }
        if (++s == STAGES) s = 0, phase ^= 1;
      }
    }
  } else {
    consume_stages<STAGES>(smem, STAGE, full, empty, per / CHUNKS, threadIdx.x - 128, out);
  }
}

template <int ROWS, int STAGES, int CHUNKS, int MODE>
static void box_row(const Weight& w, int splits, float* out, cudaStream_t s,
                    CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_NONE) {
  const std::vector<CUtensorMap> maps = mode_maps(w, MODE, ROWS, CHUNKS, promo);
  if (maps.empty()) return;
  const size_t bytes = size_t(w.n) * w.k * 2;
  constexpr int SMEM = STAGES * ROWS * 128 * CHUNKS + 2 * STAGES * 8 + 1024;
  const int blocks = (w.n / ROWS) * splits, k_tiles = w.k / 64;
  const double us = time_map_read(box_read<ROWS, STAGES, CHUNKS, MODE>, w, maps, blocks, SMEM, s, k_tiles, splits, out);
  std::printf("box   N=%5d  rows %3d, %2d stages x %d chunks (%6.1f KB), %-7s split %d promo %d: %4d blocks  %7.2f us  "
              "%5.0f GB/s\n",
              w.n, ROWS, STAGES, CHUNKS, (ROWS * 128 * CHUNKS * STAGES) / 1024.0, MODE_NAMES[MODE], splits, int(promo),
              blocks, us, bytes / us / 1e3);
}


int main(int argc, char** argv) {
  const ReadSetup setup = read_setup();  // 4 copies of the big weight, 14 of the small one
  float* const out = setup.out;
  const cudaStream_t s = setup.s;
  const Weight big = setup.big, small = setup.small;
  constexpr auto P3 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  const int round_count = argc > 1 ? std::atoi(argv[1]) : 2;
  for (int round = 0; round < round_count; ++round) {
    std::printf("-- round %d\n", round);
    for (int b : {132, 264}) flat_row(big, b, out, s);
    // N = 14336, 112 rows a block (128 blocks), about 112 KB and 168 KB in flight.
    box_row<112, 8, 1, SEP>(big, 1, out, s);  // the family's read today
    box_row<112, 8, 1, SEP>(big, 1, out, s, P3);
    box_row<112, 12, 1, SEP>(big, 1, out, s);
    box_row<112, 4, 2, SEP>(big, 1, out, s);
    box_row<112, 4, 2, GROUPED>(big, 1, out, s);
    box_row<112, 4, 2, GROUPED>(big, 1, out, s, P3);
    box_row<112, 4, 2, ROWWISE>(big, 1, out, s);
    box_row<112, 6, 2, SEP>(big, 1, out, s);
    box_row<112, 6, 2, GROUPED>(big, 1, out, s);
    box_row<112, 3, 4, SEP>(big, 1, out, s);
    box_row<112, 3, 4, GROUPED>(big, 1, out, s);
    box_row<112, 3, 4, ROWWISE>(big, 1, out, s);
    box_row<112, 2, 4, GROUPED>(big, 1, out, s);
    // N = 4096, 64 rows split 2 (the hopper pick at M = 64).
    for (int b : {132, 264}) flat_row(small, b, out, s);
    box_row<64, 8, 1, SEP>(small, 2, out, s);
    box_row<64, 4, 2, SEP>(small, 2, out, s);
    box_row<64, 4, 2, GROUPED>(small, 2, out, s);
    box_row<64, 6, 2, GROUPED>(small, 2, out, s);
    box_row<64, 3, 4, GROUPED>(small, 2, out, s);
    box_row<64, 4, 4, GROUPED>(small, 2, out, s);
  }
  return 0;
}
