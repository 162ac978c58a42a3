// The CPU engine (templates/dg/cpu_gemm.hpp) against a naive reference, on random strided problems.
//
// Each problem draws letters of each role (batch, m, n, k), one segment per letter, and a random memory layout per
// slot (letter order, padding, offsets, stride-0 broadcast of k / batch letters in A or B). The reference walks the
// letters as an odometer in double precision; it shares no code with the engine beyond the Shape it is given.
// Every output element of the view must be finished exactly once and the memory outside the view left untouched.
//
// Build: g++ -O2 -std=c++17 -I templates [-march=... -fopenmp] tests/cpu/test_cpu_gemm.cpp; prints "ok" and exits 0.
#include "dg/cpu_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace dg::cpu;

namespace {

std::mt19937_64 rng(20240601);
int failures = 0;

int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      if (++failures <= 20) {                    \
        std::printf("FAIL %s:%d: ", __FILE__, __LINE__); \
        std::printf(__VA_ARGS__);                \
        std::printf("\n");                       \
      }                                          \
    }                                            \
  } while (0)

// ------------------------------------------------------------------------------------------------------------
// Element types, decoded independently of cpu_types.hpp.

double decode(float x) { return x; }
double decode(f16 h) {
  const int sign = h.bits >> 15, exponent = (h.bits >> 10) & 31, mantissa = h.bits & 1023;
  double v;
  if (exponent == 0) v = std::ldexp(double(mantissa), -24);
  else if (exponent == 31) v = mantissa ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  else v = std::ldexp(double(1024 + mantissa), exponent - 25);
  return sign ? -v : v;
}
double decode(bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The f16 nearest to x (ties to even mantissa), computed in double.
uint16_t reference_f16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return 0x7e00;
  const double ax = std::fabs(double(x));
  if (ax >= 65520.0) return sign | 0x7c00;
  if (ax < std::ldexp(1.0, -14)) return sign | uint16_t(std::nearbyint(std::ldexp(ax, 24)));  // may reach 0x400
  int e;
  std::frexp(ax, &e);  // ax in [2^(e-1), 2^e)
  int exponent = e - 1;
  double q = std::nearbyint((ax / std::ldexp(1.0, exponent) - 1.0) * 1024.0);
  if (q == 1024.0) {
    q = 0;
    ++exponent;
  }
  if (exponent > 15) return sign | 0x7c00;
  return sign | uint16_t((exponent + 15) << 10) | uint16_t(q);
}

// The bf16 nearest to x (ties to even), choosing between the two truncations around it in double.
uint16_t reference_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  // Past the largest finite bf16 the next step is 2^128, which rounds to inf.
  const double v_hi = (hi & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), double(x)) : decode(bf16{hi});
  const double dlo = std::fabs(decode(bf16{lo}) - double(x)), dhi = std::fabs(v_hi - double(x));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

void test_conversions() {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const f16 h{uint16_t(bits)};
    const double want = decode(h);
    const float got = to_float(h);
    if (std::isnan(want)) {
      CHECK(std::isnan(got), "f16 %04x -> %g, want NaN", bits, double(got));
      CHECK(std::isnan(to_float(from_float<f16>(got))), "f16 NaN %04x does not stay NaN", bits);
    } else {
      CHECK(double(got) == want, "f16 %04x -> %g, want %g", bits, double(got), want);
      CHECK(from_float<f16>(got).bits == bits, "f16 %04x does not round-trip", bits);
    }
    const bf16 g{uint16_t(bits)};
    const float gotb = to_float(g);
    if (std::isnan(decode(g))) {
      CHECK(std::isnan(gotb) && std::isnan(to_float(from_float<bf16>(gotb))), "bf16 NaN %04x", bits);
    } else {
      CHECK(from_float<bf16>(gotb).bits == bits, "bf16 %04x does not round-trip", bits);
    }
  }
  std::vector<float> xs = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e-9f, 5.9604645e-08f, 2.9802322e-08f,
                           2.98023259e-08f, 8.940697e-08f, 6.1035156e-05f, 6.1e-05f, 1.0009765625f, 1.00048828125f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::denorm_min(), 3.3895314e38f};
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = uint32_t(rng());
    if (i % 2) u = (u & 0x80000000u) | (uint32_t(uniform(100, 145)) << 23) | (u & 0x7fffffu);  // near f16's range
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  for (const float x : xs) {
    const uint16_t h = from_float<f16>(x).bits, b = from_float<bf16>(x).bits;
    if (std::isnan(x)) {
      CHECK(std::isnan(decode(f16{h})) && std::isnan(decode(bf16{b})), "NaN does not stay NaN");
      continue;
    }
    CHECK(h == reference_f16(x), "f16(%.9g) = %04x, want %04x", double(x), h, reference_f16(x));
    CHECK(b == reference_bf16(x), "bf16(%.9g) = %04x, want %04x", double(x), b, reference_bf16(x));
  }
  // load / store at an element offset
  std::vector<f16> buf(8, f16{0});
  store<f16>(buf.data(), 5, 1.5f);
  CHECK(buf[5].bits == 0x3e00 && load<f16>(buf.data(), 5) == 1.5f, "store/load f16 at an offset");
  std::vector<bf16> bbuf(8, bf16{0});
  store<bf16>(bbuf.data(), 3, -2.0f);
  CHECK(bbuf[3].bits == 0xc000 && load<bf16>(bbuf.data(), 3) == -2.0f, "store/load bf16 at an offset");
}

// ------------------------------------------------------------------------------------------------------------
// Random problems.

enum Epilogue { kAccumulateC, kBiasReluD };  // C = alpha*sum + beta*C  |  D = relu(alpha*sum + beta*C + bias)

// One letter: its role (0 batch, 1 m, 2 n, 3 k), its size, and its stride in each slot.
struct Letter {
  int role;
  int64_t size;
  int64_t stride[kSlots];
};

struct Problem {
  std::vector<Letter> letters;
  int64_t offset[kSlots];
  int64_t m_extent;
  int64_t span[kSlots];  // elements each slot's buffer needs
};

// The slots whose memory has a letter of `role`.
unsigned slots_of_role(int role, Epilogue epi) {
  const unsigned out = epi == kAccumulateC ? (1u << kC) : (1u << kC) | (1u << kD);
  switch (role) {
    case 0: return (1u << kA) | (1u << kB) | out;
    case 1: return (1u << kA) | out;
    case 2: return (1u << kB) | out | (epi == kBiasReluD ? 1u << kBias : 0u);
    default: return (1u << kA) | (1u << kB);
  }
}

// Splits `extent` into `parts` letter sizes whose product is about `extent`.
std::vector<int64_t> split(int64_t extent, int parts) {
  std::vector<int64_t> sizes;
  int64_t rest = extent;
  for (int p = 0; p + 1 < parts; ++p) {
    const int64_t s = uniform(1, std::max<int64_t>(1, std::min<int64_t>(rest, 5)));
    sizes.push_back(s);
    rest = (rest + s - 1) / s;
  }
  sizes.push_back(rest);
  return sizes;
}

Problem draw_problem(Epilogue epi, bool dense) {
  Problem pr{};
  const int64_t extents[4] = {chance(0.3) ? uniform(2, 3) : 1, chance(0.15) ? uniform(1, 4) : uniform(1, 75),
                              chance(0.15) ? uniform(1, 3) : uniform(1, 80),
                              chance(0.1) ? 1 : (chance(0.4) ? uniform(100, 300) : uniform(1, 70))};
  for (int role = 0; role < 4; ++role) {
    const int parts = role == 0 ? (extents[0] > 1 ? int(uniform(1, 2)) : int(uniform(0, 1)))
                      : role == 1 ? int(uniform(chance(0.05) ? 0 : 1, 3))
                      : role == 2 ? int(uniform(chance(0.05) ? 0 : 1, 2))
                                  : int(uniform(extents[3] == 1 && chance(0.5) ? 0 : 1, 3));
    if (parts == 0) continue;
    for (const int64_t s : split(extents[role], parts)) pr.letters.push_back(Letter{role, s, {}});
  }
  // Each slot's layout: its letters in a random order (outer -> inner), dense or padded; A and B may broadcast
  // their k and batch letters (stride 0).
  for (int slot = 0; slot < kSlots; ++slot) {
    std::vector<int> mine;
    for (int l = 0; l < int(pr.letters.size()); ++l)
      if ((slots_of_role(pr.letters[l].role, epi) >> slot) & 1) mine.push_back(l);
    if (!dense) std::shuffle(mine.begin(), mine.end(), rng);
    int64_t stride = 1, span = 1;
    for (int i = int(mine.size()) - 1; i >= 0; --i) {
      Letter& letter = pr.letters[mine[i]];
      const bool input = slot == kA || slot == kB;
      if (!dense && input && (letter.role == 0 || letter.role == 3) && chance(0.15)) continue;  // broadcast
      letter.stride[slot] = stride;
      span += (letter.size - 1) * stride;
      stride = stride * letter.size + (dense || chance(0.7) ? 0 : uniform(1, 3));
    }
    pr.offset[slot] = dense ? 0 : uniform(0, 5);
    pr.span[slot] = pr.offset[slot] + span;
  }
  int64_t m_total = 1;
  bool has_m = false;
  for (const Letter& l : pr.letters)
    if (l.role == 1) m_total *= l.size, has_m = true;
  pr.m_extent = has_m && chance(0.3) ? uniform(1, m_total) : m_total;
  return pr;
}

Shape shape_of(const Problem& pr) {
  Shape sh{};
  Role* roles[4] = {&sh.batch, &sh.m, &sh.n, &sh.k};
  for (const Letter& l : pr.letters) {
    Role& r = *roles[l.role];
    Seg& s = r.seg[r.nseg++];
    s.size = l.size;
    for (int slot = 0; slot < kSlots; ++slot) s.stride[slot] = l.stride[slot];
  }
  for (int slot = 0; slot < kSlots; ++slot) sh.offset[slot] = pr.offset[slot];
  return sh;
}

// The per-slot offsets of the first `count` indices of `role`, walking its letters as an odometer (last fastest).
std::vector<std::vector<int64_t>> walk(const Problem& pr, int role, int64_t count) {
  std::vector<const Letter*> ls;
  for (const Letter& l : pr.letters)
    if (l.role == role) ls.push_back(&l);
  std::vector<int64_t> digit(ls.size(), 0);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> at(kSlots, 0);
    for (size_t d = 0; d < ls.size(); ++d)
      for (int s = 0; s < kSlots; ++s) at[s] += digit[d] * ls[d]->stride[s];
    out.push_back(at);
    for (int d = int(ls.size()) - 1; d >= 0; --d) {
      if (++digit[d] < ls[d]->size) break;
      digit[d] = 0;
    }
  }
  return out;
}

int64_t role_count(const Problem& pr, int role) {
  int64_t n = 1;
  for (const Letter& l : pr.letters)
    if (l.role == role) n *= l.size;
  return n;
}

template <class T>
T random_value() {
  return from_float<T>(float(std::uniform_real_distribution<double>(-1, 1)(rng)));
}

double rounding_of(float) { return 0; }
double rounding_of(f16) { return std::ldexp(1.0, -11); }
double rounding_of(bf16) { return std::ldexp(1.0, -8); }

// The traits under test; the shape is set at run time for each problem.
template <class A, class B, class O, Epilogue E, int KC, int MC, int NC>
struct TestTraits {
  using A_t = A;
  using B_t = B;
  using Out_t = O;
  static constexpr Epilogue kEpilogue = E;
  static inline Shape kShape{};
  static constexpr unsigned kOutSlots =
      E == kAccumulateC ? (1u << kC) : (1u << kC) | (1u << kD) | (1u << kBias);
  static constexpr int kLeadSlot = E == kAccumulateC ? kC : kD;  // the written slot
  static constexpr int kKC = KC, kMC = MC, kNC = NC;
  static constexpr unsigned kSmallRows = 0xf, kBlocked = 3;  // every path: the shape is set at run time
  static inline int* visits = nullptr;  // per element of the written slot
  // The outputs of a run (or one output), stored with store_run (`stream` as the engine decides it).
  static inline void finish_run(const Args& a, const float* sums, int64_t count, const int64_t* start, bool stream) {
    constexpr int out = E == kAccumulateC ? kC : kD;
    float t[kRun];
    for (int64_t q = 0; q < count; ++q) {
      t[q] = a.alpha * sums[q];
      if constexpr (E == kAccumulateC) {
        if (a.beta != 0.0f) t[q] += a.beta * load<O>(a.ptr[kC], start[kC] + q);
      } else {
        t[q] += load<float>(a.ptr[kBias], start[kBias] + q);
        if (a.beta != 0.0f) t[q] += a.beta * load<float>(a.ptr[kC], start[kC] + q);
        t[q] = t[q] > 0.0f ? t[q] : 0.0f;
      }
      __atomic_fetch_add(&visits[start[out] + q], 1, __ATOMIC_RELAXED);
    }
    store_run<O>(const_cast<void*>(a.ptr[out]), start[out], t, count, stream);
  }
};

// store_run writes exactly [at, at + count) whatever the alignment, streamed or not.
void test_store_run() {
  alignas(64) float dst[3 * kRun + 32];
  float v[kRun];
  for (int64_t q = 0; q < kRun; ++q) v[q] = float(q) + 0.5f;
  for (int stream = 0; stream < 2; ++stream)
    for (int64_t at = 0; at < 17; ++at)
      for (int64_t count = 0; count <= kRun; count += (count < 20 ? 1 : 11)) {
        for (float& x : dst) x = -1.0f;
        store_run<float>(dst, at, v, count, stream != 0);
        fence_streamed_stores();
        for (int64_t i = 0; i < int64_t(sizeof(dst) / sizeof(float)); ++i) {
          const float want = i >= at && i < at + count ? v[i - at] : -1.0f;
          CHECK(dst[i] == want, "store_run(at %lld, count %lld, stream %d): element %lld is %g, not %g",
                (long long)at, (long long)count, stream, (long long)i, double(dst[i]), double(want));
        }
      }
}

template <class Traits>
void run_problem(int index, bool dense) {
  using A_t = typename Traits::A_t;
  using B_t = typename Traits::B_t;
  using O = typename Traits::Out_t;
  constexpr Epilogue epi = Traits::kEpilogue;
  const Problem pr = draw_problem(epi, dense);
  Traits::kShape = shape_of(pr);

  std::vector<A_t> a(size_t(pr.span[kA]));
  std::vector<B_t> b(size_t(pr.span[kB]));
  for (auto& x : a) x = random_value<A_t>();
  for (auto& x : b) x = random_value<B_t>();
  // C: the output (kAccumulateC) or an f32 input (kBiasReluD); D: the output, NaN inside the view.
  std::vector<O> c_out(size_t(pr.span[kC]));
  std::vector<float> c_in(size_t(pr.span[kC])), bias(size_t(pr.span[kBias])), d_unused;
  std::vector<O> d(size_t(pr.span[kD]));
  for (auto& x : c_out) x = random_value<O>();
  for (auto& x : c_in) x = random_value<float>();
  for (auto& x : bias) x = random_value<float>();
  for (auto& x : d) x = random_value<O>();

  const int64_t nbatch = role_count(pr, 0), nn = role_count(pr, 2), nk = role_count(pr, 3);
  const auto batch = walk(pr, 0, nbatch), ms = walk(pr, 1, pr.m_extent), ns = walk(pr, 2, nn), ks = walk(pr, 3, nk);
  const int out_slot = epi == kAccumulateC ? kC : kD;
  std::vector<O>& out = epi == kAccumulateC ? c_out : d;
  if (epi == kBiasReluD)
    for (const auto& bb : batch)
      for (const auto& mm : ms)
        for (const auto& nn2 : ns) d[pr.offset[kD] + bb[kD] + mm[kD] + nn2[kD]] = from_float<O>(NAN);
  const std::vector<O> before = out;
  std::vector<int> visits(out.size(), 0);
  Traits::visits = visits.data();

  const float alphas[] = {1.0f, 0.5f, -1.25f}, betas[] = {0.0f, 1.0f, -0.5f};
  const float alpha = alphas[uniform(0, 2)], beta = betas[uniform(0, 2)];
  const int threads = int(uniform(0, 3));
  const void* c_ptr = epi == kAccumulateC ? static_cast<const void*>(c_out.data()) : c_in.data();
  const Args args{{a.data(), b.data(), c_ptr, d.data(), bias.data(), nullptr, nullptr}, pr.m_extent, alpha, beta,
                  threads};
  gemm<Traits>(args);

  std::vector<char> in_view(out.size(), 0);
  int bad = 0;
  for (const auto& bb : batch)
    for (const auto& mm : ms)
      for (const auto& nn2 : ns) {
        double sum = 0, magnitude = 0;
        for (const auto& kk : ks) {
          const double t = decode(a[pr.offset[kA] + bb[kA] + mm[kA] + kk[kA]]) *
                           decode(b[pr.offset[kB] + bb[kB] + nn2[kB] + kk[kB]]);
          sum += t;
          magnitude += std::fabs(t);
        }
        const int64_t at_out = pr.offset[out_slot] + bb[out_slot] + mm[out_slot] + nn2[out_slot];
        const int64_t at_c = pr.offset[kC] + bb[kC] + mm[kC] + nn2[kC];
        double want = alpha * sum, scale = std::fabs(alpha) * magnitude;
        if (epi == kAccumulateC) {
          if (beta != 0.0f) want += beta * decode(before[at_c]), scale += std::fabs(beta * decode(before[at_c]));
        } else {
          const double bias_v = bias[pr.offset[kBias] + nn2[kBias]];
          want += bias_v + (beta != 0.0f ? beta * c_in[at_c] : 0.0);
          scale += std::fabs(bias_v) + std::fabs(beta * c_in[at_c]);
          want = want > 0 ? want : 0;
        }
        const double got = decode(out[at_out]);
        const double tol = 1e-5 * scale + rounding_of(O{}) * std::fabs(want) + 1e-7;
        in_view[at_out] = 1;
        if (!(std::fabs(got - want) <= tol) && ++bad <= 3)
          CHECK(false, "problem %d (%s): at %lld got %.8g want %.8g (tol %.3g)", index, kIsa, (long long)at_out, got,
                want, tol);
        if (visits[at_out] != 1 && ++bad <= 3)
          CHECK(false, "problem %d: element at %lld finished %d times", index, (long long)at_out, visits[at_out]);
      }
  for (size_t i = 0; i < out.size(); ++i)
    if (!in_view[i] && (visits[i] != 0 || std::memcmp(&out[i], &before[i], sizeof(O)) != 0) && ++bad <= 3)
      CHECK(false, "problem %d: element %zu outside the view was written", index, i);
  if (bad) {
    std::printf("  problem %d: batch %lld m %lld n %lld k %lld, %zu letters, threads %d, alpha %g beta %g\n", index,
                (long long)nbatch, (long long)pr.m_extent, (long long)nn, (long long)nk, pr.letters.size(), threads,
                double(alpha), double(beta));
    for (const Letter& l : pr.letters)
      std::printf("    role %d size %lld strides A %lld B %lld C %lld D %lld\n", l.role, (long long)l.size,
                  (long long)l.stride[kA], (long long)l.stride[kB], (long long)l.stride[kC], (long long)l.stride[kD]);
  }
}

using T1 = TestTraits<float, float, float, kAccumulateC, 0, 0, 0>;
using T2 = TestTraits<float, float, float, kBiasReluD, 16, 0, 0>;
using T3 = TestTraits<f16, bf16, float, kBiasReluD, 0, 0, 0>;
using T4 = TestTraits<bf16, f16, f16, kAccumulateC, 16, 2 * kMR, kNR>;
using T5 = TestTraits<f16, f16, bf16, kBiasReluD, 0, 0, 0>;
using T6 = TestTraits<bf16, bf16, bf16, kAccumulateC, 32, 0, 64>;
using T7 = TestTraits<float, float, float, kAccumulateC, 8, kMR, kNR>;
using T8 = TestTraits<float, f16, f16, kBiasReluD, 0, 0, 0>;

}  // namespace

int main() {
  const Blocking bl = blocking_for(4096, 4096, 4096);
  const CacheSizes& cache = host_caches();
  std::printf("isa %s, MR x NR %d x %d, caches L1d %lld L2 %lld L3 %lld, blocking for 4096^3: KC %lld MC %lld NC %lld\n",
              kIsa, kMR, kNR, (long long)cache.l1d, (long long)cache.l2, (long long)cache.l3, (long long)bl.kc,
              (long long)bl.mc, (long long)bl.nc);
  test_conversions();
  test_store_run();
  constexpr int kProblems = 240;
  for (int i = 0; i < kProblems; ++i) {
    const bool dense = chance(0.3);
    switch (i % 8) {
      case 0: run_problem<T1>(i, dense); break;
      case 1: run_problem<T2>(i, dense); break;
      case 2: run_problem<T3>(i, dense); break;
      case 3: run_problem<T4>(i, dense); break;
      case 4: run_problem<T5>(i, dense); break;
      case 5: run_problem<T6>(i, dense); break;
      case 6: run_problem<T7>(i, dense); break;
      default: run_problem<T8>(i, dense); break;
    }
  }
  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("ok: conversions and %d problems\n", kProblems);
  return 0;
}
