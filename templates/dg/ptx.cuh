// dg/ptx.cuh — thin wrappers of the PTX instructions the kernels use: shared-memory addresses, mbarriers,
// TMA (tensor-map copies), clusters, programmatic dependent launch, cp.async, wgmma bookkeeping, stmatrix, and the
// warp-level mma.sync of 16-bit inputs.
//
// Each wrapper is one instruction (or one polling loop). Those that need sm_90 are templates or are only
// referenced by sm_90 kernels, so that an sm_80 translation unit that includes this header compiles.
#pragma once

#include <cstdint>
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>

namespace dg {

// ---- Shared memory and mbarriers.

// The shared-window address of a pointer into shared memory.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}

// Makes barrier initialisation visible to the async proxy and to the other blocks of the cluster.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Returns once phase `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } while (!done);
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Arrives and expects `bytes` more of asynchronous copies to complete on the barrier.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// ---- Clusters.

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Barrier of every thread of every block of the cluster (no .aligned: threads may reach it from different branches).
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;\n" ::: "memory");
}

// Arrive on the mbarrier at `bar`'s offset in block `rank` of the cluster. The default semantics (release at CTA
// scope): `.release.cluster` makes ptxas fence every arrive with an error barrier. The stage's reads are wgmma's,
// complete by the wgmma wait before the arrive.
__device__ __forceinline__ void mbar_arrive_remote(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// ---- Programmatic dependent launch (sm_90). In a dependently launched kernel, before the first global memory
// access: wait until the previous grid in the stream has completed and its writes are visible.
__device__ __forceinline__ void wait_for_predecessor() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

// Lets the next grid in the stream be scheduled (it still waits for this grid before it touches memory).
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// ---- TMA: one box of a tensor map (coordinates innermost first) into shared memory, completing on `bar`.

__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// An L2 cache policy under which the lines of a box read once are evicted first.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}


template <class... Coords>
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, Coords... c) {
  constexpr int rank = int(sizeof...(Coords));
  static_assert(rank >= 1 && rank <= 5, "TMA boxes have 1 to 5 dimensions");
  const uint32_t d = smem_u32(dst), b = smem_u32(bar);
  const int x[5] = {int(c)...};
  if constexpr (rank == 1) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];\n"
                 ::"r"(d), "l"(map), "r"(b), "r"(x[0]) : "memory");
  } else if constexpr (rank == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(d), "l"(map), "r"(b), "r"(x[0]), "r"(x[1]) : "memory");
  } else if constexpr (rank == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
                 ::"r"(d), "l"(map), "r"(b), "r"(x[0]), "r"(x[1]), "r"(x[2]) : "memory");
  } else if constexpr (rank == 4) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
                 ::"r"(d), "l"(map), "r"(b), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]) : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
                 ::"r"(d), "l"(map), "r"(b), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]) : "memory");
  }
}

// The same under an L2 cache policy (evict_first_policy: a box read once leaves L2's room to what is read again).
template <class... Coords>
__device__ __forceinline__ void tma_load_hint(void* dst, const CUtensorMap* map, uint64_t* bar, uint64_t policy, Coords... c) {
  constexpr int rank = int(sizeof...(Coords));
  static_assert(rank >= 1 && rank <= 5, "TMA boxes have 1 to 5 dimensions");
  const uint32_t d = smem_u32(dst), b = smem_u32(bar);
  const int x[5] = {int(c)...};
  if constexpr (rank == 1) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%4}], [%2], %3;\n"
                 ::"r"(d), "l"(map), "r"(b), "l"(policy), "r"(x[0]) : "memory");
  } else if constexpr (rank == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%4, %5}], [%2], %3;\n"
                 ::"r"(d), "l"(map), "r"(b), "l"(policy), "r"(x[0]), "r"(x[1]) : "memory");
  } else if constexpr (rank == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%4, %5, %6}], [%2], %3;\n"
                 ::"r"(d), "l"(map), "r"(b), "l"(policy), "r"(x[0]), "r"(x[1]), "r"(x[2]) : "memory");
  } else if constexpr (rank == 4) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n"
                 ::"r"(d), "l"(map), "r"(b), "l"(policy), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]) : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%4, %5, %6, %7, %8}], [%2], %3;\n"
                 ::"r"(d), "l"(map), "r"(b), "l"(policy), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]) : "memory");
  }
}

// One box into this shared-memory offset of every block of the cluster in `mask`, each one's `bar` completing;
// with `Hint`, under the L2 cache policy `policy`.
template <bool Hint, class... Coords>
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t mask,
                                                   uint64_t policy, Coords... c) {
  constexpr int rank = int(sizeof...(Coords));
  static_assert(rank >= 1 && rank <= 5, "TMA boxes have 1 to 5 dimensions");
  const uint32_t d = smem_u32(dst), b = smem_u32(bar);
  const int x[5] = {int(c)...};
  if constexpr (Hint) {
    if constexpr (rank == 1) {
      asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [%0], [%1, {%5}], [%2], %3, %4;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "l"(policy), "r"(x[0]) : "memory");
    } else if constexpr (rank == 2) {
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [%0], [%1, {%5, %6}], [%2], %3, %4;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "l"(policy), "r"(x[0]), "r"(x[1]) : "memory");
    } else if constexpr (rank == 3) {
      asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [%0], [%1, {%5, %6, %7}], [%2], %3, %4;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "l"(policy), "r"(x[0]), "r"(x[1]), "r"(x[2]) : "memory");
    } else if constexpr (rank == 4) {
      asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [%0], [%1, {%5, %6, %7, %8}], [%2], %3, %4;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "l"(policy), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]) : "memory");
    } else {
      asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [%0], [%1, {%5, %6, %7, %8, %9}], [%2], %3, %4;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "l"(policy), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]) : "memory");
    }
  } else {
    if constexpr (rank == 1) {
      asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4}], [%2], %3;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "r"(x[0]) : "memory");
    } else if constexpr (rank == 2) {
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "r"(x[0]), "r"(x[1]) : "memory");
    } else if constexpr (rank == 3) {
      asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "r"(x[0]), "r"(x[1]), "r"(x[2]) : "memory");
    } else if constexpr (rank == 4) {
      asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]) : "memory");
    } else {
      asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5, %6, %7, %8}], [%2], %3;\n"
                   ::"r"(d), "l"(map), "r"(b), "h"(mask), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]) : "memory");
    }
  }
}

// One box of a tensor map into L2 only (no shared memory, no barrier).
template <class... Coords>
__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map, Coords... c) {
  constexpr int rank = int(sizeof...(Coords));
  static_assert(rank >= 1 && rank <= 5, "TMA boxes have 1 to 5 dimensions");
  const int x[5] = {int(c)...};
  if constexpr (rank == 1) {
    asm volatile("cp.async.bulk.prefetch.tensor.1d.L2.global.tile [%0, {%1}];\n" ::"l"(map), "r"(x[0]) : "memory");
  } else if constexpr (rank == 2) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"(map), "r"(x[0]), "r"(x[1]) : "memory");
  } else if constexpr (rank == 3) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n"
                 ::"l"(map), "r"(x[0]), "r"(x[1]), "r"(x[2]) : "memory");
  } else if constexpr (rank == 4) {
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n"
                 ::"l"(map), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]) : "memory");
  } else {
    asm volatile("cp.async.bulk.prefetch.tensor.5d.L2.global.tile [%0, {%1, %2, %3, %4, %5}];\n"
                 ::"l"(map), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]) : "memory");
  }
}


// ---- cp.async (sm_80): `Bytes` from global to shared memory; `src_bytes` < Bytes zero-fills the rest.
template <int Bytes>
__device__ __forceinline__ void cp_async(void* dst, const void* src, int src_bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(Bytes), "r"(src_bytes));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory"); }

// ---- wgmma bookkeeping (sm_90a). A shared-memory matrix descriptor: start address, leading-dimension byte offset
// (LBO), stride-dimension byte offset (SBO), all in 16-byte units, and the 128B swizzle mode (bits 62-63).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory"); }

// Keeps the compiler from touching accumulators that an in-flight wgmma still writes.
template <int N>
__device__ __forceinline__ void acc_fence(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// stmatrix.x4: four 8x8 matrices of 16-bit values, matrix i from register i of every lane, lanes 8i .. 8i + 7
// giving the addresses of its eight 16-byte lines; `Trans` stores each matrix transposed (a line is a column).
template <bool Trans>
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  if constexpr (Trans) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], { %1, %2, %3, %4 };\n"
                 ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], { %1, %2, %3, %4 };\n"
                 ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
  }
}

// ---- Warp-level mma (sm_80 and later).

// D += A * B for one m16n8k16 tile, E (__half or __nv_bfloat16) inputs, f32 accumulators.
template <class E>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{ %0, %1, %2, %3}, { %4, %5, %6, %7}, { %8, %9}, { %0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same<E, __half>::value, "mma.sync takes f16 or bf16 inputs");
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{ %0, %1, %2, %3}, { %4, %5, %6, %7}, { %8, %9}, { %0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace dg
