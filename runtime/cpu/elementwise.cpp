//===- elementwise.cpp - CPU kernels of the elementwise ops ---------------===//
//
// Binary ops broadcast as numpy does: the result is walked in row segments
// (BroadcastPlan) and each segment is a plain loop specialized for operands
// that are contiguous or constant along it, so the compiler vectorizes it.
// Work is split across OpenMP threads by element count. 16-bit floats
// compute in float; integer arithmetic wraps as two's complement and integer
// division truncates toward zero, as C does (ONNX Div on integers). The
// activation gradients (silu_grad, gelu_grad) are binary loops over x and dy
// of one shape.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/DropoutStream.h"
#include "runtime/ops/ElementwiseShape.h"
#include "runtime/cpu/KernelTable.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

//===----------------------------------------------------------------------===//
// Scalar operations, on the compute type
//===----------------------------------------------------------------------===//

/// The unsigned type integer arithmetic wraps in (at least unsigned int, so
/// that uint16 * uint16 does not overflow int).
template <typename C>
using Wide = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned,
                                std::make_unsigned_t<C>>;

struct AddOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(a) + Wide<C>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(a) - Wide<C>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(a) * Wide<C>(b));
    else
      return a * b;
  }
};
/// Integer division by zero is refused before the loop runs.
struct DivOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>)
      return b == -1 ? C(Wide<C>(0) - Wide<C>(a)) : C(a / b);
    else
      return a / b;
  }
};
struct PowOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      // ONNX Pow on integers: repeated multiplication (wrapping); a
      // negative exponent truncates 1 / a^-b toward zero.
      if constexpr (std::is_signed_v<C>) {
        if (b < 0)
          return a == 1 ? C(1) : a == -1 ? C((b & 1) ? -1 : 1) : C(0);
      }
      Wide<C> result = 1, base = Wide<C>(a);
      for (auto e = std::make_unsigned_t<C>(b); e; e >>= 1) {
        if (e & 1)
          result = result * base;
        base = base * base;
      }
      return C(result);
    } else {
      return std::pow(a, b);
    }
  }
};
/// NaN propagates, as in numpy's maximum and ONNX Max.
struct MaxOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C a, C b) const {
    return (a < b || a != a) ? a : b;
  }
};
struct AndOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return (a != 0) & (b != 0);
  }
};
struct OrOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return (a != 0) | (b != 0);
  }
};
struct EqualOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return a < b;
  }
};
struct LessEqualOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return a > b;
  }
};
struct GreaterEqualOp {
  template <typename C> CLEAVE_ALWAYS_INLINE Bool operator()(C a, C b) const {
    return a >= b;
  }
};

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

/// One row segment: x and y step by sx and sy (each 0 or 1 in the common
/// cases, which get their own loops).
template <typename T, typename R, typename Op>
inline void binaryRow(const T *x, int64_t sx, const T *y, int64_t sy, R *out,
                      int64_t n, Op op) {
  if (sx == 1 && sy == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<R>(op(load(x[i]), load(y[i])));
  } else if (sx == 1 && sy == 0) {
    auto b = load(y[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<R>(op(load(x[i]), b));
  } else if (sx == 0 && sy == 1) {
    auto a = load(x[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<R>(op(a, load(y[i])));
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<R>(op(load(x[i * sx]), load(y[i * sy])));
  }
}

template <typename T, typename R, typename Op>
void binaryLoop(const KernelArgs &a, Op op) {
  const T *x = a.in(0).as<T>(), *y = a.in(1).as<T>();
  R *out = a.out().as<R>();
  BroadcastPlan plan =
      makeBroadcastPlan({a.in(0).shape, a.in(1).shape}, a.out().shape);
  int64_t sx = plan.innerStride[0], sy = plan.innerStride[1];
  forEachSegment(plan, kElementwiseGrain,
                 [&](int64_t row, int64_t column, int64_t n, int64_t offset) {
                   binaryRow(x + plan.rowOffset(0, row) + column * sx, sx,
                             y + plan.rowOffset(1, row) + column * sy, sy,
                             out + offset, n, op);
                 });
}

enum class BinaryTypes { Numeric, Bool };

/// add, sub, ...: the result has the operands' element type.
template <typename Op>
Status arithmetic(const KernelArgs &a,
                  BinaryTypes types = BinaryTypes::Numeric) {
  DType dtype = a.in(0).dtype;
  CLEAVE_CHECK(a.expectDType(a.in(1), dtype, "rhs"));
  CLEAVE_CHECK(a.expectDType(a.out(), dtype, "the result"));
  CLEAVE_CHECK(checkBroadcast(a, 0, 2));
  if (types == BinaryTypes::Bool) {
    if (dtype != DType::Bool)
      return a.unsupported(dtype, "lhs");
    binaryLoop<Bool, Bool>(a, Op());
    return Status::ok();
  }
  return visitNumeric(
      a, dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        binaryLoop<T, T>(a, Op());
        return Status::ok();
      },
      "lhs");
}

/// Comparisons: any operand type (Bool included), a Bool result.
template <typename Op> Status comparison(const KernelArgs &a) {
  DType dtype = a.in(0).dtype;
  CLEAVE_CHECK(a.expectDType(a.in(1), dtype, "rhs"));
  CLEAVE_CHECK(a.expectDType(a.out(), DType::Bool, "the result"));
  CLEAVE_CHECK(checkBroadcast(a, 0, 2));
  return visitAny(
      a, dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        binaryLoop<T, Bool>(a, Op());
        return Status::ok();
      },
      "lhs");
}

template <typename T> bool hasZero(const TensorRef &t) {
  const T *p = t.as<T>();
  int64_t n = t.numElements();
  bool zero = false;
  for (int64_t i = 0; i < n; ++i)
    zero |= p[i] == 0;
  return zero;
}

/// A float exponent every element of `t` has, if `t` is a scalar of 1, 2 or
/// 3: pow then multiplies.
template <typename T> int smallExponent(const TensorRef &t) {
  if (t.numElements() != 1 || !t.data)
    return 0;
  auto e = load(t.as<T>()[0]);
  return e == 1 ? 1 : e == 2 ? 2 : e == 3 ? 3 : 0;
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

template <typename T, typename Op>
CLEAVE_ALWAYS_INLINE void mapRange(const T *x, T *out, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = store<T>(op(load(x[i])));
}

template <typename T, typename Op>
CLEAVE_TARGET_AVX2 void mapRangeAvx2(const T *x, T *out, int64_t n, Op op) {
  mapRange(x, out, n, op);
}

/// out = op(x) elementwise; `avx2` for the ops worth the second variant.
template <typename T, typename Op>
void unaryLoop(const KernelArgs &a, Op op, bool avx2 = false) {
  const T *x = a.in(0).as<T>();
  T *out = a.out().as<T>();
  parallelRange(a.out().numElements(), kElementwiseGrain,
                [&](int64_t begin, int64_t end) {
                  if (avx2)
                    mapRangeAvx2(x + begin, out + begin, end - begin, op);
                  else
                    mapRange(x + begin, out + begin, end - begin, op);
                });
}

Status checkUnary(const KernelArgs &a) {
  CLEAVE_CHECK(a.expectDType(a.out(), a.in(0).dtype, "the result"));
  return a.expectShape(a.out(), a.in(0).shape, "the result");
}

/// Ops defined on every numeric type.
template <typename Op> Status numericUnary(const KernelArgs &a) {
  CLEAVE_CHECK(checkUnary(a));
  return visitNumeric(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unaryLoop<T>(a, Op());
    return Status::ok();
  });
}

/// Ops defined on floating-point types; f32 ones use the AVX2 variant.
template <typename Op> Status floatUnary(const KernelArgs &a) {
  CLEAVE_CHECK(checkUnary(a));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unaryLoop<T>(a, Op(), std::is_same_v<T, float> && useAvx2());
    return Status::ok();
  });
}

struct NegOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(0) - Wide<C>(x));
    else
      return -x;
  }
};
struct AbsOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else if constexpr (std::is_integral_v<C>)
      return x < 0 ? C(Wide<C>(0) - Wide<C>(x)) : x;
    else
      return std::fabs(x);
  }
};
struct ReluOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return x < 0 ? C(0) : x;
  }
};
struct ExpOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return cpu::exp(x);
  }
};
struct LogOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return std::log(x);
  }
};
struct SqrtOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct RsqrtOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
};
struct ReciprocalOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return C(1) / x;
  }
};
struct TanhOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return cpu::tanh(x);
  }
};
struct ErfOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return std::erf(x);
  }
};
struct SigmoidOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return C(1) / (C(1) + cpu::exp(-x));
  }
};
struct SiluOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return x / (C(1) + cpu::exp(-x));
  }
};
struct SinOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return std::sin(x);
  }
};
struct CosOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return std::cos(x);
  }
};
/// GPT-2's GELU, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
/// written as x * sigmoid(2u): one exp, no cancellation for negative x.
struct GeluTanhOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    C u = C(0.7978845608028654) * (x + C(0.044715) * x * x * x);
    return x / (C(1) + cpu::exp(C(-2) * u));
  }
};
/// Exact GELU, x Phi(x) = 0.5 x erfc(-x / sqrt 2) (erfc keeps the relative
/// accuracy where Phi is tiny).
struct GeluErfOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x) const {
    return C(0.5) * x * std::erfc(x * C(-0.7071067811865476));
  }
};

//===----------------------------------------------------------------------===//
// Activation gradients: dx = dy * f'(x)
//===----------------------------------------------------------------------===//

/// silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x).
struct SiluGradOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x, C dy) const {
    C s = C(1) / (C(1) + cpu::exp(-x));
    return dy * s * (C(1) + x * (C(1) - s));
  }
};
/// The derivative of GeluTanhOp's x sigmoid(2u): s + 2 x s (1 - s) u' with
/// s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
struct GeluTanhGradOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x, C dy) const {
    C x2 = x * x;
    C u = C(0.7978845608028654) * (x + C(0.044715) * x2 * x);
    C du = C(0.7978845608028654) * (C(1) + C(0.134145) * x2);
    C s = C(1) / (C(1) + cpu::exp(C(-2) * u));
    return dy * (s + C(2) * x * s * (C(1) - s) * du);
  }
};
/// The derivative of x Phi(x): Phi(x) + x phi(x).
struct GeluErfGradOp {
  template <typename C> CLEAVE_ALWAYS_INLINE C operator()(C x, C dy) const {
    C cdf = C(0.5) * std::erfc(x * C(-0.7071067811865476));
    C pdf = C(0.3989422804014327) * cpu::exp(C(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
};

template <typename T, typename Op>
CLEAVE_ALWAYS_INLINE void gradRange(const T *x, const T *dy, T *out, int64_t n,
                                    Op op) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = store<T>(op(Compute<T>(load(x[i])), Compute<T>(load(dy[i]))));
}

template <typename T, typename Op>
CLEAVE_TARGET_AVX2 void gradRangeAvx2(const T *x, const T *dy, T *out,
                                      int64_t n, Op op) {
  gradRange(x, dy, out, n, op);
}

/// dx = op(x, dy) over x, dy and dx of one shape and float type; threaded
/// like the unary ops, f32 on the AVX2 variant.
template <typename Op> Status activationGrad(const KernelArgs &a) {
  CLEAVE_CHECK(checkUnary(a));
  CLEAVE_CHECK(a.expectDType(a.in(1), a.in(0).dtype, "dy"));
  CLEAVE_CHECK(a.expectShape(a.in(1), a.in(0).shape, "dy"));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = a.in(0).as<T>(), *dy = a.in(1).as<T>();
    T *out = a.out().as<T>();
    bool avx2 = std::is_same_v<T, float> && useAvx2();
    parallelRange(a.out().numElements(), kElementwiseGrain,
                  [&](int64_t begin, int64_t end) {
                    if (avx2)
                      gradRangeAvx2(x + begin, dy + begin, out + begin,
                                    end - begin, Op());
                    else
                      gradRange(x + begin, dy + begin, out + begin, end - begin,
                                Op());
                  });
    return Status::ok();
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

Status cpu::addKernel(const KernelArgs &a) { return arithmetic<AddOp>(a); }
Status cpu::subKernel(const KernelArgs &a) { return arithmetic<SubOp>(a); }
Status cpu::mulKernel(const KernelArgs &a) { return arithmetic<MulOp>(a); }
Status cpu::maxKernel(const KernelArgs &a) { return arithmetic<MaxOp>(a); }
Status cpu::minKernel(const KernelArgs &a) { return arithmetic<MinOp>(a); }
Status cpu::andKernel(const KernelArgs &a) {
  return arithmetic<AndOp>(a, BinaryTypes::Bool);
}
Status cpu::orKernel(const KernelArgs &a) {
  return arithmetic<OrOp>(a, BinaryTypes::Bool);
}

Status cpu::divKernel(const KernelArgs &a) {
  const TensorRef &rhs = a.in(1);
  bool zero = false;
  switch (rhs.dtype) {
  case DType::I64:
    zero = hasZero<int64_t>(rhs);
    break;
  case DType::I32:
    zero = hasZero<int32_t>(rhs);
    break;
  case DType::I16:
    zero = hasZero<int16_t>(rhs);
    break;
  case DType::I8:
    zero = hasZero<int8_t>(rhs);
    break;
  case DType::U64:
    zero = hasZero<uint64_t>(rhs);
    break;
  case DType::U32:
    zero = hasZero<uint32_t>(rhs);
    break;
  case DType::U16:
    zero = hasZero<uint16_t>(rhs);
    break;
  case DType::U8:
    zero = hasZero<uint8_t>(rhs);
    break;
  default:
    break;
  }
  if (zero && a.out().numElements() > 0)
    return a.error("integer division by zero");
  return arithmetic<DivOp>(a);
}

Status cpu::powKernel(const KernelArgs &a) {
  // x^2 and x^3 by a scalar float exponent (GELU's cube, squares in norms
  // written out) multiply instead of calling pow.
  int exponent = 0;
  DType dtype = a.in(0).dtype;
  if (a.in(1).dtype == dtype) {
    if (dtype == DType::F32)
      exponent = smallExponent<float>(a.in(1));
    else if (dtype == DType::F64)
      exponent = smallExponent<double>(a.in(1));
    else if (dtype == DType::F16)
      exponent = smallExponent<Half>(a.in(1));
    else if (dtype == DType::BF16)
      exponent = smallExponent<BFloat16>(a.in(1));
  }
  if (exponent == 0 || a.out().shape != a.in(0).shape)
    return arithmetic<PowOp>(a);
  CLEAVE_CHECK(checkUnary(a));
  return visitFloat(a, dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (exponent == 1)
      unaryLoop<T>(a, [](auto x) { return x; });
    else if (exponent == 2)
      unaryLoop<T>(a, [](auto x) { return x * x; });
    else
      unaryLoop<T>(a, [](auto x) { return x * x * x; });
    return Status::ok();
  });
}

Status cpu::equalKernel(const KernelArgs &a) { return comparison<EqualOp>(a); }
Status cpu::lessKernel(const KernelArgs &a) { return comparison<LessOp>(a); }
Status cpu::lessEqualKernel(const KernelArgs &a) {
  return comparison<LessEqualOp>(a);
}
Status cpu::greaterKernel(const KernelArgs &a) {
  return comparison<GreaterOp>(a);
}
Status cpu::greaterEqualKernel(const KernelArgs &a) {
  return comparison<GreaterEqualOp>(a);
}

/// select(cond, a, b): three operands broadcast together; only moves
/// elements, so it works on the element's size.
Status cpu::selectKernel(const KernelArgs &a) {
  CLEAVE_CHECK(a.expectDType(a.in(0), DType::Bool, "cond"));
  DType dtype = a.in(1).dtype;
  CLEAVE_CHECK(a.expectDType(a.in(2), dtype, "on_false"));
  CLEAVE_CHECK(a.expectDType(a.out(), dtype, "the result"));
  CLEAVE_CHECK(checkBroadcast(a, 0, 3));
  return visitBytes(
      a, dtype,
      [&](auto tag) {
        using W = typename decltype(tag)::type;
        const Bool *c = a.in(0).as<Bool>();
        const W *x = a.in(1).as<W>(), *y = a.in(2).as<W>();
        W *out = a.out().as<W>();
        BroadcastPlan plan = makeBroadcastPlan(
            {a.in(0).shape, a.in(1).shape, a.in(2).shape}, a.out().shape);
        int64_t sc = plan.innerStride[0], sx = plan.innerStride[1],
                sy = plan.innerStride[2];
        forEachSegment(
            plan, kElementwiseGrain,
            [&](int64_t row, int64_t column, int64_t n, int64_t offset) {
              const Bool *cr = c + plan.rowOffset(0, row) + column * sc;
              const W *xr = x + plan.rowOffset(1, row) + column * sx;
              const W *yr = y + plan.rowOffset(2, row) + column * sy;
              W *o = out + offset;
              if (sc == 1 && sx == 1 && sy == 1) {
                for (int64_t i = 0; i < n; ++i)
                  o[i] = cr[i] ? xr[i] : yr[i];
              } else if (sc == 1 && sx == 1 && sy == 0) { // masked fill
                W fill = yr[0];
                for (int64_t i = 0; i < n; ++i)
                  o[i] = cr[i] ? xr[i] : fill;
              } else if (sc == 1 && sx == 0 && sy == 1) {
                W fill = xr[0];
                for (int64_t i = 0; i < n; ++i)
                  o[i] = cr[i] ? fill : yr[i];
              } else {
                for (int64_t i = 0; i < n; ++i)
                  o[i] = cr[i * sc] ? xr[i * sx] : yr[i * sy];
              }
            });
        return Status::ok();
      },
      "on_true");
}

Status cpu::negKernel(const KernelArgs &a) { return numericUnary<NegOp>(a); }
Status cpu::absKernel(const KernelArgs &a) { return numericUnary<AbsOp>(a); }
Status cpu::reluKernel(const KernelArgs &a) { return numericUnary<ReluOp>(a); }
Status cpu::expKernel(const KernelArgs &a) { return floatUnary<ExpOp>(a); }
Status cpu::logKernel(const KernelArgs &a) { return floatUnary<LogOp>(a); }
Status cpu::sqrtKernel(const KernelArgs &a) { return floatUnary<SqrtOp>(a); }
Status cpu::rsqrtKernel(const KernelArgs &a) { return floatUnary<RsqrtOp>(a); }
Status cpu::reciprocalKernel(const KernelArgs &a) {
  return floatUnary<ReciprocalOp>(a);
}
Status cpu::tanhKernel(const KernelArgs &a) { return floatUnary<TanhOp>(a); }
Status cpu::erfKernel(const KernelArgs &a) { return floatUnary<ErfOp>(a); }
Status cpu::sigmoidKernel(const KernelArgs &a) {
  return floatUnary<SigmoidOp>(a);
}
Status cpu::siluKernel(const KernelArgs &a) { return floatUnary<SiluOp>(a); }
Status cpu::sinKernel(const KernelArgs &a) { return floatUnary<SinOp>(a); }
Status cpu::cosKernel(const KernelArgs &a) { return floatUnary<CosOp>(a); }

/// y = x * mask / (1 - ratio), the mask drawn per element of the global
/// tensor (ops/DropoutStream.h).
Status cpu::dropoutKernel(const KernelArgs &a) {
  DropoutPlan plan;
  CLEAVE_CHECK(dropoutPlan(a, plan));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *x = a.in(0).as<T>();
    T *out = a.out().as<T>();
    C scale = C(plan.scale);
    parallelRange(a.out().numElements(), kElementwiseGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      out[i] = store<T>(plan.kept(i) ? load(x[i]) * scale
                                                     : C(0));
                  });
    return Status::ok();
  });
}

Status cpu::notKernel(const KernelArgs &a) {
  CLEAVE_CHECK(checkUnary(a));
  if (a.in(0).dtype != DType::Bool)
    return a.unsupported(a.in(0).dtype);
  unaryLoop<Bool>(a, [](Bool x) { return Bool(x == 0); });
  return Status::ok();
}

Status cpu::geluKernel(const KernelArgs &a) {
  std::string approximate;
  CLEAVE_CHECK(a.stringAttr("approximate", approximate, "none"));
  if (approximate == "tanh")
    return floatUnary<GeluTanhOp>(a);
  if (approximate == "none")
    return floatUnary<GeluErfOp>(a);
  return a.error("approximate must be \"none\" or \"tanh\", got \"" +
                 approximate + "\"");
}

Status cpu::siluGradKernel(const KernelArgs &a) {
  return activationGrad<SiluGradOp>(a);
}

Status cpu::geluGradKernel(const KernelArgs &a) {
  std::string approximate;
  CLEAVE_CHECK(a.stringAttr("approximate", approximate, "none"));
  if (approximate == "tanh")
    return activationGrad<GeluTanhGradOp>(a);
  if (approximate == "none")
    return activationGrad<GeluErfGradOp>(a);
  return a.error("approximate must be \"none\" or \"tanh\", got \"" +
                 approximate + "\"");
}
