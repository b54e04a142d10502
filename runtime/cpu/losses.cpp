//===- losses.cpp - CPU kernels of softmax_cross_entropy and nll_loss -----===//
//
// input [N, C, d...] against class ids target [N, d...]. Cross-entropy is
// fused: per position, logsumexp over the classes (max pass, exp-sum pass)
// minus the target's logit; no softmax tensor is written. Positions whose
// target is ignore_index contribute nothing and are not counted by `mean`
// (all ignored: 0 / 0 = NaN, as PyTorch gives). Threaded over N (and over
// blocks of positions when d... is not empty); the sum is taken in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;

namespace {

enum class Reduction { None, Sum, Mean };

struct LossShape {
  int64_t n, classes, positions; // positions: product of d...
  Reduction reduction;
  bool hasIgnore;
  int64_t ignoreIndex;
};

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

template <bool CrossEntropy> Status loss(const KernelArgs &a) {
  const TensorRef &input = a.in(0), &target = a.in(1);
  if (input.rank() < 2)
    return a.error("input must have rank 2 or more ([N, C, d...]), got shape " +
                   shapeString(input.shape));
  LossShape s;
  s.n = input.shape[0];
  s.classes = input.shape[1];
  s.positions = product(input.shape, 2);
  Shape targetShape{s.n};
  targetShape.insert(targetShape.end(), input.shape.begin() + 2,
                     input.shape.end());
  CLEAVE_CHECK(a.expectShape(target, targetShape, "target"));
  std::string reduction;
  CLEAVE_CHECK(a.stringAttr("reduction", reduction, "mean"));
  if (reduction == "none")
    s.reduction = Reduction::None;
  else if (reduction == "sum")
    s.reduction = Reduction::Sum;
  else if (reduction == "mean")
    s.reduction = Reduction::Mean;
  else
    return a.error("reduction must be \"none\", \"sum\" or \"mean\", got \"" +
                   reduction + "\"");
  s.hasIgnore = a.hasAttr("ignore_index");
  s.ignoreIndex = 0;
  if (s.hasIgnore)
    CLEAVE_CHECK(a.intAttr("ignore_index", s.ignoreIndex));
  CLEAVE_CHECK(a.expectDType(a.out(), input.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(
      a.out(), s.reduction == Reduction::None ? targetShape : Shape{},
      "the result"));

  std::vector<int64_t> targets;
  CLEAVE_CHECK(visitIndex(
      a, target.dtype,
      [&](auto tag) {
        using I = typename decltype(tag)::type;
        return readTargets<I>(a, target, s, targets);
      },
      "target"));
  return visitFloat(
      a, input.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<double> losses(targets.size());
        positionLosses<T, CrossEntropy>(input.as<T>(), s, targets, losses);
        T *out = a.out().as<T>();
        if (s.reduction == Reduction::None) {
          for (size_t i = 0; i < losses.size(); ++i)
            out[i] = store<T>(Compute<T>(losses[i]));
          return Status::ok();
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
        return Status::ok();
      },
      "input");
}

} // namespace

Status cpu::softmaxCrossEntropyKernel(const KernelArgs &a) {
  return loss<true>(a);
}
Status cpu::nllLossKernel(const KernelArgs &a) { return loss<false>(a); }
