//===- NormShape.h - the norms' checks -------------------------*- C++ -*-===//
//
// What the CPU (norms.cpp) and CUDA (cuda/norms.cu) kernels of layer_norm,
// rms_norm and their gradients share, so both check the same things and
// say the same about operands that do not fit.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_NORMSHAPE_H
#define CLEAVE_RUNTIME_OPS_NORMSHAPE_H

#include "runtime/ops/KernelArgs.h"

#include <initializer_list>
#include <utility>

namespace cleave::runtime::ops {

/// The checks both norms and their gradients share: axis (default -1),
/// epsilon (default 1e-5), the first result like x (operand `xIndex`), and
/// that the given weights (operand index and name) have shape
/// x.shape[axis:] and x's element type. x is [rows, d] around axis.
Status checkNorm(const KernelArgs &a, size_t xIndex,
                 std::initializer_list<std::pair<size_t, const char *>> weights,
                 int64_t &rows, int64_t &d, double &epsilon,
                 Shape *normalizedShape = nullptr);

/// The checks of layer_norm_grad and rms_norm_grad, (dy, x, scale) -> (dx,
/// dscale[, dbias]): checkNorm of x and scale, dy like x, the weight
/// gradients of x's type and shape x.shape[axis:].
Status checkNormGrad(const KernelArgs &a, int64_t &rows, int64_t &d,
                     double &epsilon);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_NORMSHAPE_H
