//===- norms.cpp - CPU kernels of layer_norm and rms_norm -----------------===//
//
// x is [rows, D] with D the product of the dimensions from `axis` on. Each
// row is normalized by one call that reads it three times while it sits in
// cache (mean, centred variance, normalize-scale-shift); rows are spread
// over OpenMP threads. Statistics are computed in float (double for f64)
// with vectorized partial sums; the variance is centred, so there is no
// cancellation.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;

namespace {

template <typename T>
CLEAVE_ALWAYS_INLINE void layerNormRow(const T *x, const T *scale,
                                       const T *bias, T *y, int64_t d,
                                       Compute<T> epsilon) {
  using C = Compute<T>;
  C sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i)
    sum += load(x[i]);
  C mean = sum / C(d);
  C squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < d; ++i) {
    C c = C(load(x[i])) - mean;
    squares += c * c;
  }
  C rstd = C(1) / std::sqrt(squares / C(d) + epsilon);
  if (scale && bias) {
    for (int64_t i = 0; i < d; ++i)
      y[i] = store<T>((C(load(x[i])) - mean) * rstd * C(load(scale[i])) +
                      C(load(bias[i])));
  } else if (scale) {
    for (int64_t i = 0; i < d; ++i)
      y[i] = store<T>((C(load(x[i])) - mean) * rstd * C(load(scale[i])));
  } else if (bias) {
    for (int64_t i = 0; i < d; ++i)
      y[i] = store<T>((C(load(x[i])) - mean) * rstd + C(load(bias[i])));
  } else {
    for (int64_t i = 0; i < d; ++i)
      y[i] = store<T>((C(load(x[i])) - mean) * rstd);
  }
}

template <typename T>
CLEAVE_ALWAYS_INLINE void rmsNormRow(const T *x, const T *scale, T *y,
                                     int64_t d, Compute<T> epsilon) {
  using C = Compute<T>;
  C squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < d; ++i) {
    C v = load(x[i]);
    squares += v * v;
  }
  C rms = C(1) / std::sqrt(squares / C(d) + epsilon);
  for (int64_t i = 0; i < d; ++i)
    y[i] = store<T>(C(load(x[i])) * rms * C(load(scale[i])));
}

/// Rows [begin, end) of layer_norm, or of rms_norm when Rms (which has no
/// bias).
template <typename T, bool Rms>
CLEAVE_ALWAYS_INLINE void normRows(const T *x, const T *scale, const T *bias,
                                   T *y, int64_t d, Compute<T> epsilon,
                                   int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    if constexpr (Rms)
      rmsNormRow(x + r * d, scale, y + r * d, d, epsilon);
    else
      layerNormRow(x + r * d, scale, bias, y + r * d, d, epsilon);
  }
}

template <typename T, bool Rms>
CLEAVE_TARGET_AVX2 void normRowsAvx2(const T *x, const T *scale, const T *bias,
                                     T *y, int64_t d, Compute<T> epsilon,
                                     int64_t begin, int64_t end) {
  normRows<T, Rms>(x, scale, bias, y, d, epsilon, begin, end);
}

/// Normalizes every row, threaded over rows.
template <typename T, bool Rms>
void normalize(const T *x, const T *scale, const T *bias, T *y, int64_t rows,
               int64_t d, double epsilon) {
  bool avx2 = std::is_same_v<T, float> && useAvx2();
  Compute<T> eps = Compute<T>(epsilon);
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(d, 1));
  parallelRange(rows, grain, [&](int64_t begin, int64_t end) {
    if (avx2)
      normRowsAvx2<T, Rms>(x, scale, bias, y, d, eps, begin, end);
    else
      normRows<T, Rms>(x, scale, bias, y, d, eps, begin, end);
  });
}

/// The checks both norms share: axis, epsilon, the result, and that the
/// given weights have shape x.shape[axis:] and x's element type.
Status checkNorm(const KernelArgs &a, std::initializer_list<size_t> weights,
                 int64_t &rows, int64_t &d, double &epsilon) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  int64_t axis;
  CLEAVE_CHECK(a.intAttr("axis", axis, -1));
  CLEAVE_CHECK(a.floatAttr("epsilon", epsilon, 1e-5));
  if (x.rank() == 0)
    return a.error("x must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, axis, x.rank()));
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (size_t i : weights) {
    if (!a.has(i))
      continue;
    const char *what = i == 1 ? "scale" : "bias";
    CLEAVE_CHECK(a.expectShape(a.in(i), normalized, what));
    CLEAVE_CHECK(a.expectDType(a.in(i), x.dtype, what));
  }
  rows = product(x.shape, 0, axis);
  d = product(normalized);
  return Status::ok();
}

} // namespace

Status cpu::layerNormKernel(const KernelArgs &a) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNorm(a, {1, 2}, rows, d, epsilon));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize<T, false>(a.in(0).as<T>(), a.has(1) ? a.in(1).as<T>() : nullptr,
                        a.has(2) ? a.in(2).as<T>() : nullptr, a.out().as<T>(),
                        rows, d, epsilon);
    return Status::ok();
  });
}

Status cpu::rmsNormKernel(const KernelArgs &a) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNorm(a, {1}, rows, d, epsilon));
  if (!a.has(1) && d > 0)
    return a.error("scale is required");
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize<T, true>(a.in(0).as<T>(), a.in(1).as<T>(), nullptr,
                       a.out().as<T>(), rows, d, epsilon);
    return Status::ok();
  });
}
