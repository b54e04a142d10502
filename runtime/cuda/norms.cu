//===- norms.cu - CUDA kernels of layer_norm and rms_norm (forward) -------===//
//
// The CUDA side of the forward kernels of runtime/cpu/norms.cpp, for f32,
// bf16 and f16 with f32 statistics. x is [rows, D] with D the product of the
// dimensions from `axis` on (the last one by default); one block per row
// reads it three times (mean, centred variance, normalize-scale-shift) while
// it sits in L1/L2, each pass a strided walk followed by a block reduction.
// The variance is centred, as on the CPU, so there is no cancellation.
// scale and bias are optional for layer_norm; rms_norm requires scale.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using cpu::KernelArgs;
using cpu::Shape;

namespace {

/// One block per row: layer_norm's (x - mean) rstd [* scale] [+ bias], or
/// rms_norm's x rstd * scale when Rms, with rstd = 1 / sqrt(var + epsilon)
/// (var the mean square for rms_norm), in the CPU's order of operations.
template <typename T, bool Rms>
__global__ void __launch_bounds__(512)
    normRows(const T *__restrict__ x, const T *__restrict__ scale,
             const T *__restrict__ bias, T *__restrict__ y, int64_t d,
             float epsilon) {
  const T *xr = x + int64_t(blockIdx.x) * d;
  T *yr = y + int64_t(blockIdx.x) * d;
  float mean = 0.0f;
  if (!Rms) {
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      sum += toFloat(xr[i]);
    mean = blockReduce(sum, SumOp(), 0.0f) / float(d);
  }
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float c = toFloat(xr[i]) - mean;
    squares += c * c;
  }
  squares = blockReduce(squares, SumOp(), 0.0f);
  float rstd = 1.0f / sqrtf(squares / float(d) + epsilon);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = (toFloat(xr[i]) - mean) * rstd;
    if (scale)
      v = v * toFloat(scale[i]);
    if (!Rms && bias)
      v = v + toFloat(bias[i]);
    yr[i] = fromFloat<T>(v);
  }
}

/// The CPU's checks: axis, epsilon, the result like x, and the given
/// weights (operand index and name) of shape x.shape[axis:] and x's type.
Status checkNorm(const KernelArgs &a,
                 std::initializer_list<std::pair<size_t, const char *>> weights,
                 int64_t &rows, int64_t &d, double &epsilon) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  int64_t axis;
  CLEAVE_CHECK(a.intAttr("axis", axis, -1));
  CLEAVE_CHECK(a.floatAttr("epsilon", epsilon, 1e-5));
  if (x.rank() == 0)
    return a.error("x must have rank 1 or more");
  CLEAVE_CHECK(cpu::normalizeAxis(a, axis, x.rank()));
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (auto [i, what] : weights) {
    if (!a.has(i))
      continue;
    CLEAVE_CHECK(a.expectShape(a.in(i), normalized, what));
    CLEAVE_CHECK(a.expectDType(a.in(i), x.dtype, what));
  }
  rows = cpu::product(x.shape, 0, axis);
  d = cpu::product(normalized);
  return Status::ok();
}

template <bool Rms>
Status normalize(const KernelArgs &a, int64_t rows, int64_t d, double epsilon,
                 cudaStream_t stream) {
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (rows == 0 || d == 0)
      return Status::ok();
    if (rows > INT32_MAX)
      return a.error("more than 2^31 - 1 rows");
    const T *scale = a.has(1) ? a.in(1).as<T>() : nullptr;
    const T *bias = !Rms && a.has(2) ? a.in(2).as<T>() : nullptr;
    normRows<T, Rms><<<unsigned(rows), rowThreads(d, 512), 0, stream>>>(
        a.in(0).as<T>(), scale, bias, a.out().as<T>(), d, float(epsilon));
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  });
}

} // namespace

namespace cleave::runtime::cuda {

Status layerNormKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNorm(a, {{1, "scale"}, {2, "bias"}}, rows, d, epsilon));
  return normalize<false>(a, rows, d, epsilon, stream);
}

Status rmsNormKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(checkNorm(a, {{1, "scale"}}, rows, d, epsilon));
  if (!a.has(1) && d > 0)
    return a.error("scale is required");
  return normalize<true>(a, rows, d, epsilon, stream);
}

} // namespace cleave::runtime::cuda
