//===- softmax.cpp - CPU kernels of softmax, log_softmax and gradients ----===//
//
// The tensor is [outer, C, inner] around the softmax axis. The common case,
// the last axis (inner == 1), is one row per item, threaded over rows: a
// max pass, an exp-and-sum pass (exp stored for softmax), a scale pass. For
// an inner axis, blocks of `inner` columns are processed the same way with a
// vector of maxima and sums. The gradients (softmax_grad, log_softmax_grad)
// walk the same way: one sum per item, then one pass writing dx.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/SoftmaxShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

template <typename T, bool Log>
CLEAVE_ALWAYS_INLINE void softmaxRow(const T *x, T *y, int64_t n) {
  using C = Compute<T>;
  C m = -std::numeric_limits<C>::infinity();
  if constexpr (std::is_same_v<T, float>) {
    m = maxOf(x, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      m = std::max(m, C(load(x[i])));
  }
  C sum = 0;
  if constexpr (Log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i)
      sum += cpu::exp(C(load(x[i])) - m);
    C shift = m + std::log(sum);
    for (int64_t i = 0; i < n; ++i)
      y[i] = store<T>(C(load(x[i])) - shift);
  } else if constexpr (std::is_same_v<T, C>) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      C e = cpu::exp(x[i] - m);
      y[i] = e;
      sum += e;
    }
    C inv = C(1) / sum;
    for (int64_t i = 0; i < n; ++i)
      y[i] *= inv;
  } else {
    // 16-bit storage: recompute exp rather than round it twice.
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i)
      sum += cpu::exp(C(load(x[i])) - m);
    C inv = C(1) / sum;
    for (int64_t i = 0; i < n; ++i)
      y[i] = store<T>(cpu::exp(C(load(x[i])) - m) * inv);
  }
}

/// `n` columns of an [C, inner] slab starting at x.
template <typename T, bool Log>
CLEAVE_ALWAYS_INLINE void softmaxColumns(const T *x, T *y, int64_t classes,
                                         int64_t inner, int64_t n) {
  using C = Compute<T>;
  constexpr int64_t kBlock = 256;
  C m[kBlock], sum[kBlock];
  for (int64_t i = 0; i < n; ++i) {
    m[i] = -std::numeric_limits<C>::infinity();
    sum[i] = 0;
  }
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i) {
      C v = load(x[c * inner + i]);
      m[i] = (v > m[i] || v != v) ? v : m[i];
    }
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i)
      sum[i] += cpu::exp(C(load(x[c * inner + i])) - m[i]);
  for (int64_t i = 0; i < n; ++i)
    sum[i] = Log ? m[i] + std::log(sum[i]) : C(1) / sum[i];
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i) {
      C v = load(x[c * inner + i]);
      y[c * inner + i] =
          store<T>(Log ? v - sum[i] : cpu::exp(v - m[i]) * sum[i]);
    }
}

/// Rows [begin, end) of an [outer, classes] tensor.
template <typename T, bool Log>
CLEAVE_ALWAYS_INLINE void softmaxRows(const T *x, T *y, int64_t classes,
                                      int64_t begin, int64_t end) {
  for (int64_t o = begin; o < end; ++o)
    softmaxRow<T, Log>(x + o * classes, y + o * classes, classes);
}

template <typename T, bool Log>
CLEAVE_TARGET_AVX2 void softmaxRowsAvx2(const T *x, T *y, int64_t classes,
                                        int64_t begin, int64_t end) {
  softmaxRows<T, Log>(x, y, classes, begin, end);
}

template <typename T, bool Log>
CLEAVE_TARGET_AVX2 void softmaxColumnsAvx2(const T *x, T *y, int64_t classes,
                                           int64_t inner, int64_t n) {
  softmaxColumns<T, Log>(x, y, classes, inner, n);
}

/// Threads the work over rows (inner == 1: rows(begin, end) does rows
/// [begin, end)) or over blocks of up to 256 columns of one [classes,
/// inner] slab (columns(offset, n)).
template <typename Rows, typename Columns>
void forEachSlab(int64_t outer, int64_t classes, int64_t inner, Rows &&rows,
                 Columns &&columns) {
  if (classes == 0)
    return;
  if (inner == 1) {
    parallelRange(outer, std::max<int64_t>(1, 4096 / classes), rows);
    return;
  }
  const int64_t block = 256;
  int64_t blocks = (inner + block - 1) / block;
  parallelRange(outer * blocks, std::max<int64_t>(1, 4096 / (classes * block)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    int64_t o = item / blocks, i0 = (item % blocks) * block;
                    columns(o * classes * inner + i0,
                            std::min(block, inner - i0));
                  }
                });
}

template <bool Log> Status softmax(const KernelArgs &a) {
  int64_t outer, classes, inner;
  CLEAVE_CHECK(softmaxLayout(a, outer, classes, inner));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = a.in(0).as<T>();
    T *out = a.out().as<T>();
    bool avx2 = std::is_same_v<T, float> && useAvx2();
    forEachSlab(
        outer, classes, inner,
        [&](int64_t begin, int64_t end) {
          if (avx2)
            softmaxRowsAvx2<T, Log>(in, out, classes, begin, end);
          else
            softmaxRows<T, Log>(in, out, classes, begin, end);
        },
        [&](int64_t offset, int64_t n) {
          if (avx2)
            softmaxColumnsAvx2<T, Log>(in + offset, out + offset, classes,
                                       inner, n);
          else
            softmaxColumns<T, Log>(in + offset, out + offset, classes, inner,
                                   n);
        });
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// Gradients, from the forward result y and its gradient dy
//===----------------------------------------------------------------------===//

/// One row: softmax_grad's y (dy - sum(dy y)), or log_softmax_grad's
/// dy - exp(y) sum(dy).
template <typename T, bool Log>
CLEAVE_ALWAYS_INLINE void softmaxGradRow(const T *y, const T *dy, T *dx,
                                         int64_t n) {
  using C = Compute<T>;
  C sum = 0;
  if constexpr (Log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i)
      sum += C(load(dy[i]));
    for (int64_t i = 0; i < n; ++i)
      dx[i] = store<T>(C(load(dy[i])) - cpu::exp(C(load(y[i]))) * sum);
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i)
      sum += C(load(dy[i])) * C(load(y[i]));
    for (int64_t i = 0; i < n; ++i)
      dx[i] = store<T>(C(load(y[i])) * (C(load(dy[i])) - sum));
  }
}

/// `n` columns of an [classes, inner] slab, with a vector of sums.
template <typename T, bool Log>
CLEAVE_ALWAYS_INLINE void softmaxGradColumns(const T *y, const T *dy, T *dx,
                                             int64_t classes, int64_t inner,
                                             int64_t n) {
  using C = Compute<T>;
  C sum[256];
  for (int64_t i = 0; i < n; ++i)
    sum[i] = 0;
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i) {
      C g = load(dy[c * inner + i]);
      sum[i] += Log ? g : g * C(load(y[c * inner + i]));
    }
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i) {
      C v = load(y[c * inner + i]), g = load(dy[c * inner + i]);
      dx[c * inner + i] =
          store<T>(Log ? g - cpu::exp(v) * sum[i] : v * (g - sum[i]));
    }
}

template <typename T, bool Log>
CLEAVE_ALWAYS_INLINE void softmaxGradRows(const T *y, const T *dy, T *dx,
                                          int64_t classes, int64_t begin,
                                          int64_t end) {
  for (int64_t o = begin; o < end; ++o)
    softmaxGradRow<T, Log>(y + o * classes, dy + o * classes, dx + o * classes,
                           classes);
}

template <typename T, bool Log>
CLEAVE_TARGET_AVX2 void softmaxGradRowsAvx2(const T *y, const T *dy, T *dx,
                                            int64_t classes, int64_t begin,
                                            int64_t end) {
  softmaxGradRows<T, Log>(y, dy, dx, classes, begin, end);
}

template <bool Log> Status softmaxGrad(const KernelArgs &a) {
  int64_t outer, classes, inner;
  CLEAVE_CHECK(softmaxGradLayout(a, outer, classes, inner));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *y = a.in(0).as<T>(), *dy = a.in(1).as<T>();
    T *dx = a.out().as<T>();
    bool avx2 = std::is_same_v<T, float> && useAvx2();
    forEachSlab(
        outer, classes, inner,
        [&](int64_t begin, int64_t end) {
          if (avx2)
            softmaxGradRowsAvx2<T, Log>(y, dy, dx, classes, begin, end);
          else
            softmaxGradRows<T, Log>(y, dy, dx, classes, begin, end);
        },
        [&](int64_t offset, int64_t n) {
          softmaxGradColumns<T, Log>(y + offset, dy + offset, dx + offset,
                                     classes, inner, n);
        });
    return Status::ok();
  });
}

} // namespace

Status cpu::softmaxKernel(const KernelArgs &a) { return softmax<false>(a); }
Status cpu::logSoftmaxKernel(const KernelArgs &a) { return softmax<true>(a); }
Status cpu::softmaxGradKernel(const KernelArgs &a) {
  return softmaxGrad<false>(a);
}
Status cpu::logSoftmaxGradKernel(const KernelArgs &a) {
  return softmaxGrad<true>(a);
}
