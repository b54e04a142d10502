//===- losses.cu - CUDA kernels of the losses and their gradients ---------===//
//
// The CUDA side of runtime/cpu/losses.cpp for f32, bf16 and f16: input
// [N, C, d...] against class ids target [N, d...] (i32 or i64), with
// reduction none, sum or mean and an optional ignore_index.
//
// softmax_cross_entropy: per position, logsumexp over the classes (a max
// pass and an exp-sum pass, in float) minus the target's logit, in double
// as on the CPU; nll_loss: minus the target's value. Without d... (the
// common [N, C] case) one block owns a row; otherwise one thread owns a
// position and walks its classes (adjacent threads read adjacent
// positions). For sum and mean the position losses go to a stream-ordered
// scratch buffer of doubles and one block adds them up in a fixed order
// (deterministic), counting the targets that are not ignored (mean over
// none of them: 0 / 0 = NaN, as on the CPU).
//
// The gradients scale each position by dloss (the scalar dloss divided by
// the counted targets for mean, which one block counts first into a
// scratch double): softmax_cross_entropy_grad recomputes logsumexp the same
// way and writes (softmax - onehot) * factor; nll_loss_grad writes -factor
// at the target's class and zero elsewhere, one thread per element. Ignored
// positions get zeros.
//
// softmax_cross_entropy_fused does both in one launch (after the mean's
// factor): per row or position the loss term and the gradient from one max
// and one exp-sum, the loss reduced as above; dinput may be the input
// (written in place, as llm.c's fused classifier does).
//
// The CPU checks every target first; the device cannot refuse without a
// sync, so a target that is neither a class nor ignore_index gives a NaN
// loss, and NaN in every class of its position's gradient.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/LossShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;

namespace {

using ops::LossShape;
using ops::Reduction;

/// Where position `p`'s loss goes: `losses` (doubles, for a reduction) when
/// not null, else `out`.
template <typename T>
__device__ __forceinline__ void putLoss(T *out, double *losses, int64_t p,
                                        double loss) {
  if (losses)
    losses[p] = loss;
  else
    out[p] = fromFloat<T>(float(loss));
}

/// 0 for an ignored target, NaN for one out of range, else -1 (compute).
__device__ __forceinline__ int targetState(int64_t t, const LossShape &s) {
  if (s.hasIgnore && t == s.ignoreIndex)
    return 0;
  if (t < 0 || t >= s.classes)
    return 1;
  return -1;
}

/// One block per row of an [N, C] input.
template <typename T, typename I>
__global__ void __launch_bounds__(1024)
    crossEntropyRows(const T *__restrict__ x, const I *__restrict__ target,
                     T *out, double *losses, LossShape s) {
  int64_t p = blockIdx.x;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  if (state >= 0) { // uniform over the block
    if (threadIdx.x == 0)
      putLoss(out, losses, p, state == 0 ? 0.0 : double(NAN));
    return;
  }
  const T *row = x + p * s.classes;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
    m = fmaxf(m, toFloat(row[c]));
  m = blockReduce(m, MaxOp(), -INFINITY);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
    sum += expf(toFloat(row[c]) - m);
  sum = blockReduce(sum, SumOp(), 0.0f);
  if (threadIdx.x == 0) {
    float lse = m + logf(sum);
    putLoss(out, losses, p, double(lse) - double(toFloat(row[t])));
  }
}

/// One thread per position of an [N, C, d...] input.
template <typename T, typename I>
__global__ void crossEntropyPositions(const T *__restrict__ x,
                                      const I *__restrict__ target, T *out,
                                      double *losses, LossShape s) {
  int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= s.n * s.positions)
    return;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  if (state >= 0) {
    putLoss(out, losses, p, state == 0 ? 0.0 : double(NAN));
    return;
  }
  int64_t n = p / s.positions, d = p % s.positions;
  const T *row = x + n * s.classes * s.positions + d;
  float m = -INFINITY;
  for (int64_t c = 0; c < s.classes; ++c) {
    float v = toFloat(row[c * s.positions]);
    m = (v > m || v != v) ? v : m;
  }
  float sum = 0.0f;
  for (int64_t c = 0; c < s.classes; ++c)
    sum += expf(toFloat(row[c * s.positions]) - m);
  float lse = m + logf(sum);
  putLoss(out, losses, p, double(lse) - double(toFloat(row[t * s.positions])));
}

/// One thread per position of nll_loss: minus the target's value.
template <typename T, typename I>
__global__ void nllPositions(const T *__restrict__ x,
                             const I *__restrict__ target, T *out,
                             double *losses, LossShape s) {
  int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= s.n * s.positions)
    return;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  if (state >= 0) {
    putLoss(out, losses, p, state == 0 ? 0.0 : double(NAN));
    return;
  }
  int64_t n = p / s.positions, d = p % s.positions;
  putLoss(out, losses, p,
          -double(toFloat(x[(n * s.classes + t) * s.positions + d])));
}

constexpr int kReduceThreads = 1024;

/// out[0] = the sum of `losses` (divided by the counted targets for mean),
/// by one block in a fixed order.
template <typename T, typename I>
__global__ void __launch_bounds__(kReduceThreads)
    reduceLosses(const double *__restrict__ losses,
                 const I *__restrict__ target, int64_t count, LossShape s,
                 bool mean, T *out) {
  __shared__ double sums[kReduceThreads];
  __shared__ long long counts[kReduceThreads];
  double sum = 0;
  long long counted = 0;
  for (int64_t p = threadIdx.x; p < count; p += blockDim.x) {
    sum += losses[p];
    counted += !(s.hasIgnore && int64_t(target[p]) == s.ignoreIndex);
  }
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = counted;
  __syncthreads();
  for (int stride = kReduceThreads / 2; stride; stride >>= 1) {
    if (int(threadIdx.x) < stride) {
      sums[threadIdx.x] += sums[threadIdx.x + stride];
      counts[threadIdx.x] += counts[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double total = sums[0];
    if (mean)
      total /= double(counts[0]);
    out[0] = fromFloat<T>(float(total));
  }
}

/// Enqueues the position losses (into `losses` when not null, else into
/// the result) and, for a reduction, their sum.
template <typename T, typename I, bool CrossEntropy>
Status enqueueLoss(const KernelArgs &a, const LossShape &s, double *losses,
                   cudaStream_t stream) {
  Reduction reduction = s.reduction;
  const T *x = a.in(0).as<T>();
  const I *target = a.in(1).as<I>();
  T *out = a.out().as<T>();
  int64_t count = s.n * s.positions;
  if (count > 0) {
    if (!CrossEntropy) {
      int64_t blocks = (count + kBlockThreads - 1) / kBlockThreads;
      if (blocks > INT32_MAX)
        return a.error("more than 2^31 - 1 blocks of positions");
      nllPositions<T, I><<<unsigned(blocks), kBlockThreads, 0, stream>>>(
          x, target, out, losses, s);
    } else if (s.positions == 1) {
      if (count > INT32_MAX)
        return a.error("more than 2^31 - 1 rows");
      crossEntropyRows<T, I>
          <<<unsigned(count), rowThreads(s.classes), 0, stream>>>(
              x, target, out, losses, s);
    } else {
      int64_t blocks = (count + kBlockThreads - 1) / kBlockThreads;
      if (blocks > INT32_MAX)
        return a.error("more than 2^31 - 1 blocks of positions");
      crossEntropyPositions<T, I>
          <<<unsigned(blocks), kBlockThreads, 0, stream>>>(x, target, out,
                                                           losses, s);
    }
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  if (reduction != Reduction::None) {
    reduceLosses<T, I><<<1, kReduceThreads, 0, stream>>>(
        losses, target, count, s, reduction == Reduction::Mean, out);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  return Status::ok();
}

template <typename T, typename I, bool CrossEntropy>
Status lossOn(const KernelArgs &a, const LossShape &s, cudaStream_t stream) {
  int64_t count = s.n * s.positions;
  double *losses = nullptr;
  if (s.reduction != Reduction::None && count > 0)
    CLEAVE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void **>(&losses),
                                      size_t(count) * sizeof(double), stream));
  Status status = enqueueLoss<T, I, CrossEntropy>(a, s, losses, stream);
  if (losses)
    (void)cudaFreeAsync(losses, stream);
  return status;
}

template <bool CrossEntropy>
Status loss(const KernelArgs &a, cudaStream_t stream) {
  LossShape s;
  CLEAVE_CHECK(ops::checkLoss(a, s));
  const TensorRef &input = a.in(0), &target = a.in(1);
  return visitDeviceFloat(
      a, input.dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return ops::visitIndex(
            a, target.dtype,
            [&](auto index) -> Status {
              using I = typename decltype(index)::type;
              return lossOn<T, I, CrossEntropy>(a, s, stream);
            },
            "target");
      },
      "input");
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// The mean's factor: the scalar dloss over the targets that are not
/// ignored, by one block (in double, as the CPU divides).
template <typename T, typename I>
__global__ void __launch_bounds__(kReduceThreads)
    meanFactor(const T *__restrict__ dloss, const I *__restrict__ target,
               int64_t count, LossShape s, double *factor) {
  __shared__ long long counts[kReduceThreads];
  long long counted = 0;
  for (int64_t p = threadIdx.x; p < count; p += blockDim.x)
    counted += !(s.hasIgnore && int64_t(target[p]) == s.ignoreIndex);
  counts[threadIdx.x] = counted;
  __syncthreads();
  for (int stride = kReduceThreads / 2; stride; stride >>= 1) {
    if (int(threadIdx.x) < stride)
      counts[threadIdx.x] += counts[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *factor = double(toFloat(dloss[0])) / double(counts[0]);
}

/// Position p's factor: dloss[p] (none), dloss[0] (sum) or the mean's.
template <typename T>
__device__ __forceinline__ float factorAt(const T *dloss, const double *mean,
                                          const LossShape &s, int64_t p) {
  if (s.reduction == Reduction::None)
    return toFloat(dloss[p]);
  if (s.reduction == Reduction::Sum)
    return toFloat(dloss[0]);
  return float(*mean);
}

/// One block per row of an [N, C] input: (softmax(x) - onehot(t)) * factor.
template <typename T, typename I>
__global__ void __launch_bounds__(1024)
    crossEntropyGradRows(const T *__restrict__ dloss, const double *mean,
                         const T *__restrict__ x, const I *__restrict__ target,
                         T *__restrict__ dx, LossShape s) {
  int64_t p = blockIdx.x;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  const T *row = x + p * s.classes;
  T *out = dx + p * s.classes;
  if (state >= 0) { // uniform over the block
    T fill = fromFloat<T>(state == 0 ? 0.0f : NAN);
    for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
      out[c] = fill;
    return;
  }
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
    m = fmaxf(m, toFloat(row[c]));
  m = blockReduce(m, MaxOp(), -INFINITY);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
    sum += expf(toFloat(row[c]) - m);
  sum = blockReduce(sum, SumOp(), 0.0f);
  float shift = m + logf(sum), g = factorAt(dloss, mean, s, p);
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x) {
    float e = expf(toFloat(row[c]) - shift);
    out[c] = fromFloat<T>((c == t ? e - 1.0f : e) * g);
  }
}

/// One thread per position of an [N, C, d...] input.
template <typename T, typename I>
__global__ void crossEntropyGradPositions(const T *__restrict__ dloss,
                                          const double *mean,
                                          const T *__restrict__ x,
                                          const I *__restrict__ target,
                                          T *__restrict__ dx, LossShape s) {
  int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= s.n * s.positions)
    return;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  int64_t n = p / s.positions, d = p % s.positions;
  int64_t base = n * s.classes * s.positions + d;
  const T *row = x + base;
  T *out = dx + base;
  if (state >= 0) {
    T fill = fromFloat<T>(state == 0 ? 0.0f : NAN);
    for (int64_t c = 0; c < s.classes; ++c)
      out[c * s.positions] = fill;
    return;
  }
  float m = -INFINITY;
  for (int64_t c = 0; c < s.classes; ++c)
    m = fmaxf(m, toFloat(row[c * s.positions]));
  float sum = 0.0f;
  for (int64_t c = 0; c < s.classes; ++c)
    sum += expf(toFloat(row[c * s.positions]) - m);
  float shift = m + logf(sum), g = factorAt(dloss, mean, s, p);
  for (int64_t c = 0; c < s.classes; ++c) {
    float e = expf(toFloat(row[c * s.positions]) - shift);
    out[c * s.positions] = fromFloat<T>((c == t ? e - 1.0f : e) * g);
  }
}

/// One thread per element of nll_loss_grad's [N, C, d...] result: -factor
/// at the target's class, zero elsewhere.
template <typename T, typename I>
__global__ void nllGradElements(const T *__restrict__ dloss, const double *mean,
                                const I *__restrict__ target,
                                T *__restrict__ dx, LossShape s) {
  int64_t total = s.n * s.classes * s.positions;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t d = e % s.positions, c = e / s.positions % s.classes;
    int64_t n = e / (s.positions * s.classes), p = n * s.positions + d;
    int64_t t = int64_t(target[p]);
    int state = targetState(t, s);
    float v = state == 0   ? 0.0f
              : state == 1 ? NAN
              : c == t     ? -factorAt(dloss, mean, s, p)
                           : 0.0f;
    dx[e] = fromFloat<T>(v);
  }
}

template <typename T, typename I, bool CrossEntropy>
Status enqueueLossGrad(const KernelArgs &a, const LossShape &s,
                       const TensorRef &target, double *mean,
                       cudaStream_t stream) {
  const T *dloss = a.in(0).as<T>();
  const I *t = target.as<I>();
  T *dx = a.out().as<T>();
  int64_t count = s.n * s.positions;
  if (mean) {
    meanFactor<T, I><<<1, kReduceThreads, 0, stream>>>(dloss, t, count, s,
                                                       mean);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  if (!CrossEntropy) {
    nllGradElements<T, I>
        <<<blocksFor(count * s.classes), kBlockThreads, 0, stream>>>(
            dloss, mean, t, dx, s);
  } else if (s.positions == 1) {
    if (count > INT32_MAX)
      return a.error("more than 2^31 - 1 rows");
    crossEntropyGradRows<T, I>
        <<<unsigned(count), rowThreads(s.classes), 0, stream>>>(
            dloss, mean, a.in(1).as<T>(), t, dx, s);
  } else {
    int64_t blocks = (count + kBlockThreads - 1) / kBlockThreads;
    if (blocks > INT32_MAX)
      return a.error("more than 2^31 - 1 blocks of positions");
    crossEntropyGradPositions<T, I>
        <<<unsigned(blocks), kBlockThreads, 0, stream>>>(
            dloss, mean, a.in(1).as<T>(), t, dx, s);
  }
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// The fused loss and gradient
//===----------------------------------------------------------------------===//

/// One block per row of an [N, C] input: the row's loss (as
/// crossEntropyRows) and its gradient (as crossEntropyGradRows) from one
/// max and one exp-sum. `dx` may be `x` (no __restrict__ on either): each
/// element is read before the thread that owns it writes it.
template <typename T, typename I>
__global__ void __launch_bounds__(1024)
    crossEntropyFusedRows(const T *__restrict__ dloss, const double *mean,
                          const T *x, const I *__restrict__ target, T *out,
                          double *losses, T *dx, LossShape s) {
  int64_t p = blockIdx.x;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  const T *row = x + p * s.classes;
  T *drow = dx + p * s.classes;
  if (state >= 0) { // uniform over the block
    if (threadIdx.x == 0)
      putLoss(out, losses, p, state == 0 ? 0.0 : double(NAN));
    T fill = fromFloat<T>(state == 0 ? 0.0f : NAN);
    for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
      drow[c] = fill;
    return;
  }
  // Read before the block's barriers: dx may be x, and another thread
  // may write row[t] once they are passed.
  float picked = threadIdx.x == 0 ? toFloat(row[t]) : 0.0f;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
    m = fmaxf(m, toFloat(row[c]));
  m = blockReduce(m, MaxOp(), -INFINITY);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x)
    sum += expf(toFloat(row[c]) - m);
  sum = blockReduce(sum, SumOp(), 0.0f);
  float shift = m + logf(sum), g = factorAt(dloss, mean, s, p);
  if (threadIdx.x == 0)
    putLoss(out, losses, p, double(shift) - double(picked));
  for (int64_t c = threadIdx.x; c < s.classes; c += blockDim.x) {
    float e = expf(toFloat(row[c]) - shift);
    drow[c] = fromFloat<T>((c == t ? e - 1.0f : e) * g);
  }
}

/// One thread per position of an [N, C, d...] input.
template <typename T, typename I>
__global__ void crossEntropyFusedPositions(const T *__restrict__ dloss,
                                           const double *mean, const T *x,
                                           const I *__restrict__ target,
                                           T *out, double *losses, T *dx,
                                           LossShape s) {
  int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= s.n * s.positions)
    return;
  int64_t t = int64_t(target[p]);
  int state = targetState(t, s);
  int64_t n = p / s.positions, d = p % s.positions;
  int64_t base = n * s.classes * s.positions + d;
  const T *row = x + base;
  T *drow = dx + base;
  if (state >= 0) {
    putLoss(out, losses, p, state == 0 ? 0.0 : double(NAN));
    T fill = fromFloat<T>(state == 0 ? 0.0f : NAN);
    for (int64_t c = 0; c < s.classes; ++c)
      drow[c * s.positions] = fill;
    return;
  }
  float m = -INFINITY;
  for (int64_t c = 0; c < s.classes; ++c)
    m = fmaxf(m, toFloat(row[c * s.positions]));
  float sum = 0.0f;
  for (int64_t c = 0; c < s.classes; ++c)
    sum += expf(toFloat(row[c * s.positions]) - m);
  float shift = m + logf(sum), g = factorAt(dloss, mean, s, p);
  putLoss(out, losses, p,
          double(shift) - double(toFloat(row[t * s.positions])));
  for (int64_t c = 0; c < s.classes; ++c) {
    float e = expf(toFloat(row[c * s.positions]) - shift);
    drow[c * s.positions] = fromFloat<T>((c == t ? e - 1.0f : e) * g);
  }
}

/// Enqueues the mean's factor, the fused rows or positions (losses into
/// `losses` for a reduction) and the reduction.
template <typename T, typename I>
Status enqueueLossFused(const KernelArgs &a, const LossShape &s,
                        double *losses, double *mean, cudaStream_t stream) {
  const T *x = a.in(0).as<T>();
  const I *target = a.in(1).as<I>();
  const T *dloss = a.in(2).as<T>();
  T *out = a.out(0).as<T>();
  T *dx = a.out(1).as<T>();
  int64_t count = s.n * s.positions;
  if (mean) {
    meanFactor<T, I><<<1, kReduceThreads, 0, stream>>>(dloss, target, count,
                                                       s, mean);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  if (count > 0) {
    if (s.positions == 1) {
      if (count > INT32_MAX)
        return a.error("more than 2^31 - 1 rows");
      crossEntropyFusedRows<T, I>
          <<<unsigned(count), rowThreads(s.classes), 0, stream>>>(
              dloss, mean, x, target, out, losses, dx, s);
    } else {
      int64_t blocks = (count + kBlockThreads - 1) / kBlockThreads;
      if (blocks > INT32_MAX)
        return a.error("more than 2^31 - 1 blocks of positions");
      crossEntropyFusedPositions<T, I>
          <<<unsigned(blocks), kBlockThreads, 0, stream>>>(
              dloss, mean, x, target, out, losses, dx, s);
    }
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  if (s.reduction != Reduction::None) {
    reduceLosses<T, I><<<1, kReduceThreads, 0, stream>>>(
        losses, target, count, s, s.reduction == Reduction::Mean, out);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  return Status::ok();
}

/// softmax_cross_entropy_fused (input, target, dloss) -> (loss, dinput).
Status lossFused(const KernelArgs &a, cudaStream_t stream) {
  LossShape s;
  CLEAVE_CHECK(ops::checkLossFused(a, s));
  const TensorRef &input = a.in(0), &target = a.in(1);
  return visitDeviceFloat(
      a, input.dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return ops::visitIndex(
            a, target.dtype,
            [&](auto index) -> Status {
              using I = typename decltype(index)::type;
              int64_t count = s.n * s.positions;
              double *losses = nullptr, *mean = nullptr;
              if (s.reduction != Reduction::None && count > 0)
                CLEAVE_CUDA_CHECK(cudaMallocAsync(
                    reinterpret_cast<void **>(&losses),
                    size_t(count) * sizeof(double), stream));
              if (s.reduction == Reduction::Mean) {
                cudaError_t err = cudaMallocAsync(
                    reinterpret_cast<void **>(&mean), sizeof(double), stream);
                if (err != cudaSuccess && losses)
                  (void)cudaFreeAsync(losses, stream);
                CLEAVE_CUDA_CHECK(err);
              }
              Status status =
                  enqueueLossFused<T, I>(a, s, losses, mean, stream);
              if (losses)
                (void)cudaFreeAsync(losses, stream);
              if (mean)
                (void)cudaFreeAsync(mean, stream);
              return status;
            },
            "target");
      },
      "input");
}

/// softmax_cross_entropy_grad (dloss, input, target) and nll_loss_grad
/// (dloss, target): the result is dinput.
template <bool CrossEntropy>
Status lossGrad(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &target = a.in(CrossEntropy ? 2 : 1);
  if (CrossEntropy) {
    CLEAVE_CHECK(a.expectDType(a.out(), a.in(1).dtype, "the result"));
    CLEAVE_CHECK(a.expectShape(a.out(), a.in(1).shape, "the result"));
  }
  LossShape s;
  CLEAVE_CHECK(ops::checkLossGrad(a, target, s));
  return visitDeviceFloat(
      a, CrossEntropy ? a.in(1).dtype : a.out().dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return ops::visitIndex(
            a, target.dtype,
            [&](auto index) -> Status {
              using I = typename decltype(index)::type;
              if (s.n * s.positions == 0 || s.classes == 0)
                return Status::ok();
              double *mean = nullptr;
              if (s.reduction == Reduction::Mean)
                CLEAVE_CUDA_CHECK(cudaMallocAsync(
                    reinterpret_cast<void **>(&mean), sizeof(double), stream));
              Status status =
                  enqueueLossGrad<T, I, CrossEntropy>(a, s, target, mean,
                                                      stream);
              if (mean)
                (void)cudaFreeAsync(mean, stream);
              return status;
            },
            "target");
      },
      CrossEntropy ? "input" : "the result");
}

} // namespace

namespace cleave::runtime::cuda {


Status softmaxCrossEntropyKernel(const KernelArgs &a, cudaStream_t stream) {
  return loss<true>(a, stream);
}

Status nllLossKernel(const KernelArgs &a, cudaStream_t stream) {
  return loss<false>(a, stream);
}

Status softmaxCrossEntropyGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return lossGrad<true>(a, stream);
}

Status nllLossGradKernel(const KernelArgs &a, cudaStream_t stream) {
  return lossGrad<false>(a, stream);
}

Status softmaxCrossEntropyFusedKernel(const KernelArgs &a,
                                      cudaStream_t stream) {
  return lossFused(a, stream);
}

} // namespace cleave::runtime::cuda
