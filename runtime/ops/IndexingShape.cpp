//===- IndexingShape.cpp - operand checks every backend shares ------------===//
//
// The checks of gather_elements, gather_elements_grad, gather_nd and
// scatter_nd. Shared by the CPU (runtime/cpu/indexing.cpp) and CUDA kernels
// of these ops so both refuse the same operands with the same words
// (IndexingShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/IndexingShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::checkGatherElements(const KernelArgs &a, ElementsPlan &plan) {
  const TensorRef &data = a.in(0), &indices = a.in(1);
  CLEAVE_CHECK(a.expectDType(a.out(), data.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), indices.shape, "the result"));
  plan.data = data.shape;
  plan.indices = indices.shape;
  CLEAVE_CHECK(a.intAttr("axis", plan.axis));
  if (data.rank() == 0)
    return a.error("data must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, plan.axis, data.rank()));
  if (indices.rank() != data.rank())
    return a.error("indices must have the data's rank " +
                   std::to_string(data.rank()) + ", got shape " +
                   shapeString(indices.shape));
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != plan.axis && indices.shape[d] > data.shape[d])
      return a.error("indices " + shapeString(indices.shape) +
                     " are larger than the data " + shapeString(data.shape) +
                     " in dimension " + std::to_string(d));
  if (dtypeSize(data.dtype) == 0)
    return a.unsupported(data.dtype, "data");
  return Status::ok();
}

Status ops::checkGatherElementsGrad(const KernelArgs &a, ElementsPlan &plan) {
  const TensorRef &dy = a.in(0), &indices = a.in(1), &out = a.out();
  CLEAVE_CHECK(a.expectDType(out, dy.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(dy, indices.shape, "dy"));
  plan.data = out.shape;
  plan.indices = indices.shape;
  CLEAVE_CHECK(a.intAttr("axis", plan.axis));
  if (out.rank() == 0)
    return a.error("the result must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, plan.axis, out.rank()));
  if (indices.rank() != out.rank())
    return a.error("indices must have the result's rank " +
                   std::to_string(out.rank()) + ", got shape " +
                   shapeString(indices.shape));
  for (int64_t d = 0; d < out.rank(); ++d)
    if (d != plan.axis && indices.shape[d] > out.shape[d])
      return a.error("indices " + shapeString(indices.shape) +
                     " are larger than the result " + shapeString(out.shape) +
                     " in dimension " + std::to_string(d));
  return Status::ok();
}

static Status checkTuples(const KernelArgs &a, const TensorRef &data,
                          const TensorRef &indices, TuplePlan &plan) {
  if (indices.rank() == 0)
    return a.error("indices must have rank 1 or more (index tuples along "
                   "the last dimension)");
  plan.data = data.shape;
  plan.k = indices.shape.back();
  if (plan.k > data.rank())
    return a.error("index tuples have " + std::to_string(plan.k) +
                   " entries, more than the data's rank " +
                   std::to_string(data.rank()));
  plan.tuples = product(indices.shape, 0, indices.rank() - 1);
  plan.slice = product(data.shape, plan.k);
  plan.strides.assign(plan.k, 0);
  for (int64_t j = 0; j < plan.k; ++j)
    plan.strides[j] = product(data.shape, j + 1);
  if (dtypeSize(data.dtype) == 0)
    return a.unsupported(data.dtype, "data");
  return Status::ok();
}

/// indices.shape[:-1] + data.shape[k:].
static Shape slicesShape(const TensorRef &indices, const Shape &data,
                         int64_t k) {
  Shape s(indices.shape.begin(), indices.shape.end() - 1);
  s.insert(s.end(), data.begin() + k, data.end());
  return s;
}

Status ops::checkGatherNd(const KernelArgs &a, TuplePlan &plan) {
  const TensorRef &data = a.in(0), &indices = a.in(1);
  CLEAVE_CHECK(a.expectDType(a.out(), data.dtype, "the result"));
  CLEAVE_CHECK(checkTuples(a, data, indices, plan));
  return a.expectShape(a.out(), slicesShape(indices, data.shape, plan.k),
                       "the result");
}

Status ops::checkScatterNd(const KernelArgs &a, TuplePlan &plan) {
  const TensorRef &data = a.in(0), &indices = a.in(1), &updates = a.in(2);
  CLEAVE_CHECK(a.expectDType(a.out(), data.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), data.shape, "the result"));
  CLEAVE_CHECK(a.expectDType(updates, data.dtype, "updates"));
  CLEAVE_CHECK(checkTuples(a, data, indices, plan));
  CLEAVE_CHECK(a.expectShape(updates, slicesShape(indices, data.shape, plan.k),
                             "updates"));
  CLEAVE_CHECK(a.stringAttr("reduction", plan.reduction, "none"));
  const std::string &r = plan.reduction;
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return a.error("reduction must be none, add, mul, max or min, got '" + r +
                   "'");
  return Status::ok();
}
