// pdl_probe.cu's reader in its own translation unit (its own module in the executable), launched through a
// function as a generated entry point is: does a dependent launch overlap a predecessor from another module?
#include <cuda_runtime.h>

struct Times {
  unsigned long long writer_start, writer_restore, reader_start;
  float seen;
};

__global__ void reader_elsewhere(const float* buf, Times* t) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    t->reader_start = now;
    t->seen = buf[0];
  }
}

cudaError_t launch_reader_elsewhere(const float* buf, Times* t, unsigned blocks, int smem, cudaStream_t s) {
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(reader_elsewhere, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  if (opt_in != cudaSuccess) return opt_in;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(blocks);
  c.blockDim = dim3(128);
  c.dynamicSmemBytes = smem;
  c.stream = s;
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  c.attrs = &a;
  c.numAttrs = 1;
  return cudaLaunchKernelEx(&c, reader_elsewhere, buf, t);
}
