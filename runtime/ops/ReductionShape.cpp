//===- ReductionShape.cpp - operand checks every backend shares -----------===//
//
// The checks of the reductions and cumsum. Shared by the CPU
// (runtime/cpu/reductions.cpp) and CUDA kernels of these ops so both refuse
// the same operands with the same words (ReductionShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/ReductionShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::reducePlan(const KernelArgs &a, std::vector<bool> &reduced) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  std::vector<int64_t> axes;
  int64_t keepdims;
  CLEAVE_CHECK(a.intsAttr("axes", axes));
  CLEAVE_CHECK(a.intAttr("keepdims", keepdims, 1));
  reduced.assign(x.rank(), false);
  for (int64_t axis : axes) {
    CLEAVE_CHECK(normalizeAxis(a, axis, x.rank()));
    if (reduced[axis])
      return a.error("axis " + std::to_string(axis) + " is reduced twice");
    reduced[axis] = true;
  }
  Shape expected;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!reduced[d])
      expected.push_back(x.shape[d]);
    else if (keepdims)
      expected.push_back(1);
  }
  return a.expectShape(a.out(), expected, "the result");
}

ReduceDims ops::mergeReduceDims(const Shape &shape,
                                const std::vector<bool> &reduced) {
  ReduceDims merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d])
      merged.count *= shape[d];
    if (shape[d] == 1)
      continue;
    if (!merged.kinds.empty() && merged.kinds.back() == reduced[d]) {
      merged.dims.back() *= shape[d];
    } else {
      merged.dims.push_back(shape[d]);
      merged.kinds.push_back(reduced[d]);
    }
  }
  return merged;
}

Status ops::checkCumsum(const KernelArgs &a, CumsumPlan &plan) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  if (x.rank() == 0)
    return a.error("x must have rank 1 or more");
  int64_t axis, exclusive, reverse;
  CLEAVE_CHECK(a.intAttr("axis", axis));
  CLEAVE_CHECK(normalizeAxis(a, axis, x.rank()));
  CLEAVE_CHECK(a.intAttr("exclusive", exclusive, 0));
  CLEAVE_CHECK(a.intAttr("reverse", reverse, 0));
  plan.outer = product(x.shape, 0, axis);
  plan.axisSize = x.shape[axis];
  plan.inner = product(x.shape, axis + 1);
  plan.exclusive = exclusive != 0;
  plan.reverse = reverse != 0;
  return Status::ok();
}
