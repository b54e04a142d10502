//===- losses.cu - CUDA kernel of softmax_cross_entropy -------------------===//
//
// The CUDA side of cpu::softmaxCrossEntropyKernel (runtime/cpu/losses.cpp)
// for f32, bf16 and f16: input [N, C, d...] against class ids target
// [N, d...] (i32 or i64), with reduction none, sum or mean and an optional
// ignore_index. Per position, logsumexp over the classes (a max pass and an
// exp-sum pass, in float) minus the target's logit, in double as on the CPU.
// Without d... (the common [N, C] case) one block owns a row; otherwise one
// thread owns a position and walks its classes (adjacent threads read
// adjacent positions). For sum and mean the position losses go to a
// stream-ordered scratch buffer of doubles and one block adds them up in a
// fixed order (deterministic), counting the targets that are not ignored
// (mean over none of them: 0 / 0 = NaN, as on the CPU). The CPU checks every
// target first; the device cannot refuse without a sync, so a target that is
// neither a class nor ignore_index gives a NaN loss.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using cpu::KernelArgs;

namespace {

enum class Reduction { None, Sum, Mean };

struct LossShape {
  int64_t n, classes, positions; // positions: the product of d...
  bool hasIgnore;
  int64_t ignoreIndex;
};

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

/// reduction and ignore_index, as the CPU reads them.
Status lossAttrs(const KernelArgs &a, Reduction &reduction, LossShape &s) {
  std::string name;
  CLEAVE_CHECK(a.stringAttr("reduction", name, "mean"));
  if (name == "none")
    reduction = Reduction::None;
  else if (name == "sum")
    reduction = Reduction::Sum;
  else if (name == "mean")
    reduction = Reduction::Mean;
  else
    return a.error("reduction must be \"none\", \"sum\" or \"mean\", got \"" +
                   name + "\"");
  s.hasIgnore = a.hasAttr("ignore_index");
  s.ignoreIndex = 0;
  if (s.hasIgnore)
    CLEAVE_CHECK(a.intAttr("ignore_index", s.ignoreIndex));
  return Status::ok();
}

/// Enqueues the position losses (into `losses` when not null, else into
/// the result) and, for a reduction, their sum.
template <typename T, typename I>
Status enqueueCrossEntropy(const KernelArgs &a, const LossShape &s,
                           Reduction reduction, double *losses,
                           cudaStream_t stream) {
  const T *x = a.in(0).as<T>();
  const I *target = a.in(1).as<I>();
  T *out = a.out().as<T>();
  int64_t count = s.n * s.positions;
  if (count > 0) {
    if (s.positions == 1) {
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

template <typename T, typename I>
Status crossEntropy(const KernelArgs &a, const LossShape &s,
                    Reduction reduction, cudaStream_t stream) {
  int64_t count = s.n * s.positions;
  double *losses = nullptr;
  if (reduction != Reduction::None && count > 0)
    CLEAVE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void **>(&losses),
                                      size_t(count) * sizeof(double), stream));
  Status status = enqueueCrossEntropy<T, I>(a, s, reduction, losses, stream);
  if (losses)
    (void)cudaFreeAsync(losses, stream);
  return status;
}

} // namespace

namespace cleave::runtime::cuda {

Status softmaxCrossEntropyKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &input = a.in(0), &target = a.in(1);
  if (input.rank() < 2)
    return a.error("input must have rank 2 or more ([N, C, d...]), got shape " +
                   cpu::shapeString(input.shape));
  LossShape s;
  s.n = input.shape[0];
  s.classes = input.shape[1];
  s.positions = cpu::product(input.shape, 2);
  cpu::Shape targetShape{s.n};
  targetShape.insert(targetShape.end(), input.shape.begin() + 2,
                     input.shape.end());
  CLEAVE_CHECK(a.expectShape(target, targetShape, "target"));
  Reduction reduction;
  CLEAVE_CHECK(lossAttrs(a, reduction, s));
  CLEAVE_CHECK(a.expectDType(a.out(), input.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(
      a.out(), reduction == Reduction::None ? targetShape : cpu::Shape{},
      "the result"));
  return visitDeviceFloat(
      a, input.dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return cpu::visitIndex(
            a, target.dtype,
            [&](auto index) -> Status {
              using I = typename decltype(index)::type;
              return crossEntropy<T, I>(a, s, reduction, stream);
            },
            "target");
      },
      "input");
}

} // namespace cleave::runtime::cuda
