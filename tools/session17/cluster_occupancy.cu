// Session 17: how many thread-block clusters of a splitk-like shape the H200 keeps resident at once
// (cudaOccupancyMaxActiveClusters), beside blocks-per-SM occupancy without clusters. The splitk cost model
// assumes every block of the grid up to SMs x (blocks an SM by shared memory and threads) runs at once.
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o occ cluster_occupancy.cu && ./occ
#include <cstdio>
#include <cuda_runtime.h>

__global__ void probe_kernel(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (out) out[blockIdx.x] = smem[0];
}

int main() {
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
  const int threads[] = {64, 128};
  const int smem_kb[] = {20, 41, 44, 46, 78, 83, 115};
  const int clusters[] = {1, 2, 4, 8, 16};
  printf("%8s %8s %8s %14s %16s\n", "threads", "smem KB", "cluster", "clusters/GPU", "blocks resident");
  for (int t : threads)
    for (int kb : smem_kb)
      for (int c : clusters) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(16 * 132);
        cfg.blockDim = dim3(t);
        cfg.dynamicSmemBytes = kb * 1024;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = c;
        attr.val.clusterDim.y = 1;
        attr.val.clusterDim.z = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        int n = -1;
        cudaError_t err = cudaOccupancyMaxActiveClusters(&n, probe_kernel, &cfg);
        if (err != cudaSuccess) {
          printf("%8d %8d %8d  error %s\n", t, kb, c, cudaGetErrorString(err));
          cudaGetLastError();
          continue;
        }
        printf("%8d %8d %8d %14d %16d\n", t, kb, c, n, n * c);
      }
  return 0;
}
