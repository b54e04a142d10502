//===- reductions.cpp - CPU kernels of reduce_sum/mean/max/min ------------===//
//
// After dropping dimensions of size 1 and merging neighbours of the same
// kind, most reductions are [outer, reduced, inner]: rows (inner == 1,
// e.g. a mean over the hidden size) or columns (e.g. a bias gradient summed
// over the batch), each a vectorizable loop, threaded over outer rows or
// inner column blocks. Any other pattern walks a table of the reduced
// offsets per result element. Floating-point sums accumulate in double;
// max and min propagate NaN as numpy does. cumsum walks each line along
// its axis in order (from the end when reversed), threaded over the lines.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/ReductionShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

enum class Reduce { Sum, Mean, Max, Min };

/// The accumulator type of a reduction of T.
template <typename T, Reduce R> struct AccOf {
  using type = std::conditional_t<
      R == Reduce::Sum || R == Reduce::Mean,
      std::conditional_t<
          isFloating<T>(), double,
          std::conditional_t<std::is_signed_v<Compute<T>>, int64_t, uint64_t>>,
      Compute<T>>;
};

template <typename A, Reduce R> A initial() {
  if constexpr (R == Reduce::Max)
    return std::numeric_limits<A>::has_infinity
               ? -std::numeric_limits<A>::infinity()
               : std::numeric_limits<A>::lowest();
  else if constexpr (R == Reduce::Min)
    return std::numeric_limits<A>::has_infinity
               ? std::numeric_limits<A>::infinity()
               : std::numeric_limits<A>::max();
  else
    return A(0);
}

template <typename A, Reduce R> inline A combine(A acc, A x) {
  if constexpr (R == Reduce::Max)
    return (x > acc || x != x) ? x : acc;
  else if constexpr (R == Reduce::Min)
    return (x < acc || x != x) ? x : acc;
  else if constexpr (std::is_integral_v<A>)
    return A(std::make_unsigned_t<A>(acc) + std::make_unsigned_t<A>(x));
  else
    return acc + x;
}

template <typename T, Reduce R, typename A>
inline T finish(A acc, int64_t count) {
  if constexpr (R == Reduce::Mean) {
    if constexpr (std::is_integral_v<A>)
      return store<T>(Compute<T>(count ? acc / A(count) : A(0)));
    else
      return store<T>(Compute<T>(acc / double(count)));
  } else {
    return store<T>(Compute<T>(acc));
  }
}

template <typename T, Reduce R>
void reduceTyped(const KernelArgs &a, const std::vector<bool> &reduced) {
  using A = typename AccOf<T, R>::type;
  const T *x = a.in(0).as<T>();
  T *out = a.out().as<T>();
  const Shape &shape = a.in(0).shape;
  // Merge into runs of kept (K) and reduced (R) dimensions.
  ReduceDims merged = mergeReduceDims(shape, reduced);
  const Shape &dims = merged.dims;
  const std::vector<bool> &kinds = merged.kinds;
  int64_t count = merged.count;
  int64_t outCount = a.out().numElements();
  if (outCount == 0)
    return;
  if (count == 0) {
    for (int64_t i = 0; i < outCount; ++i)
      out[i] = finish<T, R>(initial<A, R>(), 0);
    return;
  }

  // [outer, reduced, inner] with each part possibly absent.
  size_t first = !kinds.empty() && !kinds[0] ? 1 : 0;
  bool simple = kinds.size() <= first + 2 &&
                (first == kinds.size() || kinds[first]) &&
                (first + 1 >= kinds.size() || !kinds[first + 1]);
  if (simple) {
    int64_t outer = first ? dims[0] : 1;
    int64_t inner = first + 1 < kinds.size() ? dims[first + 1] : 1;
    if (inner == 1) {
      // Rows: one accumulator per result element.
      parallelRange(outer, std::max<int64_t>(1, kElementwiseGrain / count),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t o = begin; o < end; ++o) {
                        const T *row = x + o * count;
                        A acc = initial<A, R>();
                        if constexpr (R == Reduce::Sum || R == Reduce::Mean) {
#pragma omp simd reduction(+ : acc)
                          for (int64_t r = 0; r < count; ++r)
                            acc += A(load(row[r]));
                        } else {
                          for (int64_t r = 0; r < count; ++r)
                            acc = combine<A, R>(acc, A(load(row[r])));
                        }
                        out[o] = finish<T, R>(acc, count);
                      }
                    });
      return;
    }
    // Columns: blocks of inner accumulators, threaded over (outer, block).
    const int64_t block = 256;
    int64_t blocks = (inner + block - 1) / block;
    parallelRange(outer * blocks,
                  std::max<int64_t>(1, kElementwiseGrain / (count * block)),
                  [&](int64_t begin, int64_t end) {
                    A acc[block];
                    for (int64_t item = begin; item < end; ++item) {
                      int64_t o = item / blocks, i0 = (item % blocks) * block;
                      int64_t n = std::min(block, inner - i0);
                      for (int64_t i = 0; i < n; ++i)
                        acc[i] = initial<A, R>();
                      const T *base = x + o * count * inner + i0;
                      for (int64_t r = 0; r < count; ++r) {
                        const T *row = base + r * inner;
                        for (int64_t i = 0; i < n; ++i)
                          acc[i] = combine<A, R>(acc[i], A(load(row[i])));
                      }
                      T *o_ = out + o * inner + i0;
                      for (int64_t i = 0; i < n; ++i)
                        o_[i] = finish<T, R>(acc[i], count);
                    }
                  });
    return;
  }

  // General: the offsets of one result element's inputs, walked for each.
  Shape strides = stridesOf(shape);
  Shape keptDims, keptStrides;
  std::vector<int64_t> offsets{0};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      keptDims.push_back(shape[d]);
      keptStrides.push_back(strides[d]);
      continue;
    }
    std::vector<int64_t> next;
    next.reserve(offsets.size() * shape[d]);
    for (int64_t base : offsets)
      for (int64_t j = 0; j < shape[d]; ++j)
        next.push_back(base + j * strides[d]);
    offsets.swap(next);
  }
  parallelRange(outCount, std::max<int64_t>(1, kElementwiseGrain / count),
                [&](int64_t begin, int64_t end) {
                  for (int64_t o = begin; o < end; ++o) {
                    int64_t base = 0;
                    for (int64_t d = int64_t(keptDims.size()) - 1, rest = o;
                         d >= 0; --d) {
                      base += (rest % keptDims[d]) * keptStrides[d];
                      rest /= keptDims[d];
                    }
                    A acc = initial<A, R>();
                    for (int64_t off : offsets)
                      acc = combine<A, R>(acc, A(load(x[base + off])));
                    out[o] = finish<T, R>(acc, count);
                  }
                });
}

template <Reduce R> Status reduce(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  std::vector<bool> reduced;
  CLEAVE_CHECK(reducePlan(a, reduced));
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduceTyped<T, R>(a, reduced);
    return Status::ok();
  };
  // Max and min of bools are any and all; a sum of bools is not a bool.
  if constexpr (R == Reduce::Max || R == Reduce::Min)
    return visitAny(a, x.dtype, run);
  else
    return visitNumeric(a, x.dtype, run);
}

} // namespace

Status cpu::reduceSumKernel(const KernelArgs &a) {
  return reduce<Reduce::Sum>(a);
}
Status cpu::reduceMeanKernel(const KernelArgs &a) {
  return reduce<Reduce::Mean>(a);
}
Status cpu::reduceMaxKernel(const KernelArgs &a) {
  return reduce<Reduce::Max>(a);
}
Status cpu::reduceMinKernel(const KernelArgs &a) {
  return reduce<Reduce::Min>(a);
}

namespace {

/// One line of x per (outer, inner) position, summed along the axis in
/// the accumulator type of reduce_sum (double for floats; integers wrap).
template <typename T>
void cumsumLines(const T *x, T *y, const CumsumPlan &p) {
  using A = typename AccOf<T, Reduce::Sum>::type;
  int64_t lines = p.outer * p.inner;
  parallelRange(
      lines, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(p.axisSize, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t line = begin; line < end; ++line) {
          int64_t o = line / p.inner, c = line % p.inner;
          int64_t base = o * p.axisSize * p.inner + c;
          A acc = A(0);
          for (int64_t k = 0; k < p.axisSize; ++k) {
            int64_t at = base + (p.reverse ? p.axisSize - 1 - k : k) * p.inner;
            A v = A(load(x[at]));
            if (p.exclusive) {
              y[at] = store<T>(Compute<T>(acc));
              acc = combine<A, Reduce::Sum>(acc, v);
            } else {
              acc = combine<A, Reduce::Sum>(acc, v);
              y[at] = store<T>(Compute<T>(acc));
            }
          }
        }
      });
}

} // namespace

Status cpu::cumsumKernel(const KernelArgs &a) {
  CumsumPlan plan;
  CLEAVE_CHECK(checkCumsum(a, plan));
  return visitNumeric(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cumsumLines<T>(a.in(0).as<T>(), a.out().as<T>(), plan);
    return Status::ok();
  });
}
