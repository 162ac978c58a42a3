// What the TMA probes in tools/ share (read_patterns.cu, session14/smact_probe.cu): cuTensorMapEncodeTiled through the
// runtime's driver entry point (the probes link only the CUDA runtime).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include "graph_timing.cuh"

using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                            const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                            CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static Encode encoder() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
  return reinterpret_cast<Encode>(p);
}
