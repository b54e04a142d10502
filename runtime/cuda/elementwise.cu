//===- elementwise.cu - CUDA kernels of the elementwise ops and cast ------===//
//
// add, sub, mul, div, gelu, silu: the CUDA side of runtime/cpu/elementwise.cpp,
// for f32, bf16 and f16 (16-bit floats are computed in float and stored
// rounding to nearest even).
// Binary ops broadcast as numpy does, either operand, through the CPU
// backend's BroadcastPlan: the result's dimensions merged where both
// operands allow, each operand with a stride per merged dimension (0 where it
// is broadcast). Operands of the result's shape take a plain indexed loop.
// Every kernel is a grid-stride loop, one element per thread per step, with
// 32-bit index arithmetic when the result has fewer than 2^31 elements.
// cast converts between f32, bf16 and f16 through float (exact from the
// 16-bit types), rounding to nearest even as the CPU's convert does; a cast
// to the same type is a device-to-device copy.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <climits>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using cpu::KernelArgs;
using cpu::Shape;

namespace {

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct DivOp {
  __device__ float operator()(float a, float b) const { return a / b; }
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

/// The most merged dimensions a broadcast may have (the result's rank
/// bounds it).
constexpr int kMaxDims = 8;

/// Where a broadcast binary op reads: the merged result dimensions and each
/// operand's stride along them, innermost last.
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t xStrides[kMaxDims];
  int64_t yStrides[kMaxDims];
};

/// out[i] = op(x[i], y[i]) over operands of the result's shape.
template <typename T, typename I, typename Op>
__global__ void binarySameShape(const T *__restrict__ x,
                                const T *__restrict__ y, T *__restrict__ out,
                                I n, Op op) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[i] = fromFloat<T>(op(toFloat(x[i]), toFloat(y[i])));
}

/// out[i] = op(x[xi], y[yi]) with xi, yi from i's coordinates in the
/// merged result dimensions.
template <typename T, typename I, typename Op>
__global__ void binaryBroadcast(const T *__restrict__ x,
                                const T *__restrict__ y, T *__restrict__ out,
                                I n, BroadcastIndex index, Op op) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x) {
    I rest = i, xi = 0, yi = 0;
    for (int d = index.rank - 1; d >= 0; --d) {
      I dim = I(index.dims[d]);
      I coordinate = rest % dim;
      rest /= dim;
      xi += coordinate * I(index.xStrides[d]);
      yi += coordinate * I(index.yStrides[d]);
    }
    out[i] = fromFloat<T>(op(toFloat(x[xi]), toFloat(y[yi])));
  }
}

/// out[i] = op(x[i]).
template <typename T, typename I, typename Op>
__global__ void unary(const T *__restrict__ x, T *__restrict__ out, I n,
                      Op op) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[i] = fromFloat<T>(op(toFloat(x[i])));
}

/// The CPU's check: the operands broadcast to the result's shape.
Status checkBroadcast(const KernelArgs &a) {
  Shape merged;
  if (cpu::broadcastShapes(a.in(0).shape, a.in(1).shape, merged) &&
      merged == a.out().shape)
    return Status::ok();
  return a.error("operands of shapes " + cpu::shapeString(a.in(0).shape) +
                 " and " + cpu::shapeString(a.in(1).shape) +
                 " do not broadcast to the result shape " +
                 cpu::shapeString(a.out().shape));
}

template <typename T, typename I, typename Op>
Status launchBinary(const KernelArgs &a, const BroadcastIndex *index, Op op,
                    cudaStream_t stream) {
  I n = I(a.out().numElements());
  const T *x = a.in(0).as<T>(), *y = a.in(1).as<T>();
  T *out = a.out().as<T>();
  if (index)
    binaryBroadcast<T, I, Op>
        <<<blocksFor(n), kBlockThreads, 0, stream>>>(x, y, out, n, *index, op);
  else
    binarySameShape<T, I, Op>
        <<<blocksFor(n), kBlockThreads, 0, stream>>>(x, y, out, n, op);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

/// add, sub, mul, div: the result has the operands' element type.
template <typename Op>
Status arithmetic(const KernelArgs &a, cudaStream_t stream) {
  DType dtype = a.in(0).dtype;
  CLEAVE_CHECK(a.expectDType(a.in(1), dtype, "rhs"));
  CLEAVE_CHECK(a.expectDType(a.out(), dtype, "the result"));
  CLEAVE_CHECK(checkBroadcast(a));
  int64_t n = a.out().numElements();
  bool sameShape =
      a.in(0).shape == a.out().shape && a.in(1).shape == a.out().shape;
  BroadcastIndex index;
  if (!sameShape) {
    cpu::BroadcastPlan plan =
        cpu::makeBroadcastPlan({a.in(0).shape, a.in(1).shape}, a.out().shape);
    size_t rank = plan.outerDims.size() + 1;
    if (rank > size_t(kMaxDims))
      return a.error("a broadcast over " + std::to_string(rank) +
                     " dimensions (after merging) has no CUDA kernel; at "
                     "most " +
                     std::to_string(kMaxDims));
    index.rank = int(rank);
    for (size_t d = 0; d + 1 < rank; ++d) {
      index.dims[d] = plan.outerDims[d];
      index.xStrides[d] = plan.outerStrides[0][d];
      index.yStrides[d] = plan.outerStrides[1][d];
    }
    index.dims[rank - 1] = plan.inner;
    index.xStrides[rank - 1] = plan.innerStride[0];
    index.yStrides[rank - 1] = plan.innerStride[1];
  }
  return visitDeviceFloat(
      a, dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        if (n == 0)
          return Status::ok();
        const BroadcastIndex *broadcast = sameShape ? nullptr : &index;
        if (n <= INT_MAX)
          return launchBinary<T, uint32_t>(a, broadcast, Op(), stream);
        return launchBinary<T, int64_t>(a, broadcast, Op(), stream);
      },
      "lhs");
}

/// gelu, silu: x and the result of one shape and float type.
template <typename Op>
Status floatUnary(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(a.expectDType(a.out(), a.in(0).dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), a.in(0).shape, "the result"));
  int64_t n = a.out().numElements();
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (n == 0)
      return Status::ok();
    const T *x = a.in(0).as<T>();
    T *out = a.out().as<T>();
    if (n <= INT_MAX)
      unary<T, uint32_t, Op><<<blocksFor(n), kBlockThreads, 0, stream>>>(
          x, out, uint32_t(n), Op());
    else
      unary<T, int64_t, Op>
          <<<blocksFor(n), kBlockThreads, 0, stream>>>(x, out, n, Op());
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  });
}

/// out[i] = D(x[i]) through float.
template <typename S, typename D, typename Index>
__global__ void convert(const S *__restrict__ x, D *__restrict__ out, Index n) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x)
    out[i] = fromFloat<D>(toFloat(x[i]));
}

} // namespace

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
  return arithmetic<DivOp>(a, stream);
}
Status siluKernel(const KernelArgs &a, cudaStream_t stream) {
  return floatUnary<SiluOp>(a, stream);
}

Status geluKernel(const KernelArgs &a, cudaStream_t stream) {
  std::string approximate;
  CLEAVE_CHECK(a.stringAttr("approximate", approximate, "none"));
  if (approximate == "tanh")
    return floatUnary<GeluTanhOp>(a, stream);
  if (approximate == "none")
    return floatUnary<GeluErfOp>(a, stream);
  return a.error("approximate must be \"none\" or \"tanh\", got \"" +
                 approximate + "\"");
}

Status castKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &x = a.in(0), &out = a.out();
  CLEAVE_CHECK(a.expectShape(out, x.shape, "the result"));
  int64_t n = x.numElements();
  return visitDeviceFloat(
      a, x.dtype,
      [&](auto from) -> Status {
        using S = typename decltype(from)::type;
        return visitDeviceFloat(
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
              if (n <= INT_MAX)
                convert<S, D, uint32_t>
                    <<<blocksFor(n), kBlockThreads, 0, stream>>>(
                        x.as<S>(), out.as<D>(), uint32_t(n));
              else
                convert<S, D, int64_t>
                    <<<blocksFor(n), kBlockThreads, 0, stream>>>(
                        x.as<S>(), out.as<D>(), n);
              CLEAVE_CUDA_CHECK(cudaGetLastError());
              return Status::ok();
            },
            "the result");
      },
      "x");
}

} // namespace cleave::runtime::cuda
