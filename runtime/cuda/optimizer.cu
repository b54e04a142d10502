//===- optimizer.cu - CUDA kernels of adamw, sgd and gradient buffers -----===//
//
// cleave.adamw as runtime/cpu/optimizer.cpp computes it (torch 1.13's
// single-tensor AdamW after clip_grad_norm_ and a LambdaLR schedule), for
// many parameters in one launch. The parameters travel as a table in the
// kernel's parameter memory (up to 512 of them: kernel parameters may take
// 32 KB since CUDA 12.1), read in place through __grid_constant__; each
// block updates one chunk of 4096 elements of one parameter and finds its
// parameter by binary search over the table's first chunks.
//
// step and sum_squares live on the device, so the schedule (double, as
// Python computes it) and the clipping coefficient (float, as torch's
// kernels compute it) are computed by each block's first thread, not on the
// host: nothing waits. Every floating-point operation is written as an
// intrinsic with its rounding (__fmul_rn, __fmaf_rn, ...) so that nvcc
// contracts nothing: the only fused multiply-adds are those that stand for
// torch's, as on the CPU (compiled there with -ffp-contract=off). The
// result is then the CPU's bit for bit, up to the last bit of the device's
// double pow and cos, which only matters when it moves a rounding to float.
//
// sgd is the same for one parameter: a grid-stride loop whose blocks
// compute the step's scalars first, each element through the CPU's fp32
// operations (written as intrinsics). accumulate_grad adds a gradient into
// its buffer elementwise (16-bit values in float). sum_squares adds the
// squares of every element of its operands in double over fixed blocks of
// 2^14 elements (one CUDA block each, the operands in a table in kernel
// parameter memory as adamw's), then one block adds the blocks' partial
// sums in a fixed order into the f32 result: deterministic, and the CPU's
// value up to the order of double additions. countNonFinite and
// scaleInPlace serve the executor's loss scaling.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/OptimizerShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;

namespace {

constexpr int kMaxTensorsPerLaunch = 512;
constexpr int kThreads = 256;
constexpr int64_t kChunk = 4096; // elements per block

enum class GradType : int32_t { F32, BF16, F16 };

/// One parameter of the table; zero-sized parameters are left out, so the
/// first chunks strictly increase.
struct TensorDesc {
  const void *grad;
  float *param, *expAvg, *expAvgSq;
  int64_t n;
  int64_t firstChunk;
  GradType gradType;
};

/// The attributes of the schedule and clipping adamw and sgd share, as the
/// CPU reads them.
struct Schedule {
  double lr, weightDecay, maxNorm, minLr;
  int64_t warmup, decay;
  bool clipping; // sum_squares given and max_norm > 0
  float maxNormF;
};

/// adamw's attributes.
struct Hyper : Schedule {
  double beta1, beta2;
  float beta1F, oneMinusBeta1, beta2F, oneMinusBeta2, eps;
};

struct Launch {
  Hyper h;
  const int64_t *step;
  const float *sumSquares;
  int32_t count;
  TensorDesc tensors[kMaxTensorsPerLaunch];
};
static_assert(sizeof(Launch) <= 32764, "kernel parameters are at most 32764 "
                                       "bytes");

/// This step's scalars, computed once per block.
struct Scalars {
  bool skip; // step < 1
  float clip, decay, bc2Sqrt, negStepSize;
};

/// optimizer.cpp's scheduledLr, operation for operation in double.
__device__ double scheduledLr(double lr, int64_t step, int64_t warmup,
                              int64_t decay, double minLr) {
  int64_t i = step - 1;
  if (i < warmup)
    return __dmul_rn(lr, __ddiv_rn(double(i + 1), double(warmup)));
  if (decay > warmup && lr > 0) {
    double p = fmin(1.0, __ddiv_rn(double(i - warmup), double(decay - warmup)));
    double cosine = __dadd_rn(1.0, cos(__dmul_rn(M_PI, p)));
    double factor = __dadd_rn(
        minLr, __ddiv_rn(__dmul_rn(__dsub_rn(lr, minLr), cosine), 2.0));
    return __dmul_rn(lr, __ddiv_rn(factor, lr));
  }
  return lr;
}

/// optimizer.cpp's clipCoefficient: torch's fp32 clip_grad_norm_.
__device__ float clipCoefficient(float sumSquares, float maxNorm) {
  float totalNorm = __fsqrt_rn(sumSquares);
  float coef = __fmul_rn(__fdiv_rn(1.0f, __fadd_rn(totalNorm, 1e-6f)), maxNorm);
  return coef > 1.0f ? 1.0f : coef;
}

__device__ void computeScalars(const Launch &launch, Scalars &s) {
  const Hyper &h = launch.h;
  int64_t step = *launch.step;
  s.skip = step < 1;
  if (s.skip)
    return;
  double lr = scheduledLr(h.lr, step, h.warmup, h.decay, h.minLr);
  s.clip = h.clipping ? clipCoefficient(*launch.sumSquares, h.maxNormF) : 1.0f;
  s.decay = __double2float_rn(__dsub_rn(1.0, __dmul_rn(lr, h.weightDecay)));
  double steps = double(step); // torch keeps the step as a float tensor
  s.bc2Sqrt =
      __double2float_rn(__dsqrt_rn(__dsub_rn(1.0, pow(h.beta2, steps))));
  s.negStepSize =
      __double2float_rn(-__ddiv_rn(lr, __dsub_rn(1.0, pow(h.beta1, steps))));
}

/// optimizer.cpp's adamwRange over elements [begin, end) of one parameter,
/// the block's threads striding through them.
template <typename G>
__device__ void adamwRange(const TensorDesc &t, const Hyper &h,
                           const Scalars &s, int64_t begin, int64_t end) {
  const G *grad = static_cast<const G *>(t.grad);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float g = toFloat(grad[i]);
    if (h.clipping)
      g = __fmul_rn(g, s.clip);               // grad.mul_(coef)
    float p = __fmul_rn(t.param[i], s.decay); // param.mul_
    float m = __fmaf_rn(g, h.oneMinusBeta1, __fmul_rn(t.expAvg[i], h.beta1F));
    float v = __fmaf_rn(__fmul_rn(h.oneMinusBeta2, g), g,
                        __fmul_rn(t.expAvgSq[i], h.beta2F));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2Sqrt), h.eps);
    t.param[i] = __fadd_rn(p, __fdiv_rn(__fmul_rn(s.negStepSize, m), denom));
    t.expAvg[i] = m;
    t.expAvgSq[i] = v;
  }
}

/// One block per chunk of kChunk elements of one parameter.
__global__ void __launch_bounds__(kThreads)
    adamwChunks(const __grid_constant__ Launch launch) {
  __shared__ Scalars s;
  if (threadIdx.x == 0)
    computeScalars(launch, s);
  __syncthreads();
  if (s.skip)
    return;
  int64_t chunk = blockIdx.x;
  int lo = 0, hi = launch.count - 1; // the last tensor starting at or before
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (launch.tensors[mid].firstChunk <= chunk)
      lo = mid;
    else
      hi = mid - 1;
  }
  const TensorDesc &t = launch.tensors[lo];
  int64_t begin = (chunk - t.firstChunk) * kChunk;
  int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  switch (t.gradType) {
  case GradType::F32:
    adamwRange<float>(t, launch.h, s, begin, end);
    break;
  case GradType::BF16:
    adamwRange<__nv_bfloat16>(t, launch.h, s, begin, end);
    break;
  case GradType::F16:
    adamwRange<__half>(t, launch.h, s, begin, end);
    break;
  }
}

std::string typeText(const TensorRef &t) {
  return std::string(dtypeName(t.dtype)) + ops::shapeString(t.shape);
}

Status expectScalar(const KernelArgs &a, const TensorRef &t, DType dtype,
                    const char *what) {
  if (t.dtype == dtype && t.rank() == 0 && t.data)
    return Status::ok();
  return a.error(std::string(what) + " must be an " + dtypeName(dtype) +
                 " scalar, got " + typeText(t) +
                 (t.data ? "" : " without data"));
}

/// The schedule's and clipping's attributes, with the CPU's defaults and
/// checks.
Status readSchedule(const KernelArgs &a, bool haveSumSquares, Schedule &h) {
  CLEAVE_CHECK(a.floatAttr("lr", h.lr));
  CLEAVE_CHECK(a.floatAttr("weight_decay", h.weightDecay, 0.0));
  CLEAVE_CHECK(a.floatAttr("max_norm", h.maxNorm, 0.0));
  CLEAVE_CHECK(a.intAttr("warmup_steps", h.warmup, 0));
  CLEAVE_CHECK(a.intAttr("decay_steps", h.decay, 0));
  CLEAVE_CHECK(a.floatAttr("min_lr", h.minLr, 0.0));
  if (h.warmup < 0 || h.decay < 0)
    return a.error("warmup_steps " + std::to_string(h.warmup) +
                   " and decay_steps " + std::to_string(h.decay) +
                   " must not be negative");
  h.clipping = haveSumSquares && h.maxNorm > 0;
  h.maxNormF = float(h.maxNorm);
  return Status::ok();
}

/// adamw's attributes, with the CPU's defaults and checks.
Status readHyper(const KernelArgs &a, bool haveSumSquares, Hyper &h) {
  CLEAVE_CHECK(readSchedule(a, haveSumSquares, h));
  CLEAVE_CHECK(a.floatAttr("beta1", h.beta1, 0.9));
  CLEAVE_CHECK(a.floatAttr("beta2", h.beta2, 0.999));
  double eps;
  CLEAVE_CHECK(a.floatAttr("eps", eps, 1e-8));
  h.beta1F = float(h.beta1);
  h.oneMinusBeta1 = float(1.0 - h.beta1);
  h.beta2F = float(h.beta2);
  h.oneMinusBeta2 = float(1.0 - h.beta2);
  h.eps = float(eps);
  return Status::ok();
}

/// The CPU's checks of one parameter's grad and state.
Status checkParameter(const KernelArgs &a, const AdamWTensors &t,
                      const std::string &which, GradType &gradType) {
  auto fail = [&](const std::string &message) {
    return a.error(which + message);
  };
  auto expectF32 = [&](const TensorRef &x, const char *what) -> Status {
    if (x.dtype != DType::F32)
      return fail(std::string(what) + " has element type " +
                  dtypeName(x.dtype) + ", expected f32");
    if (x.shape != t.param.shape)
      return fail(std::string(what) + " has shape " +
                  ops::shapeString(x.shape) + ", expected " +
                  ops::shapeString(t.param.shape));
    if (!x.data && x.numElements() != 0)
      return fail(std::string(what) + " has no data");
    return Status::ok();
  };
  CLEAVE_CHECK(expectF32(t.param, "the parameter"));
  if (t.grad.shape != t.param.shape)
    return fail("grad is " + typeText(t.grad) + ", but the parameter is " +
                typeText(t.param));
  CLEAVE_CHECK(expectF32(t.expAvg, "exp_avg"));
  CLEAVE_CHECK(expectF32(t.expAvgSq, "exp_avg_sq"));
  if (!t.grad.data && t.grad.numElements() != 0)
    return fail("grad has no data");
  switch (t.grad.dtype) {
  case DType::F32:
    gradType = GradType::F32;
    return Status::ok();
  case DType::BF16:
    gradType = GradType::BF16;
    return Status::ok();
  case DType::F16:
    gradType = GradType::F16;
    return Status::ok();
  default:
    return fail(std::string("no CUDA kernel for element type ") +
                dtypeName(t.grad.dtype) +
                " (grad); grads are f32, bf16 or "
                "f16");
  }
}

Status adamwOn(const KernelArgs &a, const TensorRef &step,
               const TensorRef &sumSquares,
               const std::vector<AdamWTensors> &params, cudaStream_t stream) {
  CLEAVE_CHECK(expectScalar(a, step, DType::I64, "step"));
  if (sumSquares.data)
    CLEAVE_CHECK(expectScalar(a, sumSquares, DType::F32, "sum_squares"));
  Launch launch;
  CLEAVE_CHECK(readHyper(a, sumSquares.data != nullptr, launch.h));
  launch.step = step.as<int64_t>();
  launch.sumSquares = launch.h.clipping ? sumSquares.as<float>() : nullptr;

  std::vector<TensorDesc> tensors;
  for (size_t k = 0; k < params.size(); ++k) {
    const AdamWTensors &t = params[k];
    std::string which =
        params.size() == 1 ? "" : "parameter " + std::to_string(k) + ": ";
    TensorDesc desc;
    CLEAVE_CHECK(checkParameter(a, t, which, desc.gradType));
    desc.n = t.param.numElements();
    if (desc.n == 0)
      continue;
    desc.grad = t.grad.data;
    desc.param = t.param.as<float>();
    desc.expAvg = t.expAvg.as<float>();
    desc.expAvgSq = t.expAvgSq.as<float>();
    tensors.push_back(desc);
  }
  // One launch per kMaxTensorsPerLaunch parameters.
  for (size_t first = 0; first < tensors.size();
       first += kMaxTensorsPerLaunch) {
    size_t count =
        std::min<size_t>(kMaxTensorsPerLaunch, tensors.size() - first);
    int64_t chunks = 0;
    for (size_t k = 0; k < count; ++k) {
      launch.tensors[k] = tensors[first + k];
      launch.tensors[k].firstChunk = chunks;
      chunks += (launch.tensors[k].n + kChunk - 1) / kChunk;
    }
    if (chunks > INT32_MAX)
      return a.error("more than 2^31 - 1 chunks of " + std::to_string(kChunk) +
                     " elements in one launch");
    launch.count = int32_t(count);
    adamwChunks<<<unsigned(chunks), kThreads, 0, stream>>>(launch);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

/// One sgd launch: its attributes and operands.
struct SgdLaunch {
  Schedule h;
  bool decays;   // torch skips the add when weight_decay == 0
  float weightDecay, momentum;
  const int64_t *step;
  const float *sumSquares;
  float *param, *buf; // buf: the momentum buffer, null without momentum
  int64_t n;
};

/// optimizer.cpp's sgdRange, the blocks striding through the parameter;
/// each block's first thread computes the step's scalars.
template <typename G>
__global__ void __launch_bounds__(kThreads)
    sgdElements(const G *__restrict__ grad, const __grid_constant__ SgdLaunch l) {
  __shared__ bool skip, firstStep;
  __shared__ float clip, negLr;
  if (threadIdx.x == 0) {
    int64_t step = *l.step;
    skip = step < 1;
    if (!skip) {
      double lr =
          scheduledLr(l.h.lr, step, l.h.warmup, l.h.decay, l.h.minLr);
      clip = l.h.clipping ? clipCoefficient(*l.sumSquares, l.h.maxNormF) : 1.0f;
      negLr = __double2float_rn(-lr);
      firstStep = step == 1;
    }
  }
  __syncthreads();
  if (skip)
    return;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = toFloat(grad[i]);
    if (l.h.clipping)
      g = __fmul_rn(g, clip);
    if (l.decays)
      g = __fmaf_rn(l.param[i], l.weightDecay, g); // d_p.add(param)
    if (l.buf) {
      // buf.mul_(momentum).add_(d_p, alpha=1): an FMA by 1 is an add.
      float b = firstStep ? g : __fadd_rn(__fmul_rn(l.buf[i], l.momentum), g);
      l.buf[i] = b;
      g = b;
    }
    l.param[i] = __fmaf_rn(g, negLr, l.param[i]); // param.add_
  }
}

//===----------------------------------------------------------------------===//
// accumulate_grad, sum_squares and the loss scaling's helpers
//===----------------------------------------------------------------------===//

/// acc += grad, in float for 16-bit types.
template <typename TA, typename TG>
__global__ void accumulateElements(TA *__restrict__ acc,
                                   const TG *__restrict__ grad, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    acc[i] = fromFloat<TA>(__fadd_rn(toFloat(acc[i]), toFloat(grad[i])));
}

/// Elements per partial sum of squares, as on the CPU.
constexpr int64_t kSquaresBlock = 1 << 14;
constexpr int kMaxSquaresOperands = 512;

enum class FloatType : int32_t { F32, BF16, F16 };

struct SquaresOperand {
  const void *x;
  int64_t n, firstBlock; // firstBlock: within the launch
  FloatType type;
};

struct SquaresLaunch {
  int32_t count;
  SquaresOperand operands[kMaxSquaresOperands];
};
static_assert(sizeof(SquaresLaunch) <= 32764, "kernel parameters are at most "
                                              "32764 bytes");

/// The sum of `v` over the block (kThreads threads), in a fixed order; the
/// result is thread 0's.
__device__ double blockSumDouble(double v) {
  __shared__ double sums[kThreads];
  sums[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride; stride >>= 1) {
    if (int(threadIdx.x) < stride)
      sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  return sums[0];
}

template <typename T>
__device__ double squaresOf(const void *x, int64_t begin, int64_t end) {
  const T *p = static_cast<const T *>(x);
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    double v = double(toFloat(p[i]));
    acc += v * v;
  }
  return acc;
}

/// One block per block of kSquaresBlock elements of one operand: its sum
/// of squares (double) into partial[blockIdx.x].
__global__ void __launch_bounds__(kThreads)
    squaresBlocks(const __grid_constant__ SquaresLaunch l, double *partial) {
  int64_t block = blockIdx.x;
  int lo = 0, hi = l.count - 1; // the last operand starting at or before
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (l.operands[mid].firstBlock <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  const SquaresOperand &t = l.operands[lo];
  int64_t begin = (block - t.firstBlock) * kSquaresBlock;
  int64_t end = begin + kSquaresBlock < t.n ? begin + kSquaresBlock : t.n;
  double acc = 0;
  switch (t.type) {
  case FloatType::F32:
    acc = squaresOf<float>(t.x, begin, end);
    break;
  case FloatType::BF16:
    acc = squaresOf<__nv_bfloat16>(t.x, begin, end);
    break;
  case FloatType::F16:
    acc = squaresOf<__half>(t.x, begin, end);
    break;
  }
  acc = blockSumDouble(acc);
  if (threadIdx.x == 0)
    partial[block] = acc;
}

/// out = float(the sum of partial[0, blocks)), by one block in a fixed
/// order.
__global__ void __launch_bounds__(kThreads)
    squaresTotal(const double *__restrict__ partial, int64_t blocks,
                 float *out) {
  double acc = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x)
    acc += partial[b];
  acc = blockSumDouble(acc);
  if (threadIdx.x == 0)
    out[0] = float(acc);
}

Status enqueueSumSquares(const KernelArgs &a,
                         const std::vector<SquaresOperand> &operands,
                         int64_t blocks, double *partial, cudaStream_t stream) {
  SquaresLaunch launch;
  int64_t base = 0; // the first block of this launch
  for (size_t first = 0; first < operands.size();
       first += kMaxSquaresOperands) {
    size_t count =
        std::min<size_t>(kMaxSquaresOperands, operands.size() - first);
    int64_t chunks = 0;
    for (size_t k = 0; k < count; ++k) {
      launch.operands[k] = operands[first + k];
      launch.operands[k].firstBlock = chunks;
      chunks += (launch.operands[k].n + kSquaresBlock - 1) / kSquaresBlock;
    }
    if (chunks > INT32_MAX)
      return a.error("more than 2^31 - 1 blocks of " +
                     std::to_string(kSquaresBlock) + " elements in one launch");
    launch.count = int32_t(count);
    squaresBlocks<<<unsigned(chunks), kThreads, 0, stream>>>(launch,
                                                            partial + base);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    base += chunks;
  }
  squaresTotal<<<1, kThreads, 0, stream>>>(partial, blocks,
                                           a.out().as<float>());
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

__global__ void nonFiniteElements(const float *__restrict__ x, int64_t n,
                                  unsigned *flag) {
  bool bad = false;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    bad |= !isfinite(x[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    *flag = 1u;
}

__global__ void scaleElements(float *x, int64_t n, float factor) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __fmul_rn(x[i], factor);
}

/// The checks of countNonFinite's and scaleInPlace's tensor.
Status checkF32Gradient(const char *what, const TensorRef &grad) {
  if (grad.dtype != DType::F32)
    return Status::error(std::string(what) + ": expected an f32 tensor, got " +
                         typeText(grad));
  if (!grad.data && grad.numElements() != 0)
    return Status::error(std::string(what) + ": the tensor " +
                         typeText(grad) + " has no data");
  return Status::ok();
}

} // namespace

Status cleave::runtime::adamwMultiTensor(
    const Attributes &attributes, const TensorRef &step,
    const TensorRef &sumSquares, const std::vector<AdamWTensors> &params,
    cudaStream_t stream) {
  static const std::string op = "adamw";
  const std::vector<TensorRef> none;
  Status status = adamwOn(KernelArgs{op, attributes, none, none}, step,
                          sumSquares, params, stream);
  if (!status.isOk() && status.message().compare(0, 7, "adamw: "))
    return Status::error("adamw: " + status.message());
  return status;
}

Status cleave::runtime::checkAdamW(const Attributes &attributes,
                                   const TensorRef &step,
                                   const TensorRef &sumSquares,
                                   const AdamWTensors &param) {
  static const std::string op = "adamw";
  const std::vector<TensorRef> none;
  KernelArgs a{op, attributes, none, none};
  CLEAVE_CHECK(expectScalar(a, step, DType::I64, "step"));
  if (sumSquares.data)
    CLEAVE_CHECK(expectScalar(a, sumSquares, DType::F32, "sum_squares"));
  Hyper h;
  CLEAVE_CHECK(readHyper(a, sumSquares.data != nullptr, h));
  GradType gradType;
  return checkParameter(a, param, "", gradType);
}

namespace cleave::runtime::cuda {

/// cleave.adamw(grad, step, sum_squares?) -> (param, exp_avg, exp_avg_sq),
/// the results updated in place: the multi-tensor kernel with one parameter.
Status adamwKernel(const KernelArgs &a, cudaStream_t stream) {
  AdamWTensors t{a.in(0), a.out(0), a.out(1), a.out(2)};
  return adamwOn(a, a.in(1), a.has(2) ? a.in(2) : TensorRef(), {t}, stream);
}


/// cleave.accumulate_grad(grad) -> acc, acc += grad in place.
Status accumulateGradKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(ops::checkAccumulateGrad(a));
  const TensorRef &grad = a.in(0), &acc = a.out();
  int64_t n = acc.numElements();
  return visitDeviceFloat(
      a, acc.dtype,
      [&](auto accTag) -> Status {
        using TA = typename decltype(accTag)::type;
        return visitDeviceFloat(
            a, grad.dtype,
            [&](auto gradTag) -> Status {
              using TG = typename decltype(gradTag)::type;
              if (n == 0)
                return Status::ok();
              accumulateElements<TA, TG>
                  <<<blocksFor(n), kBlockThreads, 0, stream>>>(
                      acc.as<TA>(), grad.as<TG>(), n);
              CLEAVE_CUDA_CHECK(cudaGetLastError());
              return Status::ok();
            },
            "grad");
      },
      "the gradient buffer");
}

/// cleave.sum_squares(x...) -> f32 scalar: the sum of the squares of
/// every element of every operand.
Status sumSquaresKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(expectScalar(a, a.out(), DType::F32, "the result"));
  std::vector<SquaresOperand> operands;
  int64_t blocks = 0;
  for (size_t k = 0; k < a.inputs.size(); ++k) {
    const TensorRef &x = a.in(k);
    SquaresOperand op;
    switch (x.dtype) {
    case DType::F32:
      op.type = FloatType::F32;
      break;
    case DType::BF16:
      op.type = FloatType::BF16;
      break;
    case DType::F16:
      op.type = FloatType::F16;
      break;
    default:
      return a.error(std::string("no CUDA kernel for element type ") +
                     dtypeName(x.dtype) + " (operand " + std::to_string(k) +
                     "); the CUDA kernels take f32, bf16 and f16");
    }
    op.x = x.data;
    op.n = x.numElements();
    op.firstBlock = 0;
    if (op.n == 0)
      continue;
    operands.push_back(op);
    blocks += (op.n + kSquaresBlock - 1) / kSquaresBlock;
  }
  double *partial = nullptr;
  if (blocks > 0)
    CLEAVE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void **>(&partial),
                                      size_t(blocks) * sizeof(double), stream));
  Status status = enqueueSumSquares(a, operands, blocks, partial, stream);
  if (partial)
    (void)cudaFreeAsync(partial, stream);
  return status;
}

/// cleave.sgd(grad, step, sum_squares?) -> (param, momentum_buffer?), the
/// results updated in place. A step below 1 (an error on the CPU, which
/// reads it) leaves them unchanged.
Status sgdKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(ops::checkSgdResults(a));
  const TensorRef &param = a.out(0), &grad = a.in(0);
  CLEAVE_CHECK(a.expectDType(param, DType::F32, "the parameter"));
  if (grad.shape != param.shape)
    return a.error("grad is " + typeText(grad) + ", but the parameter is " +
                   typeText(param));
  CLEAVE_CHECK(expectScalar(a, a.in(1), DType::I64, "step"));
  bool haveSumSquares = a.has(2);
  SgdLaunch l;
  CLEAVE_CHECK(readSchedule(a, haveSumSquares, l.h));
  if (haveSumSquares)
    CLEAVE_CHECK(expectScalar(a, a.in(2), DType::F32, "sum_squares"));
  double momentum;
  CLEAVE_CHECK(ops::sgdMomentum(a, momentum));
  l.decays = l.h.weightDecay != 0;
  l.weightDecay = float(l.h.weightDecay);
  l.momentum = float(momentum);
  l.step = a.in(1).as<int64_t>();
  l.sumSquares = l.h.clipping ? a.in(2).as<float>() : nullptr;
  l.param = param.as<float>();
  l.buf = a.outputs.size() == 2 ? a.out(1).as<float>() : nullptr;
  l.n = param.numElements();
  return visitDeviceFloat(
      a, grad.dtype,
      [&](auto tag) -> Status {
        using G = typename decltype(tag)::type;
        if (l.n == 0)
          return Status::ok();
        sgdElements<G><<<blocksFor(l.n, kThreads), kThreads, 0, stream>>>(
            grad.as<G>(), l);
        CLEAVE_CUDA_CHECK(cudaGetLastError());
        return Status::ok();
      },
      "grad");
}

/// Sets *deviceFlag to 1 when an element of the f32 tensor `grad` is not
/// finite (NaN or infinite); never clears it.
Status countNonFinite(const TensorRef &grad, unsigned *deviceFlag,
                      cudaStream_t stream) {
  CLEAVE_CHECK(checkF32Gradient("countNonFinite", grad));
  if (!deviceFlag)
    return Status::error("countNonFinite: no flag to set");
  int64_t n = grad.numElements();
  if (n == 0)
    return Status::ok();
  nonFiniteElements<<<blocksFor(n), kBlockThreads, 0, stream>>>(
      grad.as<float>(), n, deviceFlag);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

/// grad *= factor, elementwise in f32.
Status scaleInPlace(const TensorRef &grad, float factor, cudaStream_t stream) {
  CLEAVE_CHECK(checkF32Gradient("scaleInPlace", grad));
  int64_t n = grad.numElements();
  if (n == 0)
    return Status::ok();
  scaleElements<<<blocksFor(n), kBlockThreads, 0, stream>>>(grad.as<float>(),
                                                            n, factor);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

} // namespace cleave::runtime::cuda
