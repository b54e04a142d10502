//===- LookupShape.cpp - operand checks every backend shares --------------===//
//
// The checks of embedding, gather and their gradients. Shared by the CPU
// (runtime/cpu/lookup.cpp) and CUDA kernels of these ops so both refuse the
// same operands with the same words (LookupShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/LookupShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::checkEmbedding(const KernelArgs &a) {
  const TensorRef &table = a.in(0), &ids = a.in(1);
  if (table.rank() != 2)
    return a.error("table must have rank 2 ([vocabulary, dim]), got shape " +
                   shapeString(table.shape));
  CLEAVE_CHECK(a.expectDType(a.out(), table.dtype, "the result"));
  Shape expected = ids.shape;
  expected.push_back(table.shape[1]);
  CLEAVE_CHECK(a.expectShape(a.out(), expected, "the result"));
  if (dtypeSize(table.dtype) == 0)
    return a.unsupported(table.dtype, "table");
  return Status::ok();
}

Status ops::checkGather(const KernelArgs &a, int64_t &outer,
                        int64_t &axisSize, int64_t &inner) {
  const TensorRef &data = a.in(0), &indices = a.in(1);
  CLEAVE_CHECK(a.expectDType(a.out(), data.dtype, "the result"));
  int64_t axis;
  CLEAVE_CHECK(a.intAttr("axis", axis, 0));
  if (data.rank() == 0)
    return a.error("data must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, axis, data.rank()));
  Shape expected(data.shape.begin(), data.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), data.shape.begin() + axis + 1,
                  data.shape.end());
  CLEAVE_CHECK(a.expectShape(a.out(), expected, "the result"));
  outer = product(data.shape, 0, axis);
  axisSize = data.shape[axis];
  inner = product(data.shape, axis + 1);
  return Status::ok();
}

Status ops::checkEmbeddingGrad(const KernelArgs &a, int64_t &paddingRow) {
  const TensorRef &dy = a.in(0), &ids = a.in(1), &out = a.out();
  if (out.rank() != 2)
    return a.error("the result must have rank 2 ([vocabulary, dim]), got "
                   "shape " +
                   shapeString(out.shape));
  CLEAVE_CHECK(a.expectDType(out, dy.dtype, "the result"));
  Shape expected = ids.shape;
  expected.push_back(out.shape[1]);
  CLEAVE_CHECK(a.expectShape(dy, expected, "dy"));
  paddingRow = -1;
  if (!a.hasAttr("padding_idx"))
    return Status::ok();
  CLEAVE_CHECK(a.intAttr("padding_idx", paddingRow));
  if (paddingRow < 0 || paddingRow >= out.shape[0])
    return a.error("padding_idx " + std::to_string(paddingRow) +
                   " is not a row of the " + std::to_string(out.shape[0]) +
                   "-row table");
  return Status::ok();
}

Status ops::checkGatherGrad(const KernelArgs &a, int64_t &outer,
                            int64_t &axisSize, int64_t &inner) {
  const TensorRef &dy = a.in(0), &indices = a.in(1), &out = a.out();
  CLEAVE_CHECK(a.expectDType(out, dy.dtype, "the result"));
  int64_t axis;
  CLEAVE_CHECK(a.intAttr("axis", axis, 0));
  if (out.rank() == 0)
    return a.error("the result must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, axis, out.rank()));
  Shape expected(out.shape.begin(), out.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), out.shape.begin() + axis + 1,
                  out.shape.end());
  CLEAVE_CHECK(a.expectShape(dy, expected, "dy"));
  outer = product(out.shape, 0, axis);
  axisSize = out.shape[axis];
  inner = product(out.shape, axis + 1);
  return Status::ok();
}
