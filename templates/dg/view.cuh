// dg/view.cuh — strided views as types: a role's index -> an operand's element offset.
//
// A role (batch, m, n or k) of a problem is one flat index over one or more merged segments of the spec's
// letters. An operand's view of the role lists those segments innermost first, each with its size and the
// operand's element stride along it:
//
//   using m = dg::Role<index_t, dg::Seg<56, 1>, dg::Seg<8, 200704>>;   // i -> (i % 56) * 1 + (i / 56) * 200704
//
// An operand that does not span a role (a bias along n only, B along m) has the empty role, offset 0.
// Everything folds at compile time: sizes and strides are template arguments.
#pragma once

#include <cstdint>

namespace dg {

// One segment of a role: `Size` indices, `Stride` elements apart in the operand's buffer.
template <long long Size, long long Stride>
struct Seg {
  static constexpr long long size = Size;
  static constexpr long long stride = Stride;
};

// A role's flat index -> element offset, in the index type I; segments innermost first.
template <class I, class... Segs>
struct Role;

template <class I>
struct Role<I> {
  static constexpr int segments = 0;
  __host__ __device__ static constexpr I offset(I) { return I(0); }
};

template <class I, class S>
struct Role<I, S> {
  static constexpr int segments = 1;
  __host__ __device__ static constexpr I offset(I i) { return S::stride == 1 ? i : i * I(S::stride); }
};

template <class I, class S, class Next, class... Outer>
struct Role<I, S, Next, Outer...> {
  static constexpr int segments = 2 + int(sizeof...(Outer));
  __host__ __device__ static constexpr I offset(I i) {
    return (i % I(S::size)) * I(S::stride) + Role<I, Next, Outer...>::offset(i / I(S::size));
  }
};

// An operand's view of the problem: one Role per problem role (empty where the operand lacks the role).
template <class Batch, class M, class N, class K>
struct View {
  using batch = Batch;
  using m = M;
  using n = N;
  using k = K;
};

}  // namespace dg
