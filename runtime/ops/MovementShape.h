//===- MovementShape.h - the movement ops' operand checks ------*- C++ -*-===//
//
// What the CPU (movement.cpp) and CUDA (cuda/movement.cu) kernels of
// reshape, transpose, broadcast_to, slice, slice_grad and concat share: the
// checks of their operands and attributes (so both backends give the same
// errors) and the plans the checks produce.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_MOVEMENTSHAPE_H
#define CLEAVE_RUNTIME_OPS_MOVEMENTSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// reshape: the result has x's element type and element count.
Status checkReshape(const KernelArgs &a);

/// transpose: checks the perm attribute and the result's type and shape,
/// and merges x's dimensions: sizes-1 dimensions dropped, source dimensions
/// that stay neighbours in the result merged. Result dimension k is source
/// dimension perm[k] of the merged `dims` (row-major). `identity` when the
/// transpose moves nothing (a copy).
Status transposePlan(const KernelArgs &a, Shape &dims, Shape &perm,
                     bool &identity);

/// broadcast_to: checks x against the result and gives the stride of x
/// (in elements; 0 where broadcast) for each result dimension.
Status broadcastStrides(const KernelArgs &a, Shape &strides);

/// The slice of a tensor of `shape` by the start, limit and step
/// attributes: its shape `expected`, and where it reads: from element
/// `base` by `steps` (elements, possibly negative) per dimension.
Status slicePlan(const KernelArgs &a, const Shape &shape, Shape &expected,
                 Shape &steps, int64_t &base);

/// concat: checks the operands against the result and gives the axis in
/// [0, rank).
Status concatAxis(const KernelArgs &a, int64_t &axis);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_MOVEMENTSHAPE_H
