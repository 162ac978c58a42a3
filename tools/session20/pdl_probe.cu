// Does a programmatic dependent launch start while its predecessor idles after triggering? The predecessor
// (one warp an SM) triggers at once, idles IDLE ns, then restores a buffer that holds NaN bits; the reader,
// launched dependent and never waiting, reads the buffer's first element at its start. Per mode: when the reader
// started relative to the predecessor's start and whether it saw NaN.
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/session20/pdl_probe.cu -o pdl_probe
// -DREADER_ELSEWHERE with tools/session20/pdl_reader.cu: the reader from another translation unit.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

struct Times {
  unsigned long long writer_start, writer_restore, reader_start;
  float seen;
};

__device__ unsigned long long gt() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int CARVEOUT>
__global__ void __maxnreg__(32) writer(float* dst, const float* src, size_t n, unsigned long long idle, Times* t) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const unsigned long long s = gt();
  if (blockIdx.x == 0 && threadIdx.x == 0) t->writer_start = s;
  while (gt() - s < idle) __nanosleep(500);
  if (blockIdx.x == 0 && threadIdx.x == 0) t->writer_restore = gt();
  for (size_t i = blockIdx.x * 32 + threadIdx.x; i < n; i += gridDim.x * 32) dst[i] = src[i];
}

#ifdef READER_ELSEWHERE
cudaError_t launch_reader_elsewhere(const float* buf, Times* t, unsigned blocks, int smem, cudaStream_t s);
#endif

__global__ void reader(const float* buf, Times* t) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    t->reader_start = gt();
    t->seen = buf[0];
  }
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t big = size_t(32) << 20;  // floats: 128 MB
  float *buf, *src, *save;
  Times* t;
  CK(cudaMalloc(&buf, big * 4));
  CK(cudaMalloc(&src, big * 4));
  CK(cudaMalloc(&save, big * 4));
  CK(cudaMallocHost(&t, sizeof(Times)));
  CK(cudaMemset(src, 0, big * 4));
  CK(cudaFuncSetAttribute(reader, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(writer<1>, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  struct Mode { const char* what; size_t n; int pre; int sync; unsigned blocks; int smem; unsigned long long idle; int carve; };
  const Mode modes[] = {
      {"4 KB, nothing before", 1024, 0, 0, 1, 0, 20000, 0},
      {"128 MB, copy+memset before", big, 1, 0, 1, 0, 20000, 0},
      {"128 MB, copy+memset, 1024x128 8KB", big, 1, 0, 1024, 8224, 20000, 0},
      {"128 MB, 1 block 8KB", big, 1, 0, 1, 8224, 20000, 0},
      {"128 MB, 1024x128 no smem", big, 1, 0, 1024, 0, 20000, 0},
      {"128 MB, carveout max, 1024x128 8KB", big, 1, 0, 1024, 8224, 20000, 1},
      {"128 MB, carveout max, 132x128 200KB", big, 1, 0, 132, 200 * 1024, 20000, 1},
      {"128 MB, carveout max, 1 block no smem", big, 1, 0, 1, 0, 20000, 1},
  };
  for (const Mode& m : modes) {
    for (int r = 0; r < 3; ++r) {
      CK(cudaMemcpy(buf, src, m.n * 4, cudaMemcpyDeviceToDevice));
      CK(cudaDeviceSynchronize());
      *t = Times{};
      if (m.pre == 1) CK(cudaMemcpyAsync(save, buf, m.n * 4, cudaMemcpyDeviceToDevice, s));
      if (m.pre) CK(cudaMemsetAsync(buf, 0xFF, m.n * 4, s));
      if (m.sync) CK(cudaStreamSynchronize(s));
      if (m.carve) writer<1><<<sms, 32, 0, s>>>(buf, src, m.n, m.idle, t);
      else writer<0><<<sms, 32, 0, s>>>(buf, src, m.n, m.idle, t);
      CK(cudaGetLastError());
      cudaLaunchConfig_t c = {};
      c.gridDim = dim3(m.blocks);
      c.blockDim = dim3(128);
      c.dynamicSmemBytes = m.smem;
      c.stream = s;
      cudaLaunchAttribute a;
      a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a.val.programmaticStreamSerializationAllowed = 1;
      c.attrs = &a;
      c.numAttrs = 1;
#ifdef READER_ELSEWHERE
      CK(launch_reader_elsewhere(buf, t, m.blocks, m.smem, s));
#else
      CK(cudaLaunchKernelEx(&c, reader, (const float*)buf, t));
#endif
      CK(cudaStreamSynchronize(s));
      printf("%-38s reader at %+8.1f us, restore at %+8.1f us, saw %s\n", m.what,
             (double(t->reader_start) - double(t->writer_start)) / 1e3,
             (double(t->writer_restore) - double(t->writer_start)) / 1e3, std::isnan(t->seen) ? "NaN" : "data");
    }
  }
  return 0;
}
