//===- KernelSupport.h - what every CPU kernel file shares -----*- C++ -*-===//
//
// What only the CPU backend's kernels use: their function type (KernelFn),
// OpenMP work splitting, the walk over a broadcasting plan, the AVX2
// dispatch and a vectorizable expf and tanhf. What the CPU and CUDA kernels
// share (KernelArgs, element types, dispatch over them, broadcasting
// shapes) is in runtime/ops/KernelArgs.h. Plain C++17: no MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CPU_KERNELSUPPORT_H
#define CLEAVE_RUNTIME_CPU_KERNELSUPPORT_H

#include "runtime/ops/KernelArgs.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>


/// Compute-bound loops (exp, tanh, dot products) are compiled a second time
/// for AVX2 with FMA: an always-inline body, and a thin wrapper with this
/// attribute that inlines it; cpu::useAvx2() picks one at run time. The
/// rest of the library stays baseline x86-64, so it runs anywhere.
#define CLEAVE_TARGET_AVX2 __attribute__((target("avx2,fma")))

namespace cleave::runtime::cpu {

using KernelFn = Status (*)(const ops::KernelArgs &);


/// Whether this CPU runs the AVX2/FMA variants (decided once; the
/// environment variable CLEAVE_CPU_ISA=baseline forces the portable ones,
/// which the tests use to check both).
bool useAvx2();

/// Makes OpenBLAS run on its calling thread from now on: the kernels split
/// their products over OpenMP threads themselves (see matmul.cpp).
void singleThreadedBlas();

//===----------------------------------------------------------------------===//
// Work splitting
//===----------------------------------------------------------------------===//

/// Elements of a cheap elementwise loop below which one thread does it all.
constexpr int64_t kElementwiseGrain = 1 << 15;

/// Runs body(begin, end) over [0, n) split into contiguous chunks of at
/// least `grain` items, one per OpenMP thread. The body's loop is plain so
/// the compiler vectorizes it.
template <typename F> void parallelRange(int64_t n, int64_t grain, F &&body) {
  if (n <= 0)
    return;
  int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t chunks = std::min<int64_t>(threads, n / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    body(int64_t(0), n);
    return;
  }
#pragma omp parallel for num_threads(chunks) schedule(static)
  for (int64_t c = 0; c < chunks; ++c)
    body(n * c / chunks, n * (c + 1) / chunks);
}

//===----------------------------------------------------------------------===//
// Walking a broadcasting plan
//===----------------------------------------------------------------------===//


/// Runs fn(row, column, count, resultOffset) over the plan's result in
/// segments of one row each, split across threads by element count (so a
/// single long row is split too).
template <typename F>
void forEachSegment(const ops::BroadcastPlan &plan, int64_t grain, F &&fn) {
  int64_t inner = plan.inner;
  parallelRange(plan.rows * inner, grain, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end;) {
      int64_t row = e / inner, column = e % inner;
      int64_t count = std::min(inner - column, end - e);
      fn(row, column, count, e);
      e += count;
    }
  });
}

//===----------------------------------------------------------------------===//
// Math
//===----------------------------------------------------------------------===//

/// e^x in float with Cephes' polynomial (about 1 ulp), written so that loops
/// calling it vectorize: no libm call and no data-dependent branch (only
/// the clamp, which compiles to min/max). The clamp range makes the
/// special cases come out of the arithmetic: below -104 the result rounds
/// to 0 (so exp(-inf) = 0), above 89 it overflows to inf, NaN stays NaN.
CLEAVE_ALWAYS_INLINE float fastExp(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  // n = round(x / ln 2) with the 1.5 * 2^23 trick; r = x - n ln 2 in two
  // parts (Cody-Waite).
  float t = xc * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // 2^n as two normal factors: n is in [-150, 129].
  int32_t ni = int32_t(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = ops::bitsFloat(uint32_t(n1 + 127) << 23);
  float s2 = ops::bitsFloat(uint32_t(n2 + 127) << 23);
  return y * s1 * s2;
}

/// tanh in float (Cephes: an odd polynomial for |x| <= 0.625,
/// 1 - 2 / (e^2|x| + 1) beyond), vectorizable: both are computed and one
/// is selected.
CLEAVE_ALWAYS_INLINE float fastTanh(float x) {
  float ax = std::fabs(x);
  float e = fastExp(2.0f * ax);
  float big = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  float z = x * x;
  float small =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) *
            z +
        1.33314422036e-1f) *
           z -
       3.33332819422e-1f) *
          z * x +
      x;
  return ax > 0.625f ? big : small;
}

/// Eight floats as a GCC vector that may sit at any float's address: one
/// AVX register in the AVX2 variants, two SSE registers in the baseline.
/// For the few loops the vectorizer does not handle on its own (float max
/// reductions, which it only forms with -ffinite-math-only).
typedef float Float8 __attribute__((vector_size(32), aligned(4)));

/// The largest of x[0, n) (-inf when empty); NaN elements are skipped, so
/// a caller that needs NaN to propagate sees it in its next step (exp).
CLEAVE_ALWAYS_INLINE float maxOf(const float *x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  Float8 m0 = {ninf, ninf, ninf, ninf, ninf, ninf, ninf, ninf}, m1 = m0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Float8 a = *reinterpret_cast<const Float8 *>(x + i);
    Float8 b = *reinterpret_cast<const Float8 *>(x + i + 8);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  m0 = m1 > m0 ? m1 : m0;
  float m = ninf;
  for (int lane = 0; lane < 8; ++lane)
    m = m0[lane] > m ? m0[lane] : m;
  for (; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

template <typename C> CLEAVE_ALWAYS_INLINE C exp(C x) { return std::exp(x); }
template <> CLEAVE_ALWAYS_INLINE float exp<float>(float x) {
  return fastExp(x);
}
template <typename C> CLEAVE_ALWAYS_INLINE C tanh(C x) { return std::tanh(x); }
template <> CLEAVE_ALWAYS_INLINE float tanh<float>(float x) {
  return fastTanh(x);
}

} // namespace cleave::runtime::cpu

#endif // CLEAVE_RUNTIME_CPU_KERNELSUPPORT_H
