// dg/launch.cuh — host-side launch helpers: per-device one-time kernel attributes, the SM count, tensor-map
// encoding through the driver's entry point (only the CUDA runtime is linked), and launches with programmatic
// dependent launch and clusters.
#pragma once

#include <atomic>
#include <cuda.h>
#include <cuda_runtime.h>

namespace dg {

// Runs `set` (returning cudaError_t) once per device for the caller's `done` flags (bit d: done on device d), as
// kernel attributes need: racing first calls may both run it, which is harmless.
template <class Set>
inline cudaError_t once_per_device(std::atomic<unsigned long long>& done, Set set) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const unsigned long long bit = 1ull << (device % 64);
  if (done.load(std::memory_order_relaxed) & bit) return cudaSuccess;
  err = set();
  if (err != cudaSuccess) return err;
  done.fetch_or(bit, std::memory_order_relaxed);
  return cudaSuccess;
}

// More than 48 KB of dynamic shared memory needs an opt-in, once per device and kernel; a cluster past the portable
// 8 blocks too. `done` is the kernel's own flag set (a static of the launcher that instantiates the kernel).
template <class Kernel>
inline cudaError_t set_kernel_attributes(std::atomic<unsigned long long>& done, Kernel kernel, int smem_bytes,
                                         bool non_portable_cluster) {
  return once_per_device(done, [&] {
    cudaError_t err = cudaSuccess;
    if (smem_bytes > 48 * 1024)
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err == cudaSuccess && non_portable_cluster)
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return err;
  });
}

// The current device's SM count, read once per device.
inline int sm_count(int device) {
  static std::atomic<int> counts[64];  // 0: not read yet
  int n = counts[device % 64].load(std::memory_order_relaxed);
  if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess)
    counts[device % 64].store(n, std::memory_order_relaxed);
  return n > 0 ? n : 1;
}

// cuTensorMapEncodeTiled's type.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// A driver function through the runtime's entry point (CUDA 12.0's version of it); null where the driver lacks it.
template <class Fn>
inline Fn driver_function(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(p);
}

// cuTensorMapEncodeTiled; null on a driver without it.
inline EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = driver_function<EncodeTiledFn>("cuTensorMapEncodeTiled");
  return fn;
}

// Whether a tensor map can be encoded on the calling thread now: the driver has cuTensorMapEncodeTiled
// (cudaErrorNotSupported where not) and a context is current. The driver's entry points act on the thread's current
// context, which the runtime makes current only at the first runtime call on the thread that needs one; a thread
// whose first call into this library finds the kernel's attributes set and the SM count read (by another thread:
// torch's autograd thread after the forward ran on the main one) reaches the encode with none. Where none is
// current, the current device's primary context is made current, as that first runtime call would; a context the
// caller made current stays.
inline cudaError_t ready_to_encode() {
  if (encode_tiled() == nullptr) return cudaErrorNotSupported;
  using CtxGetCurrentFn = CUresult (*)(CUcontext*);
  static const CtxGetCurrentFn get_current = driver_function<CtxGetCurrentFn>("cuCtxGetCurrent");
  CUcontext context = nullptr;
  if (get_current != nullptr && get_current(&context) == CUDA_SUCCESS && context != nullptr) return cudaSuccess;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  return err == cudaSuccess ? cudaSetDevice(device) : err;
}

// How a kernel is launched beyond its grid: as a programmatic dependent launch (the kernel calls
// dg::wait_for_predecessor() before its first global memory access; its launch and prologue overlap the previous
// kernel's tail), and in clusters of `cluster` blocks along x (1: none).
struct LaunchShape {
  unsigned blocks;
  unsigned threads;
  unsigned smem_bytes;
  bool dependent;
  unsigned cluster;
};

// Whether a dependent launch may go on `stream` now: always outside a stream capture; inside one only behind kernel
// nodes, since a programmatic edge leaves from a kernel node's programmatic port (only kernel nodes have ports other
// than full completion: cudaGraphEdgeData). Behind a memset, a copy, an event or nothing the launch goes plain:
// ordered after what precedes it, as any launch, and its griddepcontrol.wait returns at once.
inline bool dependent_launch_allowed(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();  // not an error of the launch: the query's (e.g. the legacy stream during another capture)
    return false;
  }
  if (status != cudaStreamCaptureStatusActive) return true;
  const cudaGraphNode_t* deps = nullptr;
  size_t count = 0;
#if CUDART_VERSION >= 13000
  const cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &count);
#else
  const cudaError_t err = cudaStreamGetCaptureInfo_v2(stream, &status, nullptr, nullptr, &deps, &count);
#endif
  if (err != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (count == 0) return false;
  for (size_t i = 0; i < count; ++i) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(deps[i], &type) != cudaSuccess || type != cudaGraphNodeTypeKernel) {
      cudaGetLastError();
      return false;
    }
  }
  return true;
}

template <class... Params, class... Args>
inline cudaError_t launch(void (*kernel)(Params...), LaunchShape shape, cudaStream_t stream, Args&&... args) {
  if (shape.dependent && !dependent_launch_allowed(stream)) shape.dependent = false;
  if (!shape.dependent && shape.cluster <= 1) {
    kernel<<<shape.blocks, shape.threads, shape.smem_bytes, stream>>>(static_cast<Params>(args)...);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(shape.blocks);
  config.blockDim = dim3(shape.threads);
  config.dynamicSmemBytes = shape.smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attrs[2];
  unsigned n = 0;
  if (shape.dependent) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (shape.cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = shape.cluster;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  config.attrs = attrs;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace dg
