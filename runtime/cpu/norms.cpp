//===- norms.cpp - CPU kernels of layer_norm, rms_norm and their gradients ===//
//
// x is [rows, D] with D the product of the dimensions from `axis` on. Each
// row is normalized by one call that reads it three times while it sits in
// cache (mean, centred variance, normalize-scale-shift); rows are spread
// over OpenMP threads. Statistics are computed in float (double for f64)
// with vectorized partial sums; the variance is centred, so there is no
// cancellation. The gradients recompute the same statistics per row, write
// dx in a second pass over the row, and sum dscale/dbias per thread.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/NormShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// The mean and 1 / sqrt(biased variance + epsilon) of one row.
template <typename T>
CLEAVE_ALWAYS_INLINE void layerNormStats(const T *x, int64_t d,
                                         Compute<T> epsilon, Compute<T> &mean,
                                         Compute<T> &rstd) {
  using C = Compute<T>;
  C sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i)
    sum += load(x[i]);
  mean = sum / C(d);
  C squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < d; ++i) {
    C c = C(load(x[i])) - mean;
    squares += c * c;
  }
  rstd = C(1) / std::sqrt(squares / C(d) + epsilon);
}

/// 1 / sqrt(mean(x^2) + epsilon) of one row.
template <typename T>
CLEAVE_ALWAYS_INLINE Compute<T> rmsStat(const T *x, int64_t d,
                                        Compute<T> epsilon) {
  using C = Compute<T>;
  C squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < d; ++i) {
    C v = load(x[i]);
    squares += v * v;
  }
  return C(1) / std::sqrt(squares / C(d) + epsilon);
}

template <typename T>
CLEAVE_ALWAYS_INLINE void layerNormRow(const T *x, const T *scale,
                                       const T *bias, T *y, int64_t d,
                                       Compute<T> epsilon) {
  using C = Compute<T>;
  C mean, rstd;
  layerNormStats(x, d, epsilon, mean, rstd);
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
  C rms = rmsStat(x, d, epsilon);
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

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// One row of layer_norm_grad (or of rms_norm_grad when Rms): writes dx
/// and adds the row's dy * xhat to dscale and dy to dbias (rows of the
/// thread's partial sums). With g = dy * scale and xhat the normalized x,
///   layer_norm: dx = rstd (g - mean(g) - xhat mean(g xhat))
///   rms_norm:   dx = rstd (g - xhat mean(g xhat))
template <typename T, bool Rms>
CLEAVE_ALWAYS_INLINE void
normGradRow(const T *dy, const T *x, const T *scale, T *dx, Compute<T> *dscale,
            Compute<T> *dbias, int64_t d, Compute<T> epsilon) {
  using C = Compute<T>;
  C mean = 0, rstd;
  if constexpr (Rms)
    rstd = rmsStat(x, d, epsilon);
  else
    layerNormStats(x, d, epsilon, mean, rstd);
  C sumG = 0, sumGX = 0;
#pragma omp simd reduction(+ : sumG, sumGX)
  for (int64_t i = 0; i < d; ++i) {
    C g = load(dy[i]);
    C xhat = (C(load(x[i])) - mean) * rstd;
    dscale[i] += g * xhat;
    if constexpr (!Rms)
      dbias[i] += g;
    if (scale)
      g *= C(load(scale[i]));
    sumG += g;
    sumGX += g * xhat;
  }
  C meanG = Rms ? C(0) : sumG / C(d), meanGX = sumGX / C(d);
  for (int64_t i = 0; i < d; ++i) {
    C g = load(dy[i]);
    if (scale)
      g *= C(load(scale[i]));
    C xhat = (C(load(x[i])) - mean) * rstd;
    dx[i] = store<T>(rstd * (g - meanG - xhat * meanGX));
  }
}

template <typename T, bool Rms>
CLEAVE_ALWAYS_INLINE void
normGradRows(const T *dy, const T *x, const T *scale, T *dx, Compute<T> *dscale,
             Compute<T> *dbias, int64_t d, Compute<T> epsilon, int64_t begin,
             int64_t end) {
  for (int64_t r = begin; r < end; ++r)
    normGradRow<T, Rms>(dy + r * d, x + r * d, scale, dx + r * d, dscale, dbias,
                        d, epsilon);
}

template <typename T, bool Rms>
CLEAVE_TARGET_AVX2 void
normGradRowsAvx2(const T *dy, const T *x, const T *scale, T *dx,
                 Compute<T> *dscale, Compute<T> *dbias, int64_t d,
                 Compute<T> epsilon, int64_t begin, int64_t end) {
  normGradRows<T, Rms>(dy, x, scale, dx, dscale, dbias, d, epsilon, begin, end);
}

/// dx for every row, threaded over contiguous chunks of rows, each with
/// its own partial dscale and dbias; the partials are then added in chunk
/// order, so the result depends on the thread count but not on timing.
template <typename T, bool Rms>
void normalizeGrad(const T *dy, const T *x, const T *scale, T *dx, T *dscale,
                   T *dbias, int64_t rows, int64_t d, double epsilon) {
  using C = Compute<T>;
  bool avx2 = std::is_same_v<T, float> && useAvx2();
  C eps = C(epsilon);
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(d, 1));
  int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t chunks = std::max<int64_t>(1, std::min(threads, rows / grain));
  std::vector<C> partial(chunks * 2 * d, C(0));
#pragma omp parallel for num_threads(chunks) schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    C *ds = partial.data() + c * 2 * d, *db = ds + d;
    int64_t begin = rows * c / chunks, end = rows * (c + 1) / chunks;
    if (avx2)
      normGradRowsAvx2<T, Rms>(dy, x, scale, dx, ds, db, d, eps, begin, end);
    else
      normGradRows<T, Rms>(dy, x, scale, dx, ds, db, d, eps, begin, end);
  }
  for (int64_t i = 0; i < d; ++i) {
    C s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partial[c * 2 * d + i];
      b += partial[c * 2 * d + d + i];
    }
    dscale[i] = store<T>(s);
    if (dbias)
      dbias[i] = store<T>(b);
  }
}

} // namespace

Status cpu::layerNormKernel(const KernelArgs &a) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNorm(a, 0, {{1, "scale"}, {2, "bias"}}, rows, d, epsilon));
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
  CLEAVE_CHECK(checkNorm(a, 0, {{1, "scale"}}, rows, d, epsilon));
  if (!a.has(1) && d > 0)
    return a.error("scale is required");
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize<T, true>(a.in(0).as<T>(), a.in(1).as<T>(), nullptr,
                       a.out().as<T>(), rows, d, epsilon);
    return Status::ok();
  });
}

Status cpu::layerNormGradKernel(const KernelArgs &a) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNormGrad(a, rows, d, epsilon));
  return visitFloat(a, a.in(1).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalizeGrad<T, false>(
        a.in(0).as<T>(), a.in(1).as<T>(), a.has(2) ? a.in(2).as<T>() : nullptr,
        a.out(0).as<T>(), a.out(1).as<T>(), a.out(2).as<T>(), rows, d, epsilon);
    return Status::ok();
  });
}

Status cpu::rmsNormGradKernel(const KernelArgs &a) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNormGrad(a, rows, d, epsilon));
  return visitFloat(a, a.in(1).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalizeGrad<T, true>(a.in(0).as<T>(), a.in(1).as<T>(), a.in(2).as<T>(),
                           a.out(0).as<T>(), a.out(1).as<T>(), nullptr, rows, d,
                           epsilon);
    return Status::ok();
  });
}
