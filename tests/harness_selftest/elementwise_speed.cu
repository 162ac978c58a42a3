// elementwise_speed.cu -- how fast bench's baseline epilogue pass (dg_harness.cuh's dg_elementwise_kernel)
// runs on dense outputs, against a device-to-device copy of the same bytes, both graph-timed as bench times.
// Prints one JSON object: per shape the pass's us and GB/s (bytes it must move: the output read and written,
// the epilogue's views read once) and the copy's GB/s, and per small shape the pass's largest error against
// dg_reference_epilogue on the same data (the pass must compute what the epilogue says). Needs a GPU:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I templates
//        tests/harness_selftest/elementwise_speed.cu -o /tmp/elementwise_speed -ldl; /tmp/elementwise_speed
#include "dg_harness.cuh"

// out[m, n] (row-major, bf16) = gelu_tanh(out + bias[n]), the linear layer's epilogue.
static DgProblem linear_bias_gelu(long long m, long long n) {
  DgProblem p = {};
  p.name = "linear_bias_gelu";
  p.ndims = 3;
  p.nc = 2;
  p.dims[0] = {'m', DG_M, m, {1, 0, n, 0, 0}};
  p.dims[1] = {'n', DG_N, n, {0, 1, 1, 0, 1}};
  p.dims[2] = {'k', DG_K, 1, {0, 0}};
  const int present[] = {1, 1, 1, 0, 1};
  const long long span[] = {m, n, m * n, 0, n};
  for (int x = 0; x < 5; ++x) {
    p.present[x] = present[x];
    p.span[x] = span[x];
    p.dtype[x] = present[x] ? DG_BF16 : 0;
    p.align[x] = present[x] ? 16 : 0;
  }
  p.alpha = 1.0f;
  p.nsteps = 2;
  p.steps[0] = {"bias[n]", DG_STEP_BIAS, 0, 0.0f, 0.0f};
  p.steps[1] = {"gelu_tanh", DG_STEP_ACTIVATION, DG_GELU_TANH, 0.0f, 0.0f};
  return p;
}

// out[b, k, h*w] (NCHW, f32) = relu(out + bias[k]): a convolution's bias and activation.
static DgProblem conv_bias_relu(long long b, long long k, long long hw) {
  DgProblem p = {};
  p.name = "conv_bias_relu";
  p.ndims = 4;
  p.nc = 3;
  p.dims[0] = {'b', DG_BATCH, b, {0, 0, k * hw, 0, 0}};
  p.dims[1] = {'k', DG_N, k, {0, 1, hw, 0, 1}};
  p.dims[2] = {'s', DG_M, hw, {1, 0, 1, 0, 0}};
  p.dims[3] = {'c', DG_K, 1, {0, 0}};
  const int present[] = {1, 1, 1, 0, 1};
  const long long span[] = {hw, k, b * k * hw, 0, k};
  for (int x = 0; x < 5; ++x) {
    p.present[x] = present[x];
    p.span[x] = span[x];
    p.dtype[x] = present[x] ? DG_F32 : 0;
    p.align[x] = present[x] ? 16 : 0;
  }
  p.alpha = 1.0f;
  p.nsteps = 2;
  p.steps[0] = {"bias[k]", DG_STEP_BIAS, 0, 0.0f, 0.0f};
  p.steps[1] = {"relu", DG_STEP_ACTIVATION, DG_RELU, 0.0f, 0.0f};
  return p;
}

// The pass on a small problem against the float64 reference's steps, element by element; returns the largest
// error relative to max(1, |reference|).
static double check_pass(const DgProblem& p, cudaStream_t stream) {
  const DgElementwise e = dg_elementwise_plan(p);
  std::vector<unsigned char> out(dg_buffer_bytes(p, DG_C)), bias(dg_buffer_bytes(p, DG_BIAS));
  dg_host_fill_random(out, DG_FILL_DATA, p.dtype[DG_C], p.span[DG_C], 3, DG_RNG_C, 4.0f);
  dg_host_fill_random(bias, DG_FILL_DATA, p.dtype[DG_BIAS], p.span[DG_BIAS], 3, DG_RNG_BIAS);
  DgDeviceBuffer dev_out = dg_device_alloc(out.size(), 256), dev_bias = dg_device_alloc(bias.size(), 256);
  DG_CUDA(cudaMemcpy(dev_out.ptr, out.data(), out.size(), cudaMemcpyHostToDevice));
  DG_CUDA(cudaMemcpy(dev_bias.ptr, bias.data(), bias.size(), cudaMemcpyHostToDevice));
  void* bufs[DG_SLOTS] = {};
  bufs[DG_C] = dev_out.ptr;
  bufs[DG_BIAS] = dev_bias.ptr;
  dg_run_elementwise(e, bufs, stream);
  DG_CUDA(cudaGetLastError());
  std::vector<unsigned char> got(out.size());
  DG_CUDA(cudaMemcpyAsync(got.data(), dev_out.ptr, got.size(), cudaMemcpyDeviceToHost, stream));
  DG_CUDA(cudaStreamSynchronize(stream));
  const void* host[DG_SLOTS] = {nullptr, nullptr, out.data(), nullptr, bias.data()};
  double worst = 0.0;
  for (long long o = 0; o < dg_c_count(p); ++o) {
    long long at[DG_SLOTS];
    dg_output_addresses(p, o, at, nullptr);
    double mag = 0.0;
    const double want = dg_reference_epilogue(p, host, at, dg_load(out.data(), p.dtype[DG_C], at[DG_C]), &mag);
    const double err = std::fabs(dg_load(got.data(), p.dtype[DG_C], at[DG_C]) - want) / std::max(1.0, std::fabs(want));
    worst = dg_max_nan(worst, err);
  }
  return worst;
}

int main() {
  g_dg_command = "elementwise_speed";
  cudaStream_t stream;
  DG_CUDA(cudaStreamCreate(&stream));
  DgJson j;
  j.begin();
  j.begin_array("checks");
  for (const DgProblem& p : {linear_bias_gelu(37, 1000), linear_bias_gelu(3, 7), conv_bias_relu(2, 5, 300)}) {
    j.begin();
    j.str("shape", p.name);
    j.integer("elements", dg_c_count(p));
    j.num("max_rel_err", check_pass(p, stream));
    j.end();
  }
  j.end_array();
  j.begin_array("shapes");
  for (const DgProblem& p : {linear_bias_gelu(4096, 14336), linear_bias_gelu(8, 14336), conv_bias_relu(8, 512, 3136)}) {
    const DgElementwise e = dg_elementwise_plan(p);
    DgDeviceBuffer out = dg_device_alloc(dg_buffer_bytes(p, DG_C), 256), bias = dg_device_alloc(dg_buffer_bytes(p, DG_BIAS), 256);
    dg_device_fill_random(out.ptr, DG_FILL_DATA, p.dtype[DG_C], p.span[DG_C], 1, DG_RNG_C, stream);
    dg_device_fill_random(bias.ptr, DG_FILL_DATA, p.dtype[DG_BIAS], p.span[DG_BIAS], 1, DG_RNG_BIAS, stream);
    void* bufs[DG_SLOTS] = {};
    bufs[DG_C] = out.ptr;
    bufs[DG_BIAS] = bias.ptr;
    const double bytes = 2.0 * dg_buffer_bytes(p, DG_C) + dg_buffer_bytes(p, DG_BIAS);
    const double us = dg_graph_us(stream, 1, 64, 20, [&](int) { dg_run_elementwise(e, bufs, stream); });
    DgDeviceBuffer copy = dg_device_alloc(dg_buffer_bytes(p, DG_C), 256);
    const double copy_us = dg_graph_us(stream, 1, 64, 20, [&](int) {
      DG_CUDA(cudaMemcpyAsync(copy.ptr, out.ptr, dg_buffer_bytes(p, DG_C), cudaMemcpyDeviceToDevice, stream));
    });
    j.begin();
    j.str("shape", p.name);
    j.integer("elements", dg_c_count(p));
    j.integer("dims", e.ndims);
    j.boolean("narrow", e.narrow);
    j.num("us", us);
    j.num("gbps", bytes / (us * 1e-6) / 1e9);
    j.num("copy_gbps", 2.0 * dg_buffer_bytes(p, DG_C) / (copy_us * 1e-6) / 1e9);
    j.end();
  }
  j.end_array();
  j.end();
  dg_print_json(j.text());
  return 0;
}
