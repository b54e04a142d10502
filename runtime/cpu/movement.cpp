//===- movement.cpp - CPU kernels that move or convert elements -----------===//
//
// reshape, transpose, broadcast_to, slice and concat move elements without
// looking at them, so they work on the element's size for every type. Most
// are one strided copy: the result is walked in rows (dimensions merged
// where the source allows), a row being a memcpy, a fill, or a strided loop.
// A transpose that moves the source's contiguous dimension is done in
// 32 x 32 tiles so both sides stay in cache. cast converts between every
// pair of element types as ONNX Cast does. slice_grad is slice backwards:
// zeros, then one strided scatter of dy.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/MovementShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// out (contiguous, shape `dims`) = in[base + sum_k index_k * strides[k]].
template <typename W>
void stridedCopy(const W *in, int64_t base, const Shape &dims,
                 const Shape &strides, W *out) {
  BroadcastPlan plan = planFromStrides(dims, {strides});
  int64_t step = plan.innerStride[0];
  forEachSegment(plan, kElementwiseGrain * 2,
                 [&](int64_t row, int64_t column, int64_t n, int64_t offset) {
                   const W *src =
                       in + base + plan.rowOffset(0, row) + column * step;
                   W *dst = out + offset;
                   if (step == 1)
                     std::memcpy(dst, src, n * sizeof(W));
                   else if (step == 0)
                     std::fill(dst, dst + n, *src);
                   else
                     for (int64_t i = 0; i < n; ++i)
                       dst[i] = src[i * step];
                 });
}

Status copyBytes(const KernelArgs &a, const TensorRef &from) {
  const char *src = static_cast<const char *>(from.data);
  char *dst = static_cast<char *>(a.out().data);
  parallelRange(int64_t(from.sizeBytes()), 1 << 20,
                [&](int64_t begin, int64_t end) {
                  std::memcpy(dst + begin, src + begin, end - begin);
                });
  return Status::ok();
}

/// out[i * os + j] = in[i + j * is] for i in [a0, a1), j in [b0, b1): one
/// tile. Four-byte elements go through 8 x 8 blocks transposed in
/// registers (8 row loads, 8 row stores); the rest element by element.
template <typename W>
CLEAVE_ALWAYS_INLINE void transposeTile(const W *in, int64_t is, W *out,
                                        int64_t os, int64_t a0, int64_t a1,
                                        int64_t b0, int64_t b1) {
  int64_t a8 = a0, b8 = b0;
  if constexpr (sizeof(W) == 4) {
    typedef uint32_t V __attribute__((vector_size(32), aligned(4)));
    typedef int32_t Mask __attribute__((vector_size(32)));
    a8 = a0 + (a1 - a0) / 8 * 8;
    b8 = b0 + (b1 - b0) / 8 * 8;
    for (int64_t i = a0; i < a8; i += 8)
      for (int64_t j = b0; j < b8; j += 8) {
        // Rows j..j+7 of the source block, eight elements each.
        V r[8];
        for (int k = 0; k < 8; ++k)
          r[k] = *reinterpret_cast<const V *>(in + i + (j + k) * is);
        const Mask lo = {0, 8, 1, 9, 4, 12, 5, 13};
        const Mask hi = {2, 10, 3, 11, 6, 14, 7, 15};
        const Mask lo2 = {0, 1, 8, 9, 4, 5, 12, 13};
        const Mask hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
        const Mask low128 = {0, 1, 2, 3, 8, 9, 10, 11};
        const Mask high128 = {4, 5, 6, 7, 12, 13, 14, 15};
        V t[8], u[8];
        for (int k = 0; k < 8; k += 2) {
          t[k] = __builtin_shuffle(r[k], r[k + 1], lo);
          t[k + 1] = __builtin_shuffle(r[k], r[k + 1], hi);
        }
        for (int k = 0; k < 8; k += 4) {
          u[k] = __builtin_shuffle(t[k], t[k + 2], lo2);
          u[k + 1] = __builtin_shuffle(t[k], t[k + 2], hi2);
          u[k + 2] = __builtin_shuffle(t[k + 1], t[k + 3], lo2);
          u[k + 3] = __builtin_shuffle(t[k + 1], t[k + 3], hi2);
        }
        for (int k = 0; k < 4; ++k) {
          *reinterpret_cast<V *>(out + (i + k) * os + j) =
              __builtin_shuffle(u[k], u[k + 4], low128);
          *reinterpret_cast<V *>(out + (i + k + 4) * os + j) =
              __builtin_shuffle(u[k], u[k + 4], high128);
        }
      }
  }
  // What the 8 x 8 blocks left: the ragged edges (or every element).
  for (int64_t i = a0; i < a1; ++i)
    for (int64_t j = (i < a8 ? b8 : b0); j < b1; ++j)
      out[i * os + j] = in[i + j * is];
}

template <typename W>
CLEAVE_TARGET_AVX2 void transposeTileAvx2(const W *in, int64_t is, W *out,
                                          int64_t os, int64_t a0, int64_t a1,
                                          int64_t b0, int64_t b1) {
  transposeTile(in, is, out, os, a0, a1, b0, b1);
}

/// The transpose of `in` (dims, merged) by `perm`, where the source's last
/// dimension is not the result's last: tiles of 32 x 32 over result
/// dimensions `a` (the source's contiguous one) and the last.
template <typename W>
void tiledTranspose(const W *in, const Shape &inDims, const Shape &perm,
                    W *out) {
  int64_t rank = int64_t(perm.size());
  Shape inStrides = stridesOf(inDims);
  Shape outDims(rank), outStrides;
  for (int64_t k = 0; k < rank; ++k)
    outDims[k] = inDims[perm[k]];
  outStrides = stridesOf(outDims);
  int64_t a = 0;
  while (perm[a] != rank - 1)
    ++a;
  int64_t last = rank - 1;
  // The other result dimensions, walked as `outer`.
  Shape otherDims, otherIn, otherOut;
  for (int64_t k = 0; k < rank; ++k)
    if (k != a && k != last) {
      otherDims.push_back(outDims[k]);
      otherIn.push_back(inStrides[perm[k]]);
      otherOut.push_back(outStrides[k]);
    }
  int64_t outer = product(otherDims);
  const int64_t tile = 64;
  int64_t na = outDims[a], nb = outDims[last];
  int64_t ta = (na + tile - 1) / tile, tb = (nb + tile - 1) / tile;
  int64_t strideA = outStrides[a];         // result stride of dim a
  int64_t strideB = inStrides[perm[last]]; // source stride of the last
  bool avx2 = sizeof(W) == 4 && useAvx2();
  parallelRange(outer * ta * tb, 4, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / (ta * tb), t = item % (ta * tb);
      int64_t a0 = (t / tb) * tile, b0 = (t % tb) * tile;
      int64_t inBase = 0, outBase = 0;
      for (int64_t d = int64_t(otherDims.size()) - 1, rest = o; d >= 0; --d) {
        int64_t i = rest % otherDims[d];
        rest /= otherDims[d];
        inBase += i * otherIn[d];
        outBase += i * otherOut[d];
      }
      int64_t aEnd = std::min(na, a0 + tile), bEnd = std::min(nb, b0 + tile);
      if (avx2)
        transposeTileAvx2(in + inBase, strideB, out + outBase, strideA, a0,
                          aEnd, b0, bEnd);
      else
        transposeTile(in + inBase, strideB, out + outBase, strideA, a0, aEnd,
                      b0, bEnd);
    }
  });
}

/// Converts one element between numeric types as ONNX Cast does: float to
/// integer truncates toward zero (NaN gives 0, out-of-range values
/// saturate), integers wrap. (Bool, which shares uint8_t with U8, is
/// converted by the caller.)
template <typename S, typename D> inline D convert(S s) {
  if constexpr (isFloating<S>() && !isFloating<D>()) {
    double v = double(load(s));
    if (!(v == v))
      return D(0);
    if (v <= double(std::numeric_limits<D>::lowest()))
      return std::numeric_limits<D>::lowest();
    if (v >= double(std::numeric_limits<D>::max()))
      return std::numeric_limits<D>::max();
    return D(v);
  } else if constexpr (isFloating<D>()) {
    return store<D>(Compute<D>(load(s)));
  } else {
    return D(s);
  }
}

/// dst[i] = f(src[i]) over n elements, threaded.
template <typename S, typename D, typename F>
void convertLoop(const TensorRef &from, const TensorRef &to, F f) {
  const S *src = from.as<S>();
  D *dst = to.as<D>();
  parallelRange(from.numElements(), kElementwiseGrain,
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    dst[i] = f(src[i]);
                });
}

/// out[sum_k index_k * strides[k]] = in (contiguous, shape `dims`): the
/// reverse of stridedCopy, for positions that are all distinct.
template <typename W>
void stridedScatter(const W *in, const Shape &dims, const Shape &strides,
                    W *out) {
  BroadcastPlan plan = planFromStrides(dims, {strides});
  int64_t step = plan.innerStride[0];
  forEachSegment(plan, kElementwiseGrain * 2,
                 [&](int64_t row, int64_t column, int64_t n, int64_t offset) {
                   W *dst = out + plan.rowOffset(0, row) + column * step;
                   const W *src = in + offset;
                   if (step == 1)
                     std::memcpy(dst, src, n * sizeof(W));
                   else
                     for (int64_t i = 0; i < n; ++i)
                       dst[i * step] = src[i];
                 });
}

} // namespace

Status cpu::reshapeKernel(const KernelArgs &a) {
  CLEAVE_CHECK(checkReshape(a));
  return copyBytes(a, a.in(0));
}

Status cpu::transposeKernel(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  Shape inDims, newPerm;
  bool identity;
  CLEAVE_CHECK(transposePlan(a, inDims, newPerm, identity));
  if (x.numElements() == 0)
    return Status::ok();
  if (identity)
    return copyBytes(a, x);

  return visitBytes(a, x.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    int64_t r = int64_t(inDims.size());
    if (newPerm[r - 1] != r - 1) {
      tiledTranspose(x.as<W>(), inDims, newPerm, a.out().as<W>());
      return Status::ok();
    }
    Shape inStrides = stridesOf(inDims), outDims(r), strides(r);
    for (int64_t k = 0; k < r; ++k) {
      outDims[k] = inDims[newPerm[k]];
      strides[k] = inStrides[newPerm[k]];
    }
    stridedCopy(x.as<W>(), 0, outDims, strides, a.out().as<W>());
    return Status::ok();
  });
}

Status cpu::broadcastToKernel(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  Shape strides;
  CLEAVE_CHECK(broadcastStrides(a, strides));
  if (a.out().numElements() == 0)
    return Status::ok();
  return visitBytes(a, x.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    stridedCopy(x.as<W>(), 0, a.out().shape, strides, a.out().as<W>());
    return Status::ok();
  });
}

Status cpu::sliceKernel(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  Shape expected, steps;
  int64_t base;
  CLEAVE_CHECK(slicePlan(a, x.shape, expected, steps, base));
  CLEAVE_CHECK(a.expectShape(a.out(), expected, "the result"));
  if (a.out().numElements() == 0)
    return Status::ok();
  return visitBytes(a, x.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    stridedCopy(x.as<W>(), base, expected, steps, a.out().as<W>());
    return Status::ok();
  });
}

/// Zeros, then dy at the positions the slice took (distinct positions, so
/// the strided writes of the threads never meet).
Status cpu::sliceGradKernel(const KernelArgs &a) {
  const TensorRef &dy = a.in(0), &out = a.out();
  CLEAVE_CHECK(a.expectDType(out, dy.dtype, "the result"));
  Shape expected, steps;
  int64_t base;
  CLEAVE_CHECK(slicePlan(a, out.shape, expected, steps, base));
  CLEAVE_CHECK(a.expectShape(dy, expected, "dy"));
  char *bytes = static_cast<char *>(out.data);
  parallelRange(int64_t(out.sizeBytes()), 1 << 20,
                [&](int64_t begin, int64_t end) {
                  std::memset(bytes + begin, 0, end - begin);
                });
  if (dy.numElements() == 0)
    return Status::ok();
  return visitBytes(a, dy.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    stridedScatter(dy.as<W>(), expected, steps, out.as<W>() + base);
    return Status::ok();
  });
}

Status cpu::concatKernel(const KernelArgs &a) {
  const TensorRef &out = a.out();
  int64_t axis;
  CLEAVE_CHECK(concatAxis(a, axis));
  int64_t outer = product(out.shape, 0, axis);
  int64_t innerBytes = product(out.shape, axis + 1) * dtypeSize(out.dtype);
  int64_t rowBytes = out.shape[axis] * innerBytes;
  char *dst = static_cast<char *>(out.data);
  if (out.numElements() == 0)
    return Status::ok();
  parallelRange(
      outer, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(rowBytes, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          char *row = dst + o * rowBytes;
          for (const TensorRef &t : a.inputs) {
            int64_t bytes = t.shape[axis] * innerBytes;
            if (bytes)
              std::memcpy(row, static_cast<const char *>(t.data) + o * bytes,
                          bytes);
            row += bytes;
          }
        }
      });
  return Status::ok();
}

Status cpu::castKernel(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  if (x.dtype == a.out().dtype)
    return copyBytes(a, x);
  const TensorRef &out = a.out();
  if (out.dtype == DType::Bool) // anything nonzero (NaN included) is true
    return visitNumeric(a, x.dtype, [&](auto from) {
      using S = typename decltype(from)::type;
      convertLoop<S, Bool>(x, out, [](S s) { return Bool(load(s) != 0); });
      return Status::ok();
    });
  if (x.dtype == DType::Bool)
    return visitNumeric(
        a, out.dtype,
        [&](auto to) {
          using D = typename decltype(to)::type;
          convertLoop<Bool, D>(
              x, out, [](Bool b) { return store<D>(Compute<D>(b != 0)); });
          return Status::ok();
        },
        "the result");
  return visitNumeric(a, x.dtype, [&](auto from) {
    using S = typename decltype(from)::type;
    return visitNumeric(
        a, out.dtype,
        [&](auto to) {
          using D = typename decltype(to)::type;
          convertLoop<S, D>(x, out, [](S s) { return convert<S, D>(s); });
          return Status::ok();
        },
        "the result");
  });
}
