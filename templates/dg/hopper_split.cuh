// dg/hopper_split.cuh — the `hopper` family's K-split kernel: the SPLITS blocks of a cluster share one BM x BN tile,
// block r streaming k-iterations [r * KT_PER_SPLIT, (r + 1) * KT_PER_SPLIT) of K_ITERS. Each parks its f32 partial
// tile in its pipeline stages (idle by then), and after a cluster barrier sums a share of the tile over every
// block (distributed shared memory) in rank order: bit-identical results run to run.
#pragma once

#include <cooperative_groups.h>

#include "hopper_common.cuh"

namespace dg {
namespace hopper {

// The K-split kernel's body, the consumers' main loop aside: `slice(acc, full, empty, stages_a, stages_b, stage,
// phase, tile, kt0, kt_end, wg, warp, lane)` sums k-iterations [kt0, kt_end) of `tile` into acc (f32, the m64nN
// fragment layout), consuming the stages from (stage, phase) on. The hopper family's kernel (split_kernel below) and
// fp8_hopper's (dg/fp8_hopper.cuh) differ only there.
template <class T, class Slice>
__device__ __forceinline__ void split_body(const CUtensorMap& tmap_a, const CUtensorMap& tmap_b,
                                           typename T::C_param* __restrict__ C, const int m_inner_arg,
                                           const typename T::Epilogue& ep, float alpha, float beta, Slice slice) {
  using Cfg = Config<T>;
  static_assert(T::SPLITS > 1 && T::A_PARTS == 1, "a K split over a cluster, without A multicast");
  constexpr int SPLITS = T::SPLITS, VEC = T::C_VEC, RED_PITCH = T::RED_PITCH;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::BAR_OFFSET);
  uint64_t* const empty = full + T::STAGES;
  const uint32_t stages_a = smem_u32(smem + Cfg::A_OFFSET), stages_b = smem_u32(smem + Cfg::B_OFFSET);
  const int M_INNER = T::rows_at_run_time ? m_inner_arg : T::M_INNER;
  const int TILES_M = T::rows_at_run_time ? (M_INNER + T::BM - 1) / T::BM : T::TILES_M;

  // Blocks [SPLITS * t, SPLITS * (t + 1)) form the cluster of tile t; the rank is the K slice.
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int kt0 = int(cluster.block_rank()) * T::KT_PER_SPLIT;
  const int kt_end = min(T::K_ITERS, kt0 + T::KT_PER_SPLIT);  // > kt0: the plan leaves no slice empty
  const TileOf<T> tile = tile_at<T>(int(blockIdx.x) / SPLITS, TILES_M);
  if (threadIdx.x == 0) {
    prefetch_tensormap(&tmap_a);
    prefetch_tensormap(&tmap_b);
    for (int s = 0; s < T::STAGES; ++s) {
      mbar_init(&full[s], 1);                // the producer's arrive.expect_tx
      mbar_init(&empty[s], T::CONSUMERS * 4);  // one arrive per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  // Barriers are set up: from here on this block touches memory that the prior grid in the stream may use.
  // (Waiting here rather than first thing measured faster.)
  wait_for_predecessor();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    // Producer: few registers; one thread issues every load.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::PRODUCER_REGS));
    if (threadIdx.x == 0) {
      const unsigned tx_bytes = T::rows_at_run_time && T::A_ROWS_FOLLOW_M
                                    ? unsigned(a_box_rows<T>(M_INNER) * T::BK * int(sizeof(typename T::A_t)) +
                                               Cfg::B_STAGE_BYTES)
                                    : unsigned(Cfg::STAGE_TX_BYTES);
      int stage = 0;
      uint32_t phase = 0;
      for (int kt = kt0; kt < kt_end; ++kt) {  // the cluster's one tile
        issue_stage<T, false>(smem, full, empty, &tmap_a, &tmap_b, stage, phase, kt, tile, nullptr, 0, tx_bytes);
        if (++stage == T::STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    // The producer warpgroup has nothing to sum; it takes part in the consumers' two cluster barriers (kept apart
    // from theirs: code after the branches would have to fit the producer's registers).
    cluster.sync();
    cluster.sync();
  } else {
    // Consumers: the accumulators need the registers the producer gave up.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::CONSUMER_REGS));
    const int wg = warpgroup - 1, tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    float* const partial = reinterpret_cast<float*>(smem);  // the parked partial tile, over the stages
    float acc[Cfg::MI][Cfg::NACC];
    int stage = 0;
    uint32_t phase = 0;
    {  // the cluster's one tile
      slice(acc, full, empty, stages_a, stages_b, stage, phase, tile, kt0, kt_end, wg, warp, lane);

      // The partial tile goes over the stages: wait until every consumer warpgroup's last wgmma has read them.
      if constexpr (T::CONSUMERS > 1) asm volatile("bar.sync 1, %0;\n" ::"n"(T::CONSUMERS * 128) : "memory");
      // Park the partial tile in this block's stages: every TMA load has landed and every wgmma that read a stage
      // is done. Accumulator layout of m64nN: warp w holds rows 16w + g and 16w + g + 8 (g = lane / 4), columns
      // 8j + 2q and 8j + 2q + 1 (q = lane % 4) as d[4j .. 4j + 3].
      const int g = lane / 4, q = lane % 4;
#pragma unroll
      for (int mi = 0; mi < Cfg::MI; ++mi) {
        const int r = wg * T::WG_M + mi * 64 + warp * 16 + g;
#pragma unroll
        for (int j = 0; j < T::BN / 8; ++j) {
          const int col = j * 8 + 2 * q;
          if constexpr (T::C_ALONG_M) {  // [col][row]: the output is m-contiguous
            partial[col * RED_PITCH + r] = acc[mi][4 * j];
            partial[(col + 1) * RED_PITCH + r] = acc[mi][4 * j + 1];
            partial[col * RED_PITCH + r + 8] = acc[mi][4 * j + 2];
            partial[(col + 1) * RED_PITCH + r + 8] = acc[mi][4 * j + 3];
          } else {
            *reinterpret_cast<float2*>(&partial[r * RED_PITCH + col]) = make_float2(acc[mi][4 * j], acc[mi][4 * j + 1]);
            *reinterpret_cast<float2*>(&partial[(r + 8) * RED_PITCH + col]) =
                make_float2(acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
          }
        }
      }
    }

    // This block's loads are done: the next kernel in the stream may be scheduled (it waits for this grid to
    // complete before it touches memory).
    launch_dependents();
    cluster.sync();  // every block's partial tile is parked and visible across the cluster
    // Block r sums its share of the tile's vectors over ranks 0..SPLITS-1 in order and stores them: VEC consecutive
    // elements along the output's contiguous role a vector.
    const long long c_tile = c_tile_offset<T>(tile);
    constexpr int VECS = T::BM * T::BN / VEC, SHARE = (VECS + SPLITS - 1) / SPLITS;
    const int first = int(cluster.block_rank()) * SHARE, end = min(VECS, first + SHARE);
    for (int v = first + int(threadIdx.x) - 128; v < end; v += T::CONSUMERS * 128) {
      int gm, gn, at;
      if constexpr (T::C_ALONG_M) {
        const int col = v / (T::BM / VEC), rv = (v % (T::BM / VEC)) * VEC;
        gm = tile.m0 + rv;
        gn = tile.n0 + col;
        at = col * RED_PITCH + rv;
      } else {
        const int r = v / (T::BN / VEC), cv = (v % (T::BN / VEC)) * VEC;
        gm = tile.m0 + r;
        gn = tile.n0 + cv;
        at = r * RED_PITCH + cv;
      }
      if (gm >= M_INNER || gn >= T::N_INNER) continue;
      alignas(16) float src[VEC] = {};
#pragma unroll
      for (int s = 0; s < SPLITS; ++s) {
        const float* part = cluster.map_shared_rank(partial, s) + at;
        if constexpr (VEC % 4 == 0) {
#pragma unroll
          for (int e = 0; e < VEC; e += 4) {
            const float4 x = *reinterpret_cast<const float4*>(part + e);
            src[e] += x.x;
            src[e + 1] += x.y;
            src[e + 2] += x.z;
            src[e + 3] += x.w;
          }
        } else if constexpr (VEC == 2) {
          const float2 x = *reinterpret_cast<const float2*>(part);
          src[0] += x.x;
          src[1] += x.y;
        } else {
          src[0] += part[0];
        }
      }
      typename T::Out_t* const p = out_at<T>(C, ep, c_tile, gm, gn);
      alignas(16) typename T::Out_t out[VEC];
      T::finish_vector(p, src, out, gm, gn, tile, M_INNER, C, ep, alpha, beta);
      T::store_vector(p, out, gm, gn, M_INNER);
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
  }
}

template <class T>
__global__ void __launch_bounds__(Config<T>::THREADS, T::CTAS_PER_SM)
    split_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                 typename T::C_param* __restrict__ C, const int m_inner_arg, const typename T::Epilogue ep,
                 float alpha, float beta) {
  using Cfg = Config<T>;
  split_body<T>(tmap_a, tmap_b, C, m_inner_arg, ep, alpha, beta,
                [](float (&acc)[Cfg::MI][Cfg::NACC], uint64_t* full, uint64_t* empty, uint32_t stages_a,
                   uint32_t stages_b, int& stage, uint32_t& phase, const TileOf<T>&, int kt0, int kt_end, int wg, int,
                   int lane) {
                  float acc_odd[Cfg::ODD_MI][Cfg::NACC];
                  mma_tile<T>(acc, acc_odd, full, empty, stages_a, stages_b, stage, phase, kt0, kt_end, wg, lane);
                });
}

// One cluster of SPLITS blocks a tile, as a dependent launch.
template <class T>
cudaError_t launch_split(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, int64_t m,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  auto* kernel = split_kernel<T>;
  if constexpr (T::SMEM_BYTES > 48 * 1024 || T::SPLITS > 8) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, kernel, T::SMEM_BYTES, T::SPLITS > 8);
    if (err != cudaSuccess) return err;
  }
  const int m_inner = rows_of<T>(m);
  CUtensorMap map_a, map_b;
  const cudaError_t err = tensor_maps<T>(A, B, m_inner, &map_a, &map_b);
  if (err != cudaSuccess) return err;
  const LaunchShape shape{unsigned(tiles_of<T>(m_inner) * T::SPLITS), unsigned(Config<T>::THREADS),
                          unsigned(T::SMEM_BYTES), true, unsigned(T::SPLITS)};
  return dg::launch(kernel, shape, stream, map_a, map_b, C, m_inner, ep, alpha, beta);
}

}  // namespace hopper
}  // namespace dg
