//===- LossShape.h - the losses' attributes and shape checks ---*- C++ -*-===//
//
// What the CPU (losses.cpp) and CUDA (cuda/losses.cu) kernels of
// softmax_cross_entropy, nll_loss, their gradients and
// softmax_cross_entropy_fused share: input
// [N, C, d...] against class ids target [N, d...], the reduction and
// ignore_index, and the checks that say the same about operands that do not
// fit. Reading and checking the target values is each backend's business.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_LOSSSHAPE_H
#define CLEAVE_RUNTIME_OPS_LOSSSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

enum class Reduction { None, Sum, Mean };

struct LossShape {
  int64_t n, classes, positions; // positions: the product of d...
  Reduction reduction;
  bool hasIgnore;
  int64_t ignoreIndex;
};

/// reduction ("none", "sum" or "mean", default "mean") and ignore_index.
Status lossAttrs(const KernelArgs &a, LossShape &s);

/// The checks of a loss (input, target) -> loss: input of rank 2 or more,
/// target [N, d...], the attributes, and the result of input's type with
/// shape [N, d...] (none) or [] (sum, mean).
Status checkLoss(const KernelArgs &a, LossShape &s);

/// The checks both gradients share, (dloss, ..., target) -> dinput: the
/// result of rank 2 or more ([N, C, d...]), `target` [N, d...], the
/// attributes, and dloss of the result's type with shape [N, d...] (none)
/// or [] (sum, mean).
Status checkLossGrad(const KernelArgs &a, const TensorRef &target,
                     LossShape &s);

/// The checks of softmax_cross_entropy_fused (input, target, dloss) ->
/// (loss, dinput): checkLoss's, dloss of the loss's type and shape, and
/// dinput of the input's.
Status checkLossFused(const KernelArgs &a, LossShape &s);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_LOSSSHAPE_H
