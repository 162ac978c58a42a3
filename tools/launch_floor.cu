// What a launch costs under CUDA-graph replay on this GPU, the way `deepgemm bench` times a kernel: launches
// captured in one graph, each on its own buffer of a rotation larger than L2, time / launches.
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o launch_floor tools/launch_floor.cu && ./launch_floor
// Rows: an empty kernel (1 block; 256 blocks), one 16-byte load a thread from DRAM and a store (256 blocks of
// 128 threads: 512 KB a launch), the same in clusters of 8 with a cluster barrier, and the same as a
// programmatic dependent launch with the load after griddepcontrol.wait or before it. Last, the read ceiling:
// a grid-stride stream of 16-byte loads over a [4096 x 14336] f16 weight (117 MB) and a [4096 x 4096] one.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "graph_timing.cuh"

constexpr int BLOCKS = 256, THREADS = 128;
constexpr size_t BYTES = size_t(BLOCKS) * THREADS * 16;  // a launch's loads
constexpr int SETS = 512;                                  // 256 MB of rotation: past the 60 MB L2

__global__ void empty_kernel(const uint4*, float*) {}

template <bool CLUSTER, int PDL>  // PDL 0: plain; 1: wait, then load; 2: load, then wait
__global__ void load_kernel(const uint4* __restrict__ in, float* __restrict__ out) {
  const int i = blockIdx.x * THREADS + threadIdx.x;
  uint4 v;
  if (PDL == 2) v = __ldg(in + i);
  if (PDL) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (PDL != 2) v = __ldg(in + i);
  if (PDL) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  float s = __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
  if (CLUSTER) cooperative_groups::this_cluster().sync();
  if (s == 1234.5f) out[i] = s;  // never true for the zeroed input: the load must still happen
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

static double read_us(size_t bytes, int blocks, int sets, const uint4* in, float* out, cudaStream_t s) {
  return graph_median_us(s, 8 * sets, [&](int l) {
    read_kernel<8><<<blocks, 512, 0, s>>>(in + size_t(l % sets) * (bytes / 16), bytes / 16, out);
  });
}

using Kernel = void (*)(const uint4*, float*);

static void launch(Kernel k, int blocks, int cluster, bool pdl, const uint4* in, float* out, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  int n = 0;
  if (pdl) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n++].val.clusterDim = {unsigned(cluster), 1, 1};
  }
  cfg.attrs = at;
  cfg.numAttrs = n;
  CK(cudaLaunchKernelEx(&cfg, k, in, out));
}

static double graph_us(Kernel k, int blocks, int cluster, bool pdl, const uint4* in, float* out, cudaStream_t s) {
  return graph_median_us(s, 2 * SETS, [&](int l) {
    launch(k, blocks, cluster, pdl, in + size_t(l % SETS) * (BYTES / 16), out, s);
  });
}

int main() {
  uint4* in;
  float* out;
  CK(cudaMalloc(&in, BYTES * SETS));
  CK(cudaMemset(in, 0, BYTES * SETS));
  CK(cudaMalloc(&out, BLOCKS * THREADS * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct Row {
    const char* what;
    Kernel k;
    int blocks, cluster;
    bool pdl;
  } rows[] = {
      {"empty, 1 block", empty_kernel, 1, 1, false},
      {"empty, 256 blocks", empty_kernel, BLOCKS, 1, false},
      {"empty, 256 blocks, dependent launch", empty_kernel, BLOCKS, 1, true},
      {"one load + store, 256 blocks", load_kernel<false, 0>, BLOCKS, 1, false},
      {"one load + store, clusters of 8 + cluster barrier", load_kernel<true, 0>, BLOCKS, 8, false},
      {"one load + store, dependent launch, load after the wait", load_kernel<false, 1>, BLOCKS, 1, true},
      {"one load + store, dependent launch, load before the wait", load_kernel<false, 2>, BLOCKS, 1, true},
      {"clusters of 8, dependent launch, load after the wait", load_kernel<true, 1>, BLOCKS, 8, true},
      {"clusters of 8, dependent launch, load before the wait", load_kernel<true, 2>, BLOCKS, 8, true},
  };
  std::printf("launch floor under graph replay (%d launches a graph, %zu KB a launch, %d sets)\n", 2 * SETS,
              BYTES / 1024, SETS);
  for (const Row& r : rows)
    std::printf("%-60s %6.2f us\n", r.what, graph_us(r.k, r.blocks, r.cluster, r.pdl, in, out, s));
  // The read ceiling: 4 copies of the 117 MB weight (past the 60 MB L2), 12 of the 32 MB one.
  uint4* big;
  const size_t w14336 = size_t(4096) * 14336 * 2, w4096 = size_t(4096) * 4096 * 2;
  CK(cudaMalloc(&big, w14336 * 4));
  CK(cudaMemset(big, 0, w14336 * 4));
  for (size_t bytes : {w14336, w4096})
    for (int blocks : {132, 264, 528}) {
      const double us = read_us(bytes, blocks, bytes == w14336 ? 4 : 12, big, out, s);
      std::printf("read %3zu MB, %3d blocks of 512 threads, 8 loads in flight  %7.2f us  %6.0f GB/s\n", bytes >> 20,
                  blocks, us, bytes / us / 1e3);
    }
  return 0;
}
