// dg/hopper_multicast.cuh — the `hopper` family's A-multicast kernel: a persistent grid of clusters of A_PARTS blocks
// along n. The blocks of a cluster run tile columns A_PARTS j .. A_PARTS j + A_PARTS - 1 of one tile row, each
// loading A_BM / A_PARTS rows of the row's A box into every block of the cluster (TMA multicast). The grid's tile
// columns are rounded up to whole clusters: a column past N loads B's zero fill and stores nothing.
#pragma once

#include "hopper_common.cuh"

namespace dg {
namespace hopper {

template <class T>
__global__ void __launch_bounds__(Config<T>::THREADS, T::CTAS_PER_SM)
    multicast_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                     typename T::C_param* __restrict__ C, const int m_inner_arg, const typename T::Epilogue ep,
                     float alpha, float beta) {
  using Cfg = Config<T>;
  static_assert(T::A_PARTS > 1 && T::SPLITS == 1 && !T::rows_at_run_time && !T::FLAT_ROWS,
                "A multicast: fixed rows, no K split, no flat rows");
  (void)m_inner_arg;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::BAR_OFFSET);
  uint64_t* const empty = full + T::STAGES;
  const uint32_t stages_a = smem_u32(smem + Cfg::A_OFFSET), stages_b = smem_u32(smem + Cfg::B_OFFSET);
  const int a_part = int(cluster_rank());  // the part of A's box this block loads for its cluster
  constexpr int TILES = T::TILES;

  if (threadIdx.x == 0) {
    prefetch_tensormap(&tmap_a);
    prefetch_tensormap(&tmap_b);
    // Before the wait for the previous grid: this block's part of A's boxes of its first stages into L2, so that
    // the stream of A (read once a tile row) is already running while that grid finishes.
    prefetch_first_stages<T>(&tmap_a, &tmap_b, TILES, T::TILES_M, a_part);
    for (int s = 0; s < T::STAGES; ++s) {
      mbar_init(&full[s], 1);                           // the producer's arrive.expect_tx
      mbar_init(&empty[s], T::CONSUMERS * 4 * T::A_PARTS);  // one arrive per consumer warp of every block of the cluster
    }
    mbar_init_fence();
  }
  cluster_barrier();  // every block's barriers are set up before a multicast or a release reaches them
  // Barriers are set up: from here on this block touches memory that the prior grid in the stream may use.
  wait_for_predecessor();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    // Producer: few registers; one thread issues every load.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::PRODUCER_REGS));
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
        const TileOf<T> tile = tile_at<T>(t, T::TILES_M);
        for (int kt = 0; kt < T::K_ITERS; ++kt) {
          issue_stage<T, false>(smem, full, empty, &tmap_a, &tmap_b, stage, phase, kt, tile, nullptr, a_part,
                                Cfg::STAGE_TX_BYTES);
          if (++stage == T::STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      // Every load of this block is issued: the next grid may be scheduled.
      launch_dependents();
    }
    cluster_barrier();  // (the consumers' closing barrier)
  } else {
    // Consumers: the accumulators need the registers the producer gave up.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::CONSUMER_REGS));
    const int wg = warpgroup - 1, tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    float* const epi = reinterpret_cast<float*>(smem + Cfg::EPI_OFFSET) + wg * T::EPI_FLOATS;
    float acc[Cfg::MI][Cfg::NACC];
    float acc_odd[Cfg::ODD_MI][Cfg::NACC];
    int stage = 0;
    uint32_t phase = 0;
    for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
      const TileOf<T> tile = tile_at<T>(t, T::TILES_M);
      mma_tile<T>(acc, acc_odd, full, empty, stages_a, stages_b, stage, phase, 0, T::K_ITERS, wg, lane);
      store_tile<T>(acc, epi, tile, T::M_INNER, wg, warp, tid, lane, C, ep, alpha, beta);
    }
    // No block leaves while another block of its cluster may still release a stage in it.
    cluster_barrier();
  }
}

// Persistent in whole clusters: as many as the GPU holds at once (its GPCs may leave an SM without a partner). A
// dependent launch where the grid takes every cluster slot, or all but a sixteenth of them over one cluster's tile
// columns (where A streams once: the counterpart of the persistent kernel's one tile row).
template <class T>
cudaError_t launch_multicast(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, int64_t m,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  (void)m;
  auto* kernel = multicast_kernel<T>;
  if constexpr (T::SMEM_BYTES > 48 * 1024) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, kernel, T::SMEM_BYTES, false);
    if (err != cudaSuccess) return err;
  }
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  CUtensorMap map_a, map_b;
  err = tensor_maps<T>(A, B, T::M_INNER, &map_a, &map_b);
  if (err != cudaSuccess) return err;
  static std::atomic<int> slots[64];  // 0: not asked yet
  int clusters = slots[device % 64].load(std::memory_order_relaxed);
  if (clusters == 0) {
    cudaLaunchConfig_t probe = {};
    probe.gridDim = dim3(T::TILES);
    probe.blockDim = dim3(Config<T>::THREADS);
    probe.dynamicSmemBytes = T::SMEM_BYTES;
    cudaLaunchAttribute dims[1];
    dims[0].id = cudaLaunchAttributeClusterDimension;
    dims[0].val.clusterDim.x = T::A_PARTS;
    dims[0].val.clusterDim.y = 1;
    dims[0].val.clusterDim.z = 1;
    probe.attrs = dims;
    probe.numAttrs = 1;
    err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &probe);
    if (err != cudaSuccess) return err;
    if (clusters < 1) return cudaErrorInvalidConfiguration;  // a block of this size does not fit a cluster
    slots[device % 64].store(clusters, std::memory_order_relaxed);
  }
  const int resident = T::A_PARTS * clusters;
  const int grid = T::TILES < resident ? T::TILES : resident;  // whole clusters: both are multiples of A_PARTS
  const bool dependent =
      grid == resident || (Config<T>::TILES_N_GRID == T::A_PARTS && 16 * (resident - grid) <= resident);
  const LaunchShape shape{unsigned(grid), unsigned(Config<T>::THREADS), unsigned(T::SMEM_BYTES), dependent,
                          unsigned(T::A_PARTS)};
  return dg::launch(kernel, shape, stream, map_a, map_b, C, T::M_INNER, ep, alpha, beta);
}

}  // namespace hopper
}  // namespace dg
