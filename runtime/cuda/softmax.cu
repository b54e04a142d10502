//===- softmax.cu - CUDA kernels of softmax, log_softmax and gradients ----===//
//
// The CUDA side of runtime/cpu/softmax.cpp, for f32, bf16 and f16, with f32
// accumulation. The tensor is [outer, C, inner] around the softmax axis. The
// common case, the last axis (inner == 1), is one block per row: a max
// pass, an exp-and-sum pass, a writing pass, each a strided walk of the row
// by the block's threads followed by a block reduction. For an inner axis
// one thread owns a column (adjacent threads read adjacent columns, so the
// loads coalesce) and makes the same three passes down it. As on the CPU,
// NaN propagates, a row's maximum is subtracted before exp, and 16-bit
// results are exp(x - max) / sum recomputed rather than rounded twice.
//
// The gradients (softmax_grad: y (dy - sum(dy y)); log_softmax_grad: dy -
// exp(y) sum(dy)) walk the same way: one sum per row (a block reduction) or
// per column, then one pass writing dx.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/SoftmaxShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;

namespace {

/// One block per row of `classes` elements.
template <typename T, bool Log>
__global__ void __launch_bounds__(1024)
    softmaxRows(const T *__restrict__ x, T *__restrict__ y, int64_t classes) {
  const T *xr = x + int64_t(blockIdx.x) * classes;
  T *yr = y + int64_t(blockIdx.x) * classes;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
    m = fmaxf(m, toFloat(xr[i]));
  m = blockReduce(m, MaxOp(), -INFINITY);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
    sum += expf(toFloat(xr[i]) - m);
  sum = blockReduce(sum, SumOp(), 0.0f);
  if (Log) {
    float shift = m + logf(sum);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
      yr[i] = fromFloat<T>(toFloat(xr[i]) - shift);
  } else {
    float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
      yr[i] = fromFloat<T>(expf(toFloat(xr[i]) - m) * inv);
  }
}

/// One thread per column of an [outer, classes, inner] tensor.
template <typename T, bool Log>
__global__ void softmaxColumns(const T *__restrict__ x, T *__restrict__ y,
                               int64_t outer, int64_t classes, int64_t inner) {
  int64_t column = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= outer * inner)
    return;
  int64_t base = column / inner * classes * inner + column % inner;
  float m = -INFINITY;
  for (int64_t c = 0; c < classes; ++c) {
    float v = toFloat(x[base + c * inner]);
    m = (v > m || v != v) ? v : m; // NaN propagates, as on the CPU
  }
  float sum = 0.0f;
  for (int64_t c = 0; c < classes; ++c)
    sum += expf(toFloat(x[base + c * inner]) - m);
  float s = Log ? m + logf(sum) : 1.0f / sum;
  for (int64_t c = 0; c < classes; ++c) {
    float v = toFloat(x[base + c * inner]);
    y[base + c * inner] = fromFloat<T>(Log ? v - s : expf(v - m) * s);
  }
}

/// One block per row: softmax_grad's y (dy - sum(dy y)), or
/// log_softmax_grad's dy - exp(y) sum(dy) when Log.
template <typename T, bool Log>
__global__ void __launch_bounds__(1024)
    softmaxGradRows(const T *__restrict__ y, const T *__restrict__ dy,
                    T *__restrict__ dx, int64_t classes) {
  int64_t base = int64_t(blockIdx.x) * classes;
  const T *yr = y + base, *dyr = dy + base;
  T *dxr = dx + base;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
    sum += Log ? toFloat(dyr[i]) : toFloat(dyr[i]) * toFloat(yr[i]);
  sum = blockReduce(sum, SumOp(), 0.0f);
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) {
    float v = toFloat(yr[i]), g = toFloat(dyr[i]);
    dxr[i] = fromFloat<T>(Log ? g - expf(v) * sum : v * (g - sum));
  }
}

/// One thread per column of an [outer, classes, inner] tensor.
template <typename T, bool Log>
__global__ void softmaxGradColumns(const T *__restrict__ y,
                                   const T *__restrict__ dy,
                                   T *__restrict__ dx, int64_t outer,
                                   int64_t classes, int64_t inner) {
  int64_t column = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= outer * inner)
    return;
  int64_t base = column / inner * classes * inner + column % inner;
  float sum = 0.0f;
  for (int64_t c = 0; c < classes; ++c) {
    float g = toFloat(dy[base + c * inner]);
    sum += Log ? g : g * toFloat(y[base + c * inner]);
  }
  for (int64_t c = 0; c < classes; ++c) {
    float v = toFloat(y[base + c * inner]), g = toFloat(dy[base + c * inner]);
    dx[base + c * inner] = fromFloat<T>(Log ? g - expf(v) * sum : v * (g - sum));
  }
}

template <bool Log> Status softmax(const KernelArgs &a, cudaStream_t stream) {
  int64_t outer, classes, inner;
  CLEAVE_CHECK(ops::softmaxLayout(a, outer, classes, inner));
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (outer == 0 || classes == 0 || inner == 0)
      return Status::ok();
    const T *x = a.in(0).as<T>();
    T *y = a.out().as<T>();
    if (inner == 1) {
      if (outer > INT32_MAX)
        return a.error("more than 2^31 - 1 rows");
      softmaxRows<T, Log>
          <<<unsigned(outer), rowThreads(classes), 0, stream>>>(x, y, classes);
    } else {
      int64_t blocks = (outer * inner + kBlockThreads - 1) / kBlockThreads;
      if (blocks > INT32_MAX)
        return a.error("more than 2^31 - 1 blocks of columns");
      softmaxColumns<T, Log><<<unsigned(blocks), kBlockThreads, 0, stream>>>(
          x, y, outer, classes, inner);
    }
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  });
}

template <bool Log>
Status softmaxGrad(const KernelArgs &a, cudaStream_t stream) {
  int64_t outer, classes, inner;
  CLEAVE_CHECK(ops::softmaxGradLayout(a, outer, classes, inner));
  return visitDeviceFloat(a, a.in(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (outer == 0 || classes == 0 || inner == 0)
      return Status::ok();
    const T *y = a.in(0).as<T>(), *dy = a.in(1).as<T>();
    T *dx = a.out().as<T>();
    if (inner == 1) {
      if (outer > INT32_MAX)
        return a.error("more than 2^31 - 1 rows");
      softmaxGradRows<T, Log><<<unsigned(outer), rowThreads(classes), 0,
                                stream>>>(y, dy, dx, classes);
    } else {
      int64_t blocks = (outer * inner + kBlockThreads - 1) / kBlockThreads;
      if (blocks > INT32_MAX)
        return a.error("more than 2^31 - 1 blocks of columns");
      softmaxGradColumns<T, Log>
          <<<unsigned(blocks), kBlockThreads, 0, stream>>>(y, dy, dx, outer,
                                                           classes, inner);
    }
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  });
}

} // namespace

namespace cleave::runtime::cuda {


Status softmaxKernel(const KernelArgs &a, cudaStream_t stream) {
  return softmax<false>(a, stream);
}
Status logSoftmaxKernel(const KernelArgs &a, cudaStream_t stream) {
  return softmax<true>(a, stream);
}
Status softmaxGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return softmaxGrad<false>(a, stream);
}
Status logSoftmaxGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return softmaxGrad<true>(a, stream);
}

} // namespace cleave::runtime::cuda
