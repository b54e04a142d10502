//===- losses.cpp - CPU kernels of the losses and their gradients ---------===//
//
// input [N, C, d...] against class ids target [N, d...]. Cross-entropy is
// fused: per position, logsumexp over the classes (max pass, exp-sum pass)
// minus the target's logit; no softmax tensor is written. Positions whose
// target is ignore_index contribute nothing and are not counted by `mean`
// (all ignored: 0 / 0 = NaN, as PyTorch gives). Threaded over N (and over
// blocks of positions when d... is not empty); the sum is taken in double.
// The gradients scale each position by dloss (divided by the count for
// mean): cross-entropy recomputes logsumexp and writes softmax - onehot,
// nll_loss_grad writes -dloss at the target's class into zeros.
// softmax_cross_entropy_fused does the loss and cross-entropy's gradient
// from one logsumexp per position, with the same formulas as the two; its
// gradient may be written over its input (in place).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/LossShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// Reads the targets as int64, checking they are classes or ignore_index.
template <typename I>
Status readTargets(const KernelArgs &a, const TensorRef &t, const LossShape &s,
                   std::vector<int64_t> &targets) {
  const I *p = t.as<I>();
  int64_t count = t.numElements();
  targets.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = int64_t(p[i]);
    if (!(s.hasIgnore && v == s.ignoreIndex) && (v < 0 || v >= s.classes))
      return a.error(
          "target " + std::to_string(v) + " at position " + std::to_string(i) +
          " is not a class in [0, " + std::to_string(s.classes) + ")" +
          (s.hasIgnore ? " nor ignore_index " + std::to_string(s.ignoreIndex)
                       : std::string()));
    targets[i] = v;
  }
  return Status::ok();
}

/// log(sum(exp(x[c * stride]))) over the classes of one position.
template <typename T>
CLEAVE_ALWAYS_INLINE Compute<T> logSumExp(const T *x, int64_t classes,
                                          int64_t stride) {
  using C = Compute<T>;
  C m = -std::numeric_limits<C>::infinity();
  C sum = 0;
  if (stride == 1) {
    if constexpr (std::is_same_v<T, float>) {
      m = maxOf(x, classes);
    } else {
      for (int64_t c = 0; c < classes; ++c)
        m = std::max(m, C(load(x[c])));
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < classes; ++c)
      sum += cpu::exp(C(load(x[c])) - m);
  } else {
    for (int64_t c = 0; c < classes; ++c)
      m = std::max(m, C(load(x[c * stride])));
    for (int64_t c = 0; c < classes; ++c)
      sum += cpu::exp(C(load(x[c * stride])) - m);
  }
  return m + std::log(sum);
}

/// The losses of positions [begin, end) (0 where ignored).
template <typename T, bool CrossEntropy>
CLEAVE_ALWAYS_INLINE void lossRange(const T *x, const LossShape &s,
                                    const int64_t *targets, double *losses,
                                    int64_t begin, int64_t end) {
  for (int64_t p = begin; p < end; ++p) {
    int64_t t = targets[p];
    if (s.hasIgnore && t == s.ignoreIndex) {
      losses[p] = 0;
      continue;
    }
    int64_t n = p / s.positions, d = p % s.positions;
    const T *row = x + n * s.classes * s.positions + d;
    double picked = load(row[t * s.positions]);
    if constexpr (CrossEntropy)
      losses[p] = double(logSumExp(row, s.classes, s.positions)) - picked;
    else
      losses[p] = -picked;
  }
}

template <typename T, bool CrossEntropy>
CLEAVE_TARGET_AVX2 void lossRangeAvx2(const T *x, const LossShape &s,
                                      const int64_t *targets, double *losses,
                                      int64_t begin, int64_t end) {
  lossRange<T, CrossEntropy>(x, s, targets, losses, begin, end);
}

/// Computes every position's loss (0 where ignored) into `losses`.
template <typename T, bool CrossEntropy>
void positionLosses(const T *x, const LossShape &s,
                    const std::vector<int64_t> &targets,
                    std::vector<double> &losses) {
  int64_t total = s.n * s.positions;
  int64_t cost = CrossEntropy ? s.classes : 1;
  bool avx2 = CrossEntropy && std::is_same_v<T, float> && useAvx2();
  parallelRange(total, std::max<int64_t>(1, kElementwiseGrain / cost),
                [&](int64_t begin, int64_t end) {
                  if (avx2)
                    lossRangeAvx2<T, CrossEntropy>(x, s, targets.data(),
                                                   losses.data(), begin, end);
                  else
                    lossRange<T, CrossEntropy>(x, s, targets.data(),
                                               losses.data(), begin, end);
                });
}

/// Reads the targets (any index type) into `targets`.
Status targetsOf(const KernelArgs &a, const TensorRef &target,
                 const LossShape &s, std::vector<int64_t> &targets) {
  return visitIndex(
      a, target.dtype,
      [&](auto tag) {
        using I = typename decltype(tag)::type;
        return readTargets<I>(a, target, s, targets);
      },
      "target");
}

/// Writes the loss from the positions' losses: each one (none), their sum
/// in double, or that sum over the counted targets (mean).
template <typename T>
void reduceLosses(const std::vector<double> &losses, const LossShape &s,
                  const std::vector<int64_t> &targets, T *out) {
  if (s.reduction == Reduction::None) {
    for (size_t i = 0; i < losses.size(); ++i)
      out[i] = store<T>(Compute<T>(losses[i]));
    return;
  }
  double sum = 0;
  int64_t counted = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    sum += losses[i];
    counted += !(s.hasIgnore && targets[i] == s.ignoreIndex);
  }
  if (s.reduction == Reduction::Mean)
    sum /= double(counted);
  out[0] = store<T>(Compute<T>(sum));
}

template <bool CrossEntropy> Status loss(const KernelArgs &a) {
  const TensorRef &input = a.in(0), &target = a.in(1);
  LossShape s;
  CLEAVE_CHECK(checkLoss(a, s));
  std::vector<int64_t> targets;
  CLEAVE_CHECK(targetsOf(a, target, s, targets));
  return visitFloat(
      a, input.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> losses(targets.size());
        positionLosses<T, CrossEntropy>(input.as<T>(), s, targets, losses);
        reduceLosses(losses, s, targets, a.out().as<T>());
        return Status::ok();
      },
      "input");
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// The factor each position's gradient is scaled by: dloss at the position
/// (none) or the scalar dloss, divided by the counted targets for mean; 0
/// for an ignored target.
template <typename T>
std::vector<double> positionFactors(const T *dloss, const LossShape &s,
                                    const std::vector<int64_t> &targets) {
  std::vector<double> factors(targets.size());
  int64_t counted = 0;
  for (int64_t t : targets)
    counted += !(s.hasIgnore && t == s.ignoreIndex);
  double scalar = s.reduction == Reduction::None ? 0 : double(load(dloss[0]));
  if (s.reduction == Reduction::Mean)
    scalar /= double(counted);
  for (size_t p = 0; p < targets.size(); ++p) {
    bool ignored = s.hasIgnore && targets[p] == s.ignoreIndex;
    factors[p] = ignored                          ? 0
                 : s.reduction == Reduction::None ? double(load(dloss[p]))
                                                  : scalar;
  }
  return factors;
}

/// dinput of positions [begin, end): (softmax(x) - onehot(t)) * factor,
/// zero where the target is ignored; with `losses`
/// (softmax_cross_entropy_fused) also each position's loss term, as
/// lossRange computes it, from the same logsumexp, so the results equal
/// those of the two unfused kernels.
template <typename T>
CLEAVE_ALWAYS_INLINE void
crossEntropyGradRange(const T *x, T *dx, const LossShape &s,
                       const int64_t *targets, const double *factors,
                       double *losses, int64_t begin, int64_t end) {
  using C = Compute<T>;
  int64_t stride = s.positions;
  for (int64_t p = begin; p < end; ++p) {
    int64_t n = p / s.positions, d = p % s.positions;
    const T *row = x + n * s.classes * s.positions + d;
    T *out = dx + n * s.classes * s.positions + d;
    int64_t t = targets[p];
    if (s.hasIgnore && t == s.ignoreIndex) {
      if (losses)
        losses[p] = 0;
      for (int64_t c = 0; c < s.classes; ++c)
        out[c * stride] = store<T>(C(0));
      continue;
    }
    C shift = logSumExp(row, s.classes, stride), g = C(factors[p]);
    // Read before the row is written: `dx` may be `x` (the memory plan
    // writes the gradient over logits that die here).
    C picked = C(load(row[t * stride]));
    if (losses)
      losses[p] = double(shift) - double(picked);
    if (stride == 1) {
      for (int64_t c = 0; c < s.classes; ++c)
        out[c] = store<T>(cpu::exp(C(load(row[c])) - shift) * g);
    } else {
      for (int64_t c = 0; c < s.classes; ++c)
        out[c * stride] =
            store<T>(cpu::exp(C(load(row[c * stride])) - shift) * g);
    }
    out[t * stride] = store<T>((cpu::exp(picked - shift) - C(1)) * g);
  }
}

template <typename T>
CLEAVE_TARGET_AVX2 void
crossEntropyGradRangeAvx2(const T *x, T *dx, const LossShape &s,
                          const int64_t *targets, const double *factors,
                          double *losses, int64_t begin, int64_t end) {
  crossEntropyGradRange<T>(x, dx, s, targets, factors, losses, begin, end);
}

/// crossEntropyGradRange over every position, in parallel (AVX2 for f32
/// where the machine has it).
template <typename T>
void crossEntropyGrad(const T *x, T *dx, const LossShape &s,
                      const std::vector<int64_t> &targets,
                      const std::vector<double> &factors, double *losses) {
  bool avx2 = std::is_same_v<T, float> && useAvx2();
  parallelRange(s.n * s.positions,
                std::max<int64_t>(1, kElementwiseGrain /
                                         std::max<int64_t>(s.classes, 1)),
                [&](int64_t begin, int64_t end) {
                  if (avx2)
                    crossEntropyGradRangeAvx2(x, dx, s, targets.data(),
                                              factors.data(), losses, begin,
                                              end);
                  else
                    crossEntropyGradRange(x, dx, s, targets.data(),
                                          factors.data(), losses, begin, end);
                });
}

} // namespace

Status cpu::softmaxCrossEntropyKernel(const KernelArgs &a) {
  return loss<true>(a);
}
Status cpu::nllLossKernel(const KernelArgs &a) { return loss<false>(a); }

Status cpu::softmaxCrossEntropyGradKernel(const KernelArgs &a) {
  const TensorRef &input = a.in(1), &target = a.in(2);
  CLEAVE_CHECK(a.expectDType(a.out(), input.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), input.shape, "the result"));
  LossShape s;
  std::vector<int64_t> targets;
  CLEAVE_CHECK(checkLossGrad(a, target, s));
  CLEAVE_CHECK(targetsOf(a, target, s, targets));
  return visitFloat(
      a, input.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> factors =
            positionFactors(a.in(0).as<T>(), s, targets);
        crossEntropyGrad(input.as<T>(), a.out().as<T>(), s, targets, factors,
                         nullptr);
        return Status::ok();
      },
      "input");
}

Status cpu::softmaxCrossEntropyFusedKernel(const KernelArgs &a) {
  const TensorRef &input = a.in(0), &target = a.in(1), &dloss = a.in(2);
  LossShape s;
  CLEAVE_CHECK(checkLossFused(a, s));
  std::vector<int64_t> targets;
  CLEAVE_CHECK(targetsOf(a, target, s, targets));
  return visitFloat(
      a, input.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> factors =
            positionFactors(dloss.as<T>(), s, targets);
        std::vector<double> losses(targets.size());
        crossEntropyGrad(input.as<T>(), a.out(1).as<T>(), s, targets, factors,
                         losses.data());
        reduceLosses(losses, s, targets, a.out(0).as<T>());
        return Status::ok();
      },
      "input");
}

Status cpu::nllLossGradKernel(const KernelArgs &a) {
  LossShape s;
  std::vector<int64_t> targets;
  CLEAVE_CHECK(checkLossGrad(a, a.in(1), s));
  CLEAVE_CHECK(targetsOf(a, a.in(1), s, targets));
  return visitFloat(
      a, a.out().dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> factors =
            positionFactors(a.in(0).as<T>(), s, targets);
        T *dx = a.out().as<T>();
        int64_t rowSize = s.classes * s.positions;
        parallelRange(s.n,
                      std::max<int64_t>(1, kElementwiseGrain /
                                               std::max<int64_t>(rowSize, 1)),
                      [&](int64_t begin, int64_t end) {
                        std::memset(static_cast<void *>(dx + begin * rowSize),
                                    0, (end - begin) * rowSize * sizeof(T));
                        for (int64_t p = begin * s.positions;
                             p < end * s.positions; ++p) {
                          if (s.hasIgnore && targets[p] == s.ignoreIndex)
                            continue;
                          int64_t n = p / s.positions, d = p % s.positions;
                          dx[n * rowSize + targets[p] * s.positions + d] =
                              store<T>(Compute<T>(-factors[p]));
                        }
                      });
        return Status::ok();
      },
      "the result");
}
