//===- KernelSupport.h - what every CPU kernel file shares -----*- C++ -*-===//
//
// The calling convention of a kernel (KernelArgs), attribute and shape
// checks that produce "op: what was expected, what was found" errors, the
// element types (16-bit floats are converted through float), dispatch over
// element types, OpenMP work splitting, numpy broadcasting plans and a
// vectorizable expf. Plain C++17: no MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CPU_KERNELSUPPORT_H
#define CLEAVE_RUNTIME_CPU_KERNELSUPPORT_H

#include "runtime/cpu/Kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

/// For the scalar math helpers called in loops that must vectorize: GCC
/// otherwise keeps them out of line once a file has many callers.
#define CLEAVE_ALWAYS_INLINE inline __attribute__((always_inline))

/// Compute-bound loops (exp, tanh, dot products) are compiled a second time
/// for AVX2 with FMA: an always-inline body, and a thin wrapper with this
/// attribute that inlines it; cpu::useAvx2() picks one at run time. The
/// rest of the library stays baseline x86-64, so it runs anywhere.
#define CLEAVE_TARGET_AVX2 __attribute__((target("avx2,fma")))

namespace cleave::runtime::cpu {

//===----------------------------------------------------------------------===//
// The call
//===----------------------------------------------------------------------===//

using Shape = std::vector<int64_t>;

/// "[2, 8, 64]".
std::string shapeString(const Shape &shape);

/// One kernel invocation. The dispatcher has checked the operand and result
/// counts against the op's table entry and that required operands have
/// data.
struct KernelArgs {
  const std::string &op;
  const Attributes &attrs;
  const std::vector<TensorRef> &inputs;
  const std::vector<TensorRef> &outputs;

  const TensorRef &in(size_t i) const { return inputs[i]; }
  const TensorRef &out() const { return outputs[0]; }
  /// Result `i` of an op with several (layer_norm_grad's dx, dscale, dbias).
  const TensorRef &out(size_t i) const { return outputs[i]; }
  /// Whether optional operand `i` was given.
  bool has(size_t i) const { return i < inputs.size() && inputs[i].data; }

  /// An error that names the op: "layer_norm: <message>".
  Status error(const std::string &message) const {
    return Status::error(op + ": " + message);
  }
  Status unsupported(DType dtype, const char *what = "x") const {
    return error(std::string("no kernel for element type ") + dtypeName(dtype) +
                 " (" + what + ")");
  }

  /// Attributes; a missing one without a default is an error.
  Status intAttr(const char *name, int64_t &value) const;
  Status intAttr(const char *name, int64_t &value, int64_t byDefault) const;
  Status floatAttr(const char *name, double &value) const;
  Status floatAttr(const char *name, double &value, double byDefault) const;
  Status stringAttr(const char *name, std::string &value,
                    const std::string &byDefault) const;
  Status intsAttr(const char *name, std::vector<int64_t> &value) const;
  bool hasAttr(const char *name) const { return attrs.count(name) != 0; }

  /// Checks the dtype of operand/result against `expected`.
  Status expectDType(const TensorRef &t, DType expected,
                     const char *what) const;
  Status expectShape(const TensorRef &t, const Shape &expected,
                     const char *what) const;
};

using KernelFn = Status (*)(const KernelArgs &);

/// Whether this CPU runs the AVX2/FMA variants (decided once; the
/// environment variable CLEAVE_CPU_ISA=baseline forces the portable ones,
/// which the tests use to check both).
bool useAvx2();

/// Makes OpenBLAS run on its calling thread from now on: the kernels split
/// their products over OpenMP threads themselves (see matmul.cpp).
void singleThreadedBlas();

/// `axis` in [-rank, rank) to [0, rank).
Status normalizeAxis(const KernelArgs &a, int64_t &axis, int64_t rank,
                     const char *what = "axis");

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// IEEE binary16 and bfloat16, stored as their bits. Kernels load them as
/// float and store with round-to-nearest-even.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
/// DType::Bool: one byte, 0 or 1 (any nonzero byte reads as true). It is
/// the same C++ type as U8's elements, so code that must tell the two apart
/// (cast) goes by the DType, not the type.
using Bool = uint8_t;

CLEAVE_ALWAYS_INLINE uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
CLEAVE_ALWAYS_INLINE float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float halfToFloat(Half h) {
  // F. Giesen's conversion: rebias the exponent, fix up Inf/NaN and
  // subnormals.
  const uint32_t shiftedExp = 0x7c00u << 13;
  uint32_t o = (uint32_t(h.bits) & 0x7fffu) << 13;
  uint32_t exp = shiftedExp & o;
  o += (127 - 15) << 23;
  float f;
  if (exp == shiftedExp) {
    o += (128 - 16) << 23;
    f = bitsFloat(o);
  } else if (exp == 0) {
    o += 1 << 23;
    f = bitsFloat(o) - bitsFloat(113u << 23);
  } else {
    f = bitsFloat(o);
  }
  return bitsFloat(floatBits(f) | ((uint32_t(h.bits) & 0x8000u) << 16));
}

inline Half floatToHalf(float value) {
  uint32_t f = floatBits(value);
  uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t o;
  if (f >= (127u + 16) << 23) { // Inf, NaN or too large: Inf
    o = f > (255u << 23) ? 0x7e00 : 0x7c00;
  } else if (f < 113u << 23) { // a subnormal half or zero
    const uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
    o = uint16_t(floatBits(bitsFloat(f) + bitsFloat(magic)) - magic);
  } else {
    uint32_t mantissaOdd = (f >> 13) & 1;
    f += (uint32_t(15 - 127) << 23) + 0xfff + mantissaOdd;
    o = uint16_t(f >> 13);
  }
  return Half{uint16_t(o | (sign >> 16))};
}

inline float bf16ToFloat(BFloat16 b) {
  return bitsFloat(uint32_t(b.bits) << 16);
}

inline BFloat16 floatToBf16(float value) {
  uint32_t u = floatBits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return BFloat16{uint16_t((u >> 16) | 0x40)}; // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1);
  return BFloat16{uint16_t(u >> 16)};
}

/// The type a kernel computes in for storage type T.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<Half> { using type = float; };
template <> struct ComputeOf<BFloat16> { using type = float; };
template <typename T> using Compute = typename ComputeOf<T>::type;

template <typename T> inline Compute<T> load(T v) { return v; }
template <> inline float load<Half>(Half v) { return halfToFloat(v); }
template <> inline float load<BFloat16>(BFloat16 v) { return bf16ToFloat(v); }

template <typename T> inline T store(Compute<T> v) { return v; }
template <> inline Half store<Half>(float v) { return floatToHalf(v); }
template <> inline BFloat16 store<BFloat16>(float v) { return floatToBf16(v); }

template <typename T> constexpr bool isFloating() {
  return std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
         std::is_same_v<T, BFloat16>;
}

template <typename T> struct Tag { using type = T; };

/// Calls `f(Tag<T>{})` for the storage type of `dtype` when it is one of the
/// floating-point types; otherwise an "unsupported" error.
template <typename F>
Status visitFloat(const KernelArgs &a, DType dtype, F &&f,
                  const char *what = "x") {
  switch (dtype) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::F64:
    return f(Tag<double>{});
  case DType::F16:
    return f(Tag<Half>{});
  case DType::BF16:
    return f(Tag<BFloat16>{});
  default:
    return a.unsupported(dtype, what);
  }
}

/// Floating-point and integer types (not Bool).
template <typename F>
Status visitNumeric(const KernelArgs &a, DType dtype, F &&f,
                    const char *what = "x") {
  switch (dtype) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::F64:
    return f(Tag<double>{});
  case DType::F16:
    return f(Tag<Half>{});
  case DType::BF16:
    return f(Tag<BFloat16>{});
  case DType::I64:
    return f(Tag<int64_t>{});
  case DType::I32:
    return f(Tag<int32_t>{});
  case DType::I16:
    return f(Tag<int16_t>{});
  case DType::I8:
    return f(Tag<int8_t>{});
  case DType::U8:
    return f(Tag<uint8_t>{});
  case DType::U16:
    return f(Tag<uint16_t>{});
  case DType::U32:
    return f(Tag<uint32_t>{});
  case DType::U64:
    return f(Tag<uint64_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

/// Every type, Bool included (read as uint8_t).
template <typename F>
Status visitAny(const KernelArgs &a, DType dtype, F &&f,
                const char *what = "x") {
  if (dtype == DType::Bool)
    return f(Tag<Bool>{});
  return visitNumeric(a, dtype, std::forward<F>(f), what);
}

/// Index operands (ids, indices, targets).
template <typename F>
Status visitIndex(const KernelArgs &a, DType dtype, F &&f, const char *what) {
  switch (dtype) {
  case DType::I64:
    return f(Tag<int64_t>{});
  case DType::I32:
    return f(Tag<int32_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

/// A type with the element's size, for kernels that only move elements.
template <size_t Bytes> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

template <typename F>
Status visitBytes(const KernelArgs &a, DType dtype, F &&f,
                  const char *what = "x") {
  switch (dtypeSize(dtype)) {
  case 1:
    return f(Tag<uint8_t>{});
  case 2:
    return f(Tag<uint16_t>{});
  case 4:
    return f(Tag<uint32_t>{});
  case 8:
    return f(Tag<uint64_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

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
// Broadcasting
//===----------------------------------------------------------------------===//

/// How operands broadcast to a result: the result is walked as `rows` rows
/// of `inner` elements (dimensions merged where every operand allows it);
/// an operand's row starts at rowOffset(k, row) and steps by innerStride[k]
/// (0 for an operand broadcast along the row).
struct BroadcastPlan {
  int64_t rows = 1, inner = 1;
  Shape outerDims;                  // merged dimensions but the last
  std::vector<Shape> outerStrides;  // per operand, per outer dim
  std::vector<int64_t> innerStride; // per operand

  int64_t rowOffset(size_t operand, int64_t row) const {
    int64_t offset = 0;
    const Shape &strides = outerStrides[operand];
    for (int64_t d = int64_t(outerDims.size()) - 1; d >= 0 && row; --d) {
      offset += (row % outerDims[d]) * strides[d];
      row /= outerDims[d];
    }
    return offset;
  }
};

/// Runs fn(row, column, count, resultOffset) over the plan's result in
/// segments of one row each, split across threads by element count (so a
/// single long row is split too).
template <typename F>
void forEachSegment(const BroadcastPlan &plan, int64_t grain, F &&fn) {
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

/// Whether `from` broadcasts to `to` (numpy rules, `from` no longer).
bool broadcastsTo(const Shape &from, const Shape &to);
/// The numpy broadcast of two shapes; false when they do not broadcast.
bool broadcastShapes(const Shape &a, const Shape &b, Shape &result);
/// The plan for operands (each broadcasting to `out`).
BroadcastPlan makeBroadcastPlan(const std::vector<Shape> &operands,
                                const Shape &out);

/// The plan for operands read at the given strides (one per result
/// dimension, in elements, possibly 0 or negative).
BroadcastPlan planFromStrides(const Shape &out,
                              const std::vector<Shape> &strides);

/// Row-major strides.
Shape stridesOf(const Shape &shape);
int64_t product(const Shape &shape, size_t begin = 0, size_t end = size_t(-1));

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
  float s1 = bitsFloat(uint32_t(n1 + 127) << 23);
  float s2 = bitsFloat(uint32_t(n2 + 127) << 23);
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
