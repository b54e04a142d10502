//===- elementwise.cu - CUDA kernels of the elementwise ops and cast ------===//
//
// The CUDA side of runtime/cpu/elementwise.cpp: every elementwise op, and
// cast. 16-bit floats are computed in float and stored rounding to nearest
// even; integers compute in their own type, wrapping as two's complement as
// the CPU's do.
//
// Element types (the CPU takes more; the rest are an error naming the type):
//   add, sub, mul, pow, max, min, neg, abs, relu: f32, bf16, f16, i64, i32.
//   div: f32, bf16, f16 (integer division by zero is an error the CPU finds
//     by reading the divisor, which the device cannot do without waiting).
//   equal, less, less_equal, greater, greater_equal: f32, bf16, f16, i64,
//     i32 and bool, with a bool result. and, or, not: bool.
//   select(cond, on_true, on_false): any element type (it only moves
//     elements, by their size).
//   exp, log, sqrt, rsqrt, reciprocal, tanh, erf, sigmoid, sin, cos, gelu,
//     silu, gelu_grad, silu_grad: f32, bf16, f16.
// The float math is CUDA's (expf, tanhf, erff, powf: a few ulps), where the
// CPU uses its own polynomials for exp and tanh; sqrt and division are
// IEEE-rounded on both. max and min propagate NaN as the CPU's do.
//
// Binary ops (and select's three operands) broadcast as numpy does through
// the CPU backend's BroadcastPlan: the result's dimensions merged where all
// operands allow, each operand with a stride per merged dimension (0 where
// it is broadcast). Operands of the result's shape take a plain indexed
// loop. Every kernel is a grid-stride loop, one element per thread per
// step, with 32-bit index arithmetic when the result has fewer than 2^31
// elements.
// cast converts between f32, bf16 and f16 through float (exact from the
// 16-bit types), rounding to nearest even as the CPU's convert does; to and
// from i64, i32 and bool as the CPU's cast (nonzero is true, a float to an
// integer truncates); a cast to the same type is a device-to-device copy.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/DropoutStream.h"
#include "runtime/ops/ElementwiseShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <climits>
#include <cstdint>
#include <type_traits>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;
using ops::Shape;
using ops::Tag;

namespace {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// bool elements: one byte, compared and tested as bytes (as the CPU's).
using Bool = uint8_t;

template <typename T>
constexpr bool isDeviceFloat =
    std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> ||
    std::is_same_v<T, __half>;

/// The value an element computes as: float for the float types, itself for
/// integers and bool.
template <typename T> __device__ __forceinline__ auto loadValue(T v) {
  if constexpr (isDeviceFloat<T>)
    return toFloat(v);
  else
    return v;
}
template <typename R, typename C> __device__ __forceinline__ R storeValue(C v) {
  if constexpr (isDeviceFloat<R>)
    return fromFloat<R>(float(v));
  else
    return R(v);
}

/// The element types an op takes on the device.
enum class Types {
  Numeric,    // f32, bf16, f16, i64, i32
  Comparable, // those and bool
};

/// Calls f(Tag<T>{}) for the device storage type of `dtype` when `types`
/// has it; otherwise an error naming the type.
template <Types types, typename F>
Status visitDevice(const KernelArgs &a, DType dtype, F &&f, const char *what) {
  switch (dtype) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::BF16:
    return f(Tag<__nv_bfloat16>{});
  case DType::F16:
    return f(Tag<__half>{});
  case DType::I64:
    return f(Tag<int64_t>{});
  case DType::I32:
    return f(Tag<int32_t>{});
  case DType::Bool:
    if constexpr (types == Types::Comparable)
      return f(Tag<Bool>{});
    break;
  default:
    break;
  }
  return a.error(std::string("no CUDA kernel for element type ") +
                 dtypeName(dtype) + " (" + what +
                 "); this CUDA kernel takes f32, bf16, f16, i64, i32" +
                 (types == Types::Comparable ? " and bool" : ""));
}

/// bool operands only (and, or, not).
Status expectBool(const KernelArgs &a, DType dtype, const char *what) {
  if (dtype == DType::Bool)
    return Status::ok();
  return a.error(std::string("no CUDA kernel for element type ") +
                 dtypeName(dtype) + " (" + what +
                 "); this CUDA kernel takes bool");
}

//===----------------------------------------------------------------------===//
// Scalar operations, on the compute type (as runtime/cpu/elementwise.cpp's)
//===----------------------------------------------------------------------===//

/// The unsigned type integer arithmetic wraps in.
template <typename C>
using Wide = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned,
                                std::make_unsigned_t<C>>;

struct AddOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(a) + Wide<C>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(a) - Wide<C>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(a) * Wide<C>(b));
    else
      return a * b;
  }
};
struct DivOp {
  __device__ float operator()(float a, float b) const { return a / b; }
};
struct PowOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      // ONNX Pow on integers: repeated multiplication (wrapping); a
      // negative exponent truncates 1 / a^-b toward zero.
      if (b < 0)
        return a == 1 ? C(1) : a == -1 ? C((b & 1) ? -1 : 1) : C(0);
      Wide<C> result = 1, base = Wide<C>(a);
      for (auto e = std::make_unsigned_t<C>(b); e; e >>= 1) {
        if (e & 1)
          result = result * base;
        base = base * base;
      }
      return C(result);
    } else {
      return powf(a, b);
    }
  }
};
/// NaN propagates, as in numpy's maximum and ONNX Max.
struct MaximumOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinimumOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    return (a < b || a != a) ? a : b;
  }
};
struct AndOp {
  __device__ bool operator()(Bool a, Bool b) const {
    return (a != 0) & (b != 0);
  }
};
struct OrOp {
  __device__ bool operator()(Bool a, Bool b) const {
    return (a != 0) | (b != 0);
  }
};
struct EqualOp {
  template <typename C> __device__ bool operator()(C a, C b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename C> __device__ bool operator()(C a, C b) const {
    return a < b;
  }
};
struct LessEqualOp {
  template <typename C> __device__ bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterOp {
  template <typename C> __device__ bool operator()(C a, C b) const {
    return a > b;
  }
};
struct GreaterEqualOp {
  template <typename C> __device__ bool operator()(C a, C b) const {
    return a >= b;
  }
};

struct NegOp {
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>)
      return C(Wide<C>(0) - Wide<C>(x));
    else
      return -x;
  }
};
struct AbsOp {
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>)
      return x < 0 ? C(Wide<C>(0) - Wide<C>(x)) : x;
    else
      return fabsf(x);
  }
};
struct ReluOp {
  template <typename C> __device__ C operator()(C x) const {
    return x < C(0) ? C(0) : x;
  }
};
struct NotOp {
  __device__ bool operator()(Bool x) const { return x == 0; }
};
struct ExpOp {
  __device__ float operator()(float x) const { return expf(x); }
};
struct LogOp {
  __device__ float operator()(float x) const { return logf(x); }
};
struct SqrtOp {
  __device__ float operator()(float x) const { return sqrtf(x); }
};
struct RsqrtOp {
  __device__ float operator()(float x) const { return 1.0f / sqrtf(x); }
};
struct ReciprocalOp {
  __device__ float operator()(float x) const { return 1.0f / x; }
};
struct TanhOp {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct ErfOp {
  __device__ float operator()(float x) const { return erff(x); }
};
struct SigmoidOp {
  __device__ float operator()(float x) const {
    return 1.0f / (1.0f + expf(-x));
  }
};
struct SinOp {
  __device__ float operator()(float x) const { return sinf(x); }
};
struct CosOp {
  __device__ float operator()(float x) const { return cosf(x); }
};

/// GPT-2's GELU, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
/// as x * sigmoid(2u) (the CPU's GeluTanhOp).
struct GeluTanhOp {
  __device__ float operator()(float x) const {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
  }
};
/// Exact GELU, 0.5 x erfc(-x / sqrt 2) (the CPU's GeluErfOp).
struct GeluErfOp {
  __device__ float operator()(float x) const {
    return 0.5f * x * erfcf(x * -0.7071067811865476f);
  }
};
struct SiluOp {
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};

/// Activation gradients, dx = dy * f'(x), as the CPU's.
/// silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x).
struct SiluGradOp {
  __device__ float operator()(float x, float dy) const {
    float s = 1.0f / (1.0f + expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
  }
};
/// The derivative of GeluTanhOp's x sigmoid(2u): s + 2 x s (1 - s) u'.
struct GeluTanhGradOp {
  __device__ float operator()(float x, float dy) const {
    float x2 = x * x;
    float u = 0.7978845608028654f * (x + 0.044715f * x2 * x);
    float du = 0.7978845608028654f * (1.0f + 0.134145f * x2);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    return dy * (s + 2.0f * x * s * (1.0f - s) * du);
  }
};
/// The derivative of x Phi(x): Phi(x) + x phi(x).
struct GeluErfGradOp {
  __device__ float operator()(float x, float dy) const {
    float cdf = 0.5f * erfcf(x * -0.7071067811865476f);
    float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// The most merged dimensions a broadcast may have (the result's rank
/// bounds it).
constexpr int kMaxDims = 8;

/// Where a broadcast op reads: the merged result dimensions and each
/// operand's stride along them, innermost last.
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t strides[3][kMaxDims];
};

/// out[i] = op(x[i], y[i]) over operands of the result's shape.
template <typename T, typename R, typename I, typename Op>
__global__ void binarySameShape(const T *__restrict__ x,
                                const T *__restrict__ y, R *__restrict__ out,
                                I n, Op op) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[i] = storeValue<R>(op(loadValue(x[i]), loadValue(y[i])));
}

/// out[i] = op(x[xi], y[yi]) with xi, yi from i's coordinates in the
/// merged result dimensions.
template <typename T, typename R, typename I, typename Op>
__global__ void binaryBroadcast(const T *__restrict__ x,
                                const T *__restrict__ y, R *__restrict__ out,
                                I n, BroadcastIndex index, Op op) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x) {
    I rest = i, xi = 0, yi = 0;
    for (int d = index.rank - 1; d >= 0; --d) {
      I dim = I(index.dims[d]);
      I coordinate = rest % dim;
      rest /= dim;
      xi += coordinate * I(index.strides[0][d]);
      yi += coordinate * I(index.strides[1][d]);
    }
    out[i] = storeValue<R>(op(loadValue(x[xi]), loadValue(y[yi])));
  }
}

/// out[i] = cond[i] ? x[i] : y[i] (or at broadcast positions).
template <typename W, typename I, bool Broadcast>
__global__ void selectElements(const Bool *__restrict__ cond,
                               const W *__restrict__ x, const W *__restrict__ y,
                               W *__restrict__ out, I n, BroadcastIndex index) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x) {
    I ci = i, xi = i, yi = i;
    if (Broadcast) {
      I rest = i;
      ci = xi = yi = 0;
      for (int d = index.rank - 1; d >= 0; --d) {
        I dim = I(index.dims[d]);
        I coordinate = rest % dim;
        rest /= dim;
        ci += coordinate * I(index.strides[0][d]);
        xi += coordinate * I(index.strides[1][d]);
        yi += coordinate * I(index.strides[2][d]);
      }
    }
    out[i] = cond[ci] ? x[xi] : y[yi];
  }
}

/// out[i] = op(x[i]).
template <typename T, typename I, typename Op>
__global__ void unary(const T *__restrict__ x, T *__restrict__ out, I n,
                      Op op) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[i] = storeValue<T>(op(loadValue(x[i])));
}

/// out[i] = x[i] * mask[i] / (1 - ratio), the mask drawn per element of the
/// global tensor (ops/DropoutStream.h), as the CPU kernel draws it.
template <typename T, typename I>
__global__ void dropoutElements(const T *__restrict__ x, T *__restrict__ out,
                                I n, ops::DropoutPlan plan) {
  float scale = float(plan.scale);
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[i] = storeValue<T>(plan.kept(int64_t(i)) ? loadValue(x[i]) * scale
                                                 : 0.0f);
}

/// out[i] = D(x[i]) through float.
template <typename S, typename D, typename Index>
__global__ void convert(const S *__restrict__ x, D *__restrict__ out, Index n) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x) {
    auto v = loadValue(x[i]);
    if constexpr (std::is_same_v<D, Bool>)
      out[i] = Bool(v != 0); // anything nonzero (NaN included) is true
    else if constexpr (std::is_same_v<S, Bool>)
      out[i] = storeValue<D>(int(v != 0));
    else if constexpr (isDeviceFloat<S> && !isDeviceFloat<D>) {
      // As ONNX Cast and the CPU: toward zero, NaN to 0, saturating.
      constexpr D lo = std::is_same_v<D, int32_t> ? D(INT32_MIN) : D(INT64_MIN);
      constexpr D hi = std::is_same_v<D, int32_t> ? D(INT32_MAX) : D(INT64_MAX);
      double d = double(v);
      out[i] = !(d == d)           ? D(0)
               : d <= double(lo) ? lo
               : d >= double(hi) ? hi
                                 : D(d);
    } else
      out[i] = storeValue<D>(v);
  }
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

/// Calls launch(I{}) with I the index type for `n` elements (uint32_t below
/// 2^31, int64_t beyond) and checks the launch; nothing for n == 0.
template <typename Launch> Status launchIndexed(int64_t n, Launch &&launch) {
  if (n == 0)
    return Status::ok();
  if (n <= INT_MAX)
    launch(uint32_t(0));
  else
    launch(int64_t(0));
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

/// Whether operands [first, first + count) all have the result's shape.
bool sameShapes(const KernelArgs &a, size_t first, size_t count) {
  for (size_t i = first; i < first + count; ++i)
    if (a.in(i).shape != a.out().shape)
      return false;
  return true;
}

/// The broadcast of operands [0, count) (count <= 3) to the result.
Status broadcastIndex(const KernelArgs &a, size_t count,
                      BroadcastIndex &index) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < count; ++i)
    shapes.push_back(a.in(i).shape);
  ops::BroadcastPlan plan = ops::makeBroadcastPlan(shapes, a.out().shape);
  size_t rank = plan.outerDims.size() + 1;
  if (rank > size_t(kMaxDims))
    return a.error("a broadcast over " + std::to_string(rank) +
                   " dimensions (after merging) has no CUDA kernel; at "
                   "most " +
                   std::to_string(kMaxDims));
  index.rank = int(rank);
  for (size_t d = 0; d + 1 < rank; ++d) {
    index.dims[d] = plan.outerDims[d];
    for (size_t k = 0; k < count; ++k)
      index.strides[k][d] = plan.outerStrides[k][d];
  }
  index.dims[rank - 1] = plan.inner;
  for (size_t k = 0; k < count; ++k)
    index.strides[k][rank - 1] = plan.innerStride[k];
  return Status::ok();
}

/// out = op(x, y) broadcast, operands of storage type T, result R.
template <typename T, typename R, typename Op>
Status runBinary(const KernelArgs &a, Op op, cudaStream_t stream) {
  int64_t n = a.out().numElements();
  bool same = sameShapes(a, 0, 2);
  BroadcastIndex index;
  if (!same)
    CLEAVE_CHECK(broadcastIndex(a, 2, index));
  const T *x = a.in(0).as<T>(), *y = a.in(1).as<T>();
  R *out = a.out().as<R>();
  return launchIndexed(n, [&](auto zero) {
    using I = decltype(zero);
    if (same)
      binarySameShape<T, R, I, Op>
          <<<blocksFor(n), kBlockThreads, 0, stream>>>(x, y, out, I(n), op);
    else
      binaryBroadcast<T, R, I, Op><<<blocksFor(n), kBlockThreads, 0, stream>>>(
          x, y, out, I(n), index, op);
  });
}

/// The CPU's checks of a binary op: rhs of lhs's type, the result of
/// `result`'s, shapes that broadcast to the result's.
Status checkBinary(const KernelArgs &a, DType result) {
  CLEAVE_CHECK(a.expectDType(a.in(1), a.in(0).dtype, "rhs"));
  CLEAVE_CHECK(a.expectDType(a.out(), result, "the result"));
  return ops::checkBroadcast(a, 0, 2);
}

/// add, sub, mul, pow, max, min: the result has the operands' type.
template <typename Op>
Status arithmetic(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkBinary(a, a.in(0).dtype));
  return visitDevice<Types::Numeric>(
      a, a.in(0).dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return runBinary<T, T>(a, Op(), stream);
      },
      "lhs");
}

/// div: float types only.
template <typename Op>
Status floatArithmetic(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkBinary(a, a.in(0).dtype));
  return visitDeviceFloat(
      a, a.in(0).dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return runBinary<T, T>(a, Op(), stream);
      },
      "lhs");
}

/// Comparisons: a bool result.
template <typename Op>
Status comparison(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkBinary(a, DType::Bool));
  return visitDevice<Types::Comparable>(
      a, a.in(0).dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return runBinary<T, Bool>(a, Op(), stream);
      },
      "lhs");
}

/// and, or: bool operands and result.
template <typename Op>
Status logical(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkBinary(a, a.in(0).dtype));
  CLEAVE_CHECK(expectBool(a, a.in(0).dtype, "lhs"));
  return runBinary<Bool, Bool>(a, Op(), stream);
}

/// The CPU's check of a unary op: the result of x's type and shape.
Status checkUnary(const KernelArgs &a) {
  CLEAVE_CHECK(a.expectDType(a.out(), a.in(0).dtype, "the result"));
  return a.expectShape(a.out(), a.in(0).shape, "the result");
}

template <typename T, typename Op>
Status runUnary(const KernelArgs &a, Op op, cudaStream_t stream) {
  int64_t n = a.out().numElements();
  const T *x = a.in(0).as<T>();
  T *out = a.out().as<T>();
  return launchIndexed(n, [&](auto zero) {
    using I = decltype(zero);
    unary<T, I, Op>
        <<<blocksFor(n), kBlockThreads, 0, stream>>>(x, out, I(n), op);
  });
}

/// neg, abs, relu.
template <typename Op>
Status numericUnary(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkUnary(a));
  return visitDevice<Types::Numeric>(
      a, a.in(0).dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return runUnary<T>(a, Op(), stream);
      },
      "x");
}

/// exp, log, ..., gelu, silu: x and the result of one shape and float type.
template <typename Op>
Status floatUnary(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkUnary(a));
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return runUnary<T>(a, Op(), stream);
  });
}

/// dx = op(x, dy) over x, dy and dx of one shape and float type.
template <typename Op>
Status activationGrad(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkUnary(a));
  CLEAVE_CHECK(a.expectDType(a.in(1), a.in(0).dtype, "dy"));
  CLEAVE_CHECK(a.expectShape(a.in(1), a.in(0).shape, "dy"));
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return runBinary<T, T>(a, Op(), stream);
  });
}

/// The approximate attribute of gelu and gelu_grad: whether it is "tanh".
Status approximateTanh(const KernelArgs &a, bool &tanh) {
  std::string approximate;
  CLEAVE_CHECK(a.stringAttr("approximate", approximate, "none"));
  tanh = approximate == "tanh";
  if (tanh || approximate == "none")
    return Status::ok();
  return a.error("approximate must be \"none\" or \"tanh\", got \"" +
                 approximate + "\"");
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

namespace cleave::runtime::cuda {

Status addKernel(const KernelArgs &a, cudaStream_t stream) {
  return arithmetic<AddOp>(a, stream);
}
Status subKernel(const KernelArgs &a, cudaStream_t stream) {
  return arithmetic<SubOp>(a, stream);
}
Status mulKernel(const KernelArgs &a, cudaStream_t stream) {
  return arithmetic<MulOp>(a, stream);
}
Status divKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatArithmetic<DivOp>(a, stream);
}
Status powKernel(const KernelArgs &a, cudaStream_t stream) {
  return arithmetic<PowOp>(a, stream);
}
Status maxKernel(const KernelArgs &a, cudaStream_t stream) {
  return arithmetic<MaximumOp>(a, stream);
}
Status minKernel(const KernelArgs &a, cudaStream_t stream) {
  return arithmetic<MinimumOp>(a, stream);
}
Status andKernel(const KernelArgs &a, cudaStream_t stream) {
  return logical<AndOp>(a, stream);
}
Status orKernel(const KernelArgs &a, cudaStream_t stream) {
  return logical<OrOp>(a, stream);
}
Status equalKernel(const KernelArgs &a, cudaStream_t stream) {
  return comparison<EqualOp>(a, stream);
}
Status lessKernel(const KernelArgs &a, cudaStream_t stream) {
  return comparison<LessOp>(a, stream);
}
Status lessEqualKernel(const KernelArgs &a, cudaStream_t stream) {
  return comparison<LessEqualOp>(a, stream);
}
Status greaterKernel(const KernelArgs &a, cudaStream_t stream) {
  return comparison<GreaterOp>(a, stream);
}
Status greaterEqualKernel(const KernelArgs &a, cudaStream_t stream) {
  return comparison<GreaterEqualOp>(a, stream);
}

/// select(cond, on_true, on_false): three operands broadcast together;
/// only moves elements, so it works on the element's size.
Status selectKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(a.expectDType(a.in(0), DType::Bool, "cond"));
  DType dtype = a.in(1).dtype;
  CLEAVE_CHECK(a.expectDType(a.in(2), dtype, "on_false"));
  CLEAVE_CHECK(a.expectDType(a.out(), dtype, "the result"));
  CLEAVE_CHECK(ops::checkBroadcast(a, 0, 3));
  int64_t n = a.out().numElements();
  bool same = sameShapes(a, 0, 3);
  BroadcastIndex index;
  if (!same)
    CLEAVE_CHECK(broadcastIndex(a, 3, index));
  return ops::visitBytes(
      a, dtype,
      [&](auto tag) -> Status {
        using W = typename decltype(tag)::type;
        const Bool *cond = a.in(0).as<Bool>();
        const W *x = a.in(1).as<W>(), *y = a.in(2).as<W>();
        W *out = a.out().as<W>();
        return launchIndexed(n, [&](auto zero) {
          using I = decltype(zero);
          if (same)
            selectElements<W, I, false>
                <<<blocksFor(n), kBlockThreads, 0, stream>>>(cond, x, y, out,
                                                             I(n), index);
          else
            selectElements<W, I, true>
                <<<blocksFor(n), kBlockThreads, 0, stream>>>(cond, x, y, out,
                                                             I(n), index);
        });
      },
      "on_true");
}

Status negKernel(const KernelArgs &a, cudaStream_t stream) {
  return numericUnary<NegOp>(a, stream);
}
Status absKernel(const KernelArgs &a, cudaStream_t stream) {
  return numericUnary<AbsOp>(a, stream);
}
Status reluKernel(const KernelArgs &a, cudaStream_t stream) {
  return numericUnary<ReluOp>(a, stream);
}
Status notKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(checkUnary(a));
  CLEAVE_CHECK(expectBool(a, a.in(0).dtype, "x"));
  return runUnary<Bool>(a, NotOp(), stream);
}
Status expKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<ExpOp>(a, stream);
}
Status logKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<LogOp>(a, stream);
}
Status sqrtKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<SqrtOp>(a, stream);
}
Status rsqrtKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<RsqrtOp>(a, stream);
}
Status reciprocalKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<ReciprocalOp>(a, stream);
}
Status tanhKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<TanhOp>(a, stream);
}
Status erfKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<ErfOp>(a, stream);
}
Status sigmoidKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<SigmoidOp>(a, stream);
}
Status sinKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<SinOp>(a, stream);
}
Status cosKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<CosOp>(a, stream);
}
Status siluKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<SiluOp>(a, stream);
}

Status geluKernel(const KernelArgs &a, cudaStream_t stream) {
  bool tanh;
  CLEAVE_CHECK(approximateTanh(a, tanh));
  return tanh ? floatUnary<GeluTanhOp>(a, stream)
              : floatUnary<GeluErfOp>(a, stream);
}

Status dropoutKernel(const KernelArgs &a, cudaStream_t stream) {
  ops::DropoutPlan plan;
  CLEAVE_CHECK(ops::dropoutPlan(a, plan));
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    int64_t n = a.out().numElements();
    const T *x = a.in(0).as<T>();
    T *out = a.out().as<T>();
    return launchIndexed(n, [&](auto zero) {
      using I = decltype(zero);
      dropoutElements<T, I>
          <<<blocksFor(n), kBlockThreads, 0, stream>>>(x, out, I(n), plan);
    });
  });
}

Status siluGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return activationGrad<SiluGradOp>(a, stream);
}

Status geluGradKernel(const KernelArgs &a, cudaStream_t stream) {
  bool tanh;
  CLEAVE_CHECK(approximateTanh(a, tanh));
  return tanh ? activationGrad<GeluTanhGradOp>(a, stream)
              : activationGrad<GeluErfGradOp>(a, stream);
}

Status castKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &x = a.in(0), &out = a.out();
  CLEAVE_CHECK(a.expectShape(out, x.shape, "the result"));
  int64_t n = x.numElements();
  return visitDevice<Types::Comparable>(
      a, x.dtype,
      [&](auto from) -> Status {
        using S = typename decltype(from)::type;
        return visitDevice<Types::Comparable>(
            a, out.dtype,
            [&](auto to) -> Status {
              using D = typename decltype(to)::type;
              if (n == 0)
                return Status::ok();
              if (x.dtype == out.dtype) {
                CLEAVE_CUDA_CHECK(
                    cudaMemcpyAsync(out.data, x.data, size_t(n) * sizeof(S),
                                    cudaMemcpyDeviceToDevice, stream));
                return Status::ok();
              }
              return launchIndexed(n, [&](auto zero) {
                using I = decltype(zero);
                convert<S, D, I><<<blocksFor(n), kBlockThreads, 0, stream>>>(
                    x.as<S>(), out.as<D>(), I(n));
              });
            },
            "the result");
      },
      "x");
}

} // namespace cleave::runtime::cuda
