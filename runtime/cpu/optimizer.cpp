//===- optimizer.cpp - CPU kernels of gradients and the optimizer step ----===//
//
// accumulate_grad, sum_squares, adamw and sgd (ir/CleaveOps.td, "Training
// state and the optimizer"). adamw and sgd reproduce torch 1.13's
// single-tensor torch.optim.AdamW and torch.optim.SGD in fp32, after
// clip_grad_norm_ and a LambdaLR schedule: the scalars are computed in
// double as Python computes them and rounded to float where torch hands
// them to a float kernel, and each element goes through the fp32 operations
// of torch's CPU kernels in their order. torch fuses the multiply and add of
// add_(x, alpha=a) and addcmul_ into one FMA; so do we, with fmaf, and
// nowhere else (this file is compiled with -ffp-contract=off), so the
// result does not depend on whether the CPU has FMA instructions.
//
// The updates are elementwise and threaded over contiguous chunks;
// sum_squares adds fixed blocks in a fixed order, so it gives the same bits
// whatever the thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/OptimizerShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// Calls f(Tag<T>{}) for a gradient's element type: f32, or a 16-bit
/// float read as float (mixed precision with fp32 master weights).
template <typename F>
Status visitGrad(const KernelArgs &a, DType dtype, F &&f, const char *what) {
  switch (dtype) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::F16:
    return f(Tag<Half>{});
  case DType::BF16:
    return f(Tag<BFloat16>{});
  default:
    return a.unsupported(dtype, what);
  }
}

Status expectScalar(const KernelArgs &a, const TensorRef &t, DType dtype,
                    const char *what) {
  if (t.dtype == dtype && t.rank() == 0)
    return Status::ok();
  return a.error(std::string(what) + " must be an " + dtypeName(dtype) +
                 " scalar, got " + typeText(t));
}

//===----------------------------------------------------------------------===//
// accumulate_grad
//===----------------------------------------------------------------------===//

template <typename TG, typename Tg>
void accumulate(TG *acc, const Tg *grad, int64_t n) {
  parallelRange(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      acc[i] = store<TG>(Compute<TG>(load(acc[i]) + load(grad[i])));
  });
}

//===----------------------------------------------------------------------===//
// sum_squares
//===----------------------------------------------------------------------===//

/// Elements per partial sum: the partial sums, and so their total, do not
/// depend on how many threads computed them.
constexpr int64_t kSquaresBlock = 1 << 14;

template <typename T> double sumSquaresOf(const T *x, int64_t n) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) {
    double v = double(load(x[i]));
    acc += v * v;
  }
  return acc;
}

//===----------------------------------------------------------------------===//
// The update's scalars
//===----------------------------------------------------------------------===//

/// What adamw and sgd share: the attributes of the schedule and clipping
/// and what they give for this step.
struct Update {
  int64_t step = 0;          // 1-based
  double lr = 0;             // this step's, from the schedule
  double weightDecay = 0;
  bool clipping = false;     // whether the gradient is multiplied by clip
  float clip = 1.0f;         // clip_grad_norm_'s clip_coef_clamped
};

/// The learning rate of 1-based step `step`: linear warmup over
/// `warmup` steps, then a cosine from lr to minLr reached at step `decay`
/// (when decay > warmup), then constant. Computed as torch's LambdaLR
/// computes it from a factor of lr (models/reference.py), so that both
/// have the same double.
double scheduledLr(double lr, int64_t step, int64_t warmup, int64_t decay,
                   double minLr) {
  int64_t i = step - 1;
  if (i < warmup)
    return lr * (double(i + 1) / double(warmup));
  if (decay > warmup && lr > 0) {
    double p = std::min(1.0, double(i - warmup) / double(decay - warmup));
    return lr * ((minLr + (lr - minLr) * (1.0 + std::cos(M_PI * p)) / 2.0) /
                 lr);
  }
  return lr;
}

/// clip_grad_norm_'s coefficient from the sum of squares, in torch's fp32
/// operations: total_norm + 1e-6, then max_norm / that as reciprocal() *
/// max_norm (Tensor.__rtruediv__), then clamp(max=1) (NaN stays NaN).
float clipCoefficient(float sumSquares, double maxNorm) {
  float totalNorm = std::sqrt(sumSquares);
  float coef = (1.0f / (totalNorm + 1e-6f)) * float(maxNorm);
  return coef > 1.0f ? 1.0f : coef;
}

/// Reads the attributes and operands adamw and sgd share: grad (input 0)
/// against the parameter (output 0), step (input 1) and sum_squares
/// (input 2, optional).
Status readUpdate(const KernelArgs &a, Update &u) {
  const TensorRef &param = a.out(0), &grad = a.in(0);
  CLEAVE_CHECK(a.expectDType(param, DType::F32, "the parameter"));
  if (grad.shape != param.shape)
    return a.error("grad is " + typeText(grad) + ", but the parameter is " +
                   typeText(param));
  CLEAVE_CHECK(expectScalar(a, a.in(1), DType::I64, "step"));
  u.step = a.in(1).as<int64_t>()[0];
  if (u.step < 1)
    return a.error("step is " + std::to_string(u.step) +
                   ", expected the 1-based number of the step (at least 1)");

  double lr, maxNorm, minLr;
  int64_t warmup, decay;
  CLEAVE_CHECK(a.floatAttr("lr", lr));
  CLEAVE_CHECK(a.floatAttr("weight_decay", u.weightDecay, 0.0));
  CLEAVE_CHECK(a.floatAttr("max_norm", maxNorm, 0.0));
  CLEAVE_CHECK(a.intAttr("warmup_steps", warmup, 0));
  CLEAVE_CHECK(a.intAttr("decay_steps", decay, 0));
  CLEAVE_CHECK(a.floatAttr("min_lr", minLr, 0.0));
  if (warmup < 0 || decay < 0)
    return a.error("warmup_steps " + std::to_string(warmup) +
                   " and decay_steps " + std::to_string(decay) +
                   " must not be negative");
  u.lr = scheduledLr(lr, u.step, warmup, decay, minLr);

  if (a.has(2)) {
    CLEAVE_CHECK(expectScalar(a, a.in(2), DType::F32, "sum_squares"));
    if (maxNorm > 0) {
      u.clipping = true;
      u.clip = clipCoefficient(a.in(2).as<float>()[0], maxNorm);
    }
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

/// torch's single-tensor AdamW, its Python scalars rounded to float as its
/// kernels receive them.
struct AdamWScalars {
  bool clipping;
  float clip;
  float decay;        // param.mul_(1 - lr * weight_decay)
  float beta1, oneMinusBeta1;
  float beta2, oneMinusBeta2;
  float bc2Sqrt;      // math.sqrt(1 - beta2 ** step)
  float eps;
  float negStepSize;  // -lr / (1 - beta1 ** step)
};

template <typename G>
CLEAVE_ALWAYS_INLINE void adamwRange(const G *grad, float *p, float *m,
                                     float *v, const AdamWScalars &s,
                                     int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float g = load(grad[i]);
    if (s.clipping)
      g = g * s.clip;                                    // grad.mul_(coef)
    float pi = p[i] * s.decay;                           // param.mul_
    float mi = __builtin_fmaf(g, s.oneMinusBeta1, m[i] * s.beta1);
    float vi = __builtin_fmaf(s.oneMinusBeta2 * g, g, v[i] * s.beta2);
    float denom = std::sqrt(vi) / s.bc2Sqrt + s.eps;
    p[i] = pi + s.negStepSize * mi / denom;              // addcdiv_
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename G>
CLEAVE_TARGET_AVX2 void adamwRangeAvx2(const G *grad, float *p, float *m,
                                       float *v, const AdamWScalars &s,
                                       int64_t begin, int64_t end) {
  adamwRange(grad, p, m, v, s, begin, end);
}

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

struct SgdScalars {
  bool clipping;
  float clip;
  bool decays;        // torch skips the add when weight_decay == 0
  float weightDecay;
  bool momentum;
  bool firstStep;     // the momentum buffer starts as a clone of the grad
  float momentumFactor;
  float negLr;
};

template <typename G>
CLEAVE_ALWAYS_INLINE void sgdRange(const G *grad, float *p, float *buf,
                                   const SgdScalars &s, int64_t begin,
                                   int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float g = load(grad[i]);
    if (s.clipping)
      g = g * s.clip;
    if (s.decays)
      g = __builtin_fmaf(p[i], s.weightDecay, g);         // d_p.add(param)
    if (s.momentum) {
      // buf.mul_(momentum).add_(d_p, alpha=1): an FMA by 1 is an add.
      float b = s.firstStep ? g : buf[i] * s.momentumFactor + g;
      buf[i] = b;
      g = b;
    }
    p[i] = __builtin_fmaf(g, s.negLr, p[i]);              // param.add_
  }
}

template <typename G>
CLEAVE_TARGET_AVX2 void sgdRangeAvx2(const G *grad, float *p, float *buf,
                                     const SgdScalars &s, int64_t begin,
                                     int64_t end) {
  sgdRange(grad, p, buf, s, begin, end);
}

} // namespace

Status cpu::accumulateGradKernel(const KernelArgs &a) {
  const TensorRef &grad = a.in(0), &acc = a.out();
  CLEAVE_CHECK(checkAccumulateGrad(a));
  int64_t n = acc.numElements();
  return visitFloat(
      a, acc.dtype,
      [&](auto accTag) {
        using TG = typename decltype(accTag)::type;
        return visitFloat(
            a, grad.dtype,
            [&](auto gradTag) {
              using Tg = typename decltype(gradTag)::type;
              accumulate(acc.as<TG>(), grad.as<Tg>(), n);
              return Status::ok();
            },
            "grad");
      },
      "the gradient buffer");
}

Status cpu::sumSquaresKernel(const KernelArgs &a) {
  CLEAVE_CHECK(expectScalar(a, a.out(), DType::F32, "the result"));
  struct Block {
    size_t input;
    int64_t begin, end;
  };
  std::vector<Block> blocks;
  for (size_t k = 0; k < a.inputs.size(); ++k) {
    const TensorRef &x = a.in(k);
    if (x.dtype != DType::F32 && x.dtype != DType::F64 &&
        x.dtype != DType::F16 && x.dtype != DType::BF16)
      return a.unsupported(x.dtype, ("operand " + std::to_string(k)).c_str());
    int64_t n = x.numElements();
    for (int64_t begin = 0; begin < n; begin += kSquaresBlock)
      blocks.push_back({k, begin, std::min(n, begin + kSquaresBlock)});
  }
  std::vector<double> partial(blocks.size(), 0.0);
  parallelRange(int64_t(blocks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const Block &block = blocks[b];
      const TensorRef &x = a.in(block.input);
      (void)visitFloat(a, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        partial[b] = sumSquaresOf(x.as<T>() + block.begin,
                                  block.end - block.begin);
        return Status::ok();
      });
    }
  });
  double total = 0;
  for (double p : partial)
    total += p;
  a.out().as<float>()[0] = float(total);
  return Status::ok();
}

Status cpu::adamwKernel(const KernelArgs &a) {
  Update u;
  CLEAVE_CHECK(readUpdate(a, u));
  CLEAVE_CHECK(expectState(a, 1, "exp_avg"));
  CLEAVE_CHECK(expectState(a, 2, "exp_avg_sq"));
  double beta1, beta2, eps;
  CLEAVE_CHECK(a.floatAttr("beta1", beta1, 0.9));
  CLEAVE_CHECK(a.floatAttr("beta2", beta2, 0.999));
  CLEAVE_CHECK(a.floatAttr("eps", eps, 1e-8));

  AdamWScalars s;
  s.clipping = u.clipping;
  s.clip = u.clip;
  s.decay = float(1.0 - u.lr * u.weightDecay);
  s.beta1 = float(beta1);
  s.oneMinusBeta1 = float(1.0 - beta1);
  s.beta2 = float(beta2);
  s.oneMinusBeta2 = float(1.0 - beta2);
  double step = double(u.step); // torch keeps the step as a float tensor
  s.bc2Sqrt = float(std::sqrt(1.0 - std::pow(beta2, step)));
  s.eps = float(eps);
  s.negStepSize = float(-(u.lr / (1.0 - std::pow(beta1, step))));

  float *p = a.out(0).as<float>(), *m = a.out(1).as<float>(),
        *v = a.out(2).as<float>();
  int64_t n = a.out(0).numElements();
  bool avx2 = useAvx2();
  return visitGrad(
      a, a.in(0).dtype,
      [&](auto tag) {
        using G = typename decltype(tag)::type;
        const G *grad = a.in(0).as<G>();
        parallelRange(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
          if (avx2)
            adamwRangeAvx2(grad, p, m, v, s, begin, end);
          else
            adamwRange(grad, p, m, v, s, begin, end);
        });
        return Status::ok();
      },
      "grad");
}

Status cpu::sgdKernel(const KernelArgs &a) {
  CLEAVE_CHECK(checkSgdResults(a));
  Update u;
  CLEAVE_CHECK(readUpdate(a, u));
  double momentum;
  CLEAVE_CHECK(sgdMomentum(a, momentum));
  bool hasBuffer = a.outputs.size() == 2;

  SgdScalars s;
  s.clipping = u.clipping;
  s.clip = u.clip;
  s.decays = u.weightDecay != 0;
  s.weightDecay = float(u.weightDecay);
  s.momentum = hasBuffer;
  s.firstStep = u.step == 1;
  s.momentumFactor = float(momentum);
  s.negLr = float(-u.lr);

  float *p = a.out(0).as<float>();
  float *buf = hasBuffer ? a.out(1).as<float>() : nullptr;
  int64_t n = a.out(0).numElements();
  bool avx2 = useAvx2();
  return visitGrad(
      a, a.in(0).dtype,
      [&](auto tag) {
        using G = typename decltype(tag)::type;
        const G *grad = a.in(0).as<G>();
        parallelRange(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
          if (avx2)
            sgdRangeAvx2(grad, p, buf, s, begin, end);
          else
            sgdRange(grad, p, buf, s, begin, end);
        });
        return Status::ok();
      },
      "grad");
}
