//===- ReductionShape.h - the reductions' operand checks -------*- C++ -*-===//
//
// What the CPU (reductions.cpp) and CUDA (cuda/reductions.cu) kernels of
// reduce_sum, reduce_mean, reduce_max and reduce_min share: the check of
// the axes and keepdims attributes against x and the result, and the
// merging of x's dimensions into runs of kept and reduced ones; and the
// check of cumsum's attributes.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_REDUCTIONSHAPE_H
#define CLEAVE_RUNTIME_OPS_REDUCTIONSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// Checks the axes (each in [-rank, rank), none twice) and keepdims
/// (default 1) attributes and the result's type and shape; `reduced` says
/// for each dimension of x whether it is reduced.
Status reducePlan(const KernelArgs &a, std::vector<bool> &reduced);

/// x's dimensions with those of size 1 dropped and neighbours of the same
/// kind merged: dims[k] is reduced when kinds[k]. `count` is the number of
/// elements each result element reduces (the product of the reduced
/// dimensions, 0 when one is 0).
struct ReduceDims {
  Shape dims;
  std::vector<bool> kinds;
  int64_t count = 1;
};
ReduceDims mergeReduceDims(const Shape &shape,
                           const std::vector<bool> &reduced);

/// cumsum (x) -> a result of x's type and shape: the axis attribute (in
/// range) and the exclusive and reverse flags (default 0). x is [outer,
/// axisSize, inner] around the axis.
struct CumsumPlan {
  int64_t outer = 1, axisSize = 1, inner = 1;
  bool exclusive = false, reverse = false;
};
Status checkCumsum(const KernelArgs &a, CumsumPlan &plan);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_REDUCTIONSHAPE_H
