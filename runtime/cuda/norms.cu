//===- norms.cu - CUDA kernels of layer_norm, rms_norm and gradients ------===//
//
// The CUDA side of runtime/cpu/norms.cpp, for f32, bf16 and f16 with f32
// statistics. x is [rows, D] with D the product of the
// dimensions from `axis` on (the last one by default); one block per row
// reads it three times (mean, centred variance, normalize-scale-shift) while
// it sits in L1/L2, each pass a strided walk followed by a block reduction.
// The variance is centred, as on the CPU, so there is no cancellation.
// scale and bias are optional for layer_norm; rms_norm requires scale.
//
// The gradients recompute the row statistics the same way in one block per
// row, which writes dx (two more block reductions: sum(g) and sum(g xhat),
// g = dy * scale) and keeps the row's mean and rstd in a stream-ordered
// scratch buffer. dscale (sum of dy xhat) and dbias (sum of dy) are then
// summed over rows without atomics: one thread per column adds up a chunk
// of rows into a partial sum, and one thread per column adds the chunks'
// partials in chunk order, so the result does not depend on timing (as on
// the CPU, which adds per-thread partials in order).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/NormShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;
using ops::Shape;

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


//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// One block per row of layer_norm_grad (rms_norm_grad when Rms): with g =
/// dy * scale and xhat the normalized x,
///   layer_norm: dx = rstd (g - mean(g) - xhat mean(g xhat))
///   rms_norm:   dx = rstd (g - xhat mean(g xhat))
/// and the row's (mean, rstd) into stats.
template <typename T, bool Rms>
__global__ void __launch_bounds__(512)
    normGradRows(const T *__restrict__ dy, const T *__restrict__ x,
                 const T *__restrict__ scale, T *__restrict__ dx,
                 float2 *__restrict__ stats, int64_t d, float epsilon) {
  int64_t base = int64_t(blockIdx.x) * d;
  const T *dyr = dy + base, *xr = x + base;
  T *dxr = dx + base;
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
  float sumG = 0.0f, sumGX = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float g = toFloat(dyr[i]);
    if (scale)
      g = g * toFloat(scale[i]);
    float xhat = (toFloat(xr[i]) - mean) * rstd;
    sumG += g;
    sumGX += g * xhat;
  }
  if (!Rms)
    sumG = blockReduce(sumG, SumOp(), 0.0f);
  sumGX = blockReduce(sumGX, SumOp(), 0.0f);
  float meanG = Rms ? 0.0f : sumG / float(d), meanGX = sumGX / float(d);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float g = toFloat(dyr[i]);
    if (scale)
      g = g * toFloat(scale[i]);
    float xhat = (toFloat(xr[i]) - mean) * rstd;
    dxr[i] = fromFloat<T>(rstd * (g - meanG - xhat * meanGX));
  }
  if (threadIdx.x == 0)
    stats[blockIdx.x] = make_float2(mean, rstd);
}

constexpr int kColumnThreads = 256;

/// One thread per column and chunk (blockIdx.y) of rows: the chunk's sums
/// of dy xhat and of dy into partial[chunk][0][column] and
/// partial[chunk][1][column].
template <typename T>
__global__ void __launch_bounds__(kColumnThreads)
    normGradColumns(const T *__restrict__ dy, const T *__restrict__ x,
                    const float2 *__restrict__ stats,
                    float *__restrict__ partial, int64_t rows, int64_t d,
                    int64_t rowsPerChunk) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d)
    return;
  int64_t chunk = blockIdx.y, begin = chunk * rowsPerChunk;
  int64_t end = begin + rowsPerChunk < rows ? begin + rowsPerChunk : rows;
  float s = 0.0f, b = 0.0f;
  for (int64_t r = begin; r < end; ++r) {
    float2 st = stats[r];
    float g = toFloat(dy[r * d + i]);
    float xhat = (toFloat(x[r * d + i]) - st.x) * st.y;
    s += g * xhat;
    b += g;
  }
  partial[chunk * 2 * d + i] = s;
  partial[chunk * 2 * d + d + i] = b;
}

/// One thread per column: the chunks' partial sums added in chunk order.
template <typename T>
__global__ void normGradWeights(const float *__restrict__ partial,
                                int64_t chunks, int64_t d,
                                T *__restrict__ dscale, T *__restrict__ dbias) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < d;
       i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.0f, b = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partial[c * 2 * d + i];
      b += partial[c * 2 * d + d + i];
    }
    dscale[i] = fromFloat<T>(s);
    if (dbias)
      dbias[i] = fromFloat<T>(b);
  }
}

/// Enqueues the three kernels; `scratch` holds chunks * 2 * d partial sums
/// followed by rows (mean, rstd) pairs.
template <typename T, bool Rms>
Status enqueueNormGrad(const KernelArgs &a, int64_t rows, int64_t d,
                       float epsilon, int64_t chunks, int64_t rowsPerChunk,
                       float *scratch, cudaStream_t stream) {
  const T *dy = a.in(0).as<T>(), *x = a.in(1).as<T>();
  const T *scale = a.has(2) ? a.in(2).as<T>() : nullptr;
  T *dbias = Rms ? nullptr : a.out(2).as<T>();
  float *partial = scratch;
  float2 *stats = reinterpret_cast<float2 *>(scratch + chunks * 2 * d);
  normGradRows<T, Rms><<<unsigned(rows), rowThreads(d, 512), 0, stream>>>(
      dy, x, scale, a.out(0).as<T>(), stats, d, epsilon);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  dim3 grid(unsigned((d + kColumnThreads - 1) / kColumnThreads),
            unsigned(chunks));
  normGradColumns<T><<<grid, kColumnThreads, 0, stream>>>(
      dy, x, stats, partial, rows, d, rowsPerChunk);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  normGradWeights<T><<<blocksFor(d), kBlockThreads, 0, stream>>>(
      partial, chunks, d, a.out(1).as<T>(), dbias);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

template <bool Rms>
Status normalizeGrad(const KernelArgs &a, cudaStream_t stream) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(ops::checkNormGrad(a, rows, d, epsilon));
  return visitDeviceFloat(a, a.in(1).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (d == 0)
      return Status::ok();
    if (rows == 0) { // no rows to sum: the weight gradients are zero
      for (size_t i = 1; i < a.outputs.size(); ++i)
        CLEAVE_CUDA_CHECK(cudaMemsetAsync(a.out(i).data, 0,
                                          size_t(d) * sizeof(T), stream));
      return Status::ok();
    }
    if (rows > INT32_MAX)
      return a.error("more than 2^31 - 1 rows");
    if ((d + kColumnThreads - 1) / kColumnThreads > INT32_MAX)
      return a.error("more than 2^31 - 1 blocks of columns");
    // About 1024 blocks of column sums, each over a chunk of rows.
    int64_t columnBlocks = (d + kColumnThreads - 1) / kColumnThreads;
    int64_t chunks = std::min<int64_t>(
        rows, std::max<int64_t>(1, 1024 / columnBlocks));
    int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
    chunks = (rows + rowsPerChunk - 1) / rowsPerChunk;
    float *scratch = nullptr;
    size_t bytes = size_t(chunks * 2 * d + rows * 2) * sizeof(float);
    CLEAVE_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void **>(&scratch), bytes, stream));
    Status status = enqueueNormGrad<T, Rms>(a, rows, d, float(epsilon), chunks,
                                            rowsPerChunk, scratch, stream);
    (void)cudaFreeAsync(scratch, stream);
    return status;
  });
}

} // namespace

namespace cleave::runtime::cuda {


Status layerNormKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(
      ops::checkNorm(a, 0, {{1, "scale"}, {2, "bias"}}, rows, d, epsilon));
  return normalize<false>(a, rows, d, epsilon, stream);
}

Status rmsNormKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t rows, d;
  double epsilon;
  CLEAVE_CHECK(ops::checkNorm(a, 0, {{1, "scale"}}, rows, d, epsilon));
  if (!a.has(1) && d > 0)
    return a.error("scale is required");
  return normalize<true>(a, rows, d, epsilon, stream);
}

/// (dy, x, scale?) -> (dx, dscale, dbias).
Status layerNormGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return normalizeGrad<false>(a, stream);
}

/// (dy, x, scale) -> (dx, dscale).
Status rmsNormGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return normalizeGrad<true>(a, stream);
}

} // namespace cleave::runtime::cuda
