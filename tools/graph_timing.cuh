// What the device micro-benchmarks in tools/ share (launch_floor.cu, read_patterns.cu, regmma_probe.cu): a CUDA
// error check, the way `deepgemm bench` times a kernel (launches captured in one CUDA graph, median of replays),
// and the grid-stride read of a buffer that gives the read ceiling.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                    \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// Reads `bytes` from `in` with 16-byte loads, UNROLL in flight a thread, grid-stride; one sum a block.
template <int UNROLL>
__global__ void __launch_bounds__(512) read_kernel(const uint4* __restrict__ in, size_t vecs, float* __restrict__ out) {
  float s = 0.0f;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = i + u * stride < vecs ? __ldg(in + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) s += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  if (s == 1234.5f) out[blockIdx.x] = s;
}

// Median µs a launch of `launches` launches captured into one graph by `capture(l)` (launch l), after two
// warm-up replays: the way `deepgemm bench` times a kernel.
template <typename Capture>
static double graph_median_us(cudaStream_t s, int launches, Capture capture) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < launches; ++l) capture(l);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&x, g, 0));
  for (int w = 0; w < 2; ++w) CK(cudaGraphLaunch(x, s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> us;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(x, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1000.0 * ms / launches);
  }
  std::sort(us.begin(), us.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(x));
  CK(cudaGraphDestroy(g));
  return us[us.size() / 2];
}
