//===- NormShape.cpp - operand checks every backend shares ----------------===//
//
// The checks of layer_norm, rms_norm and their gradients. Shared by the CPU
// (runtime/cpu/norms.cpp) and CUDA kernels of these ops so both refuse the
// same operands with the same words (NormShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/NormShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::checkNorm(
    const KernelArgs &a, size_t xIndex,
    std::initializer_list<std::pair<size_t, const char *>> weights,
    int64_t &rows, int64_t &d, double &epsilon, Shape *normalizedShape) {
  const TensorRef &x = a.in(xIndex);
  const char *first = a.outputs.size() == 1 ? "the result" : "dx";
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, first));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, first));
  int64_t axis;
  CLEAVE_CHECK(a.intAttr("axis", axis, -1));
  CLEAVE_CHECK(a.floatAttr("epsilon", epsilon, 1e-5));
  if (x.rank() == 0)
    return a.error("x must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, axis, x.rank()));
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (auto [i, what] : weights) {
    if (!a.has(i))
      continue;
    CLEAVE_CHECK(a.expectShape(a.in(i), normalized, what));
    CLEAVE_CHECK(a.expectDType(a.in(i), x.dtype, what));
  }
  rows = product(x.shape, 0, axis);
  d = product(normalized);
  if (normalizedShape)
    *normalizedShape = normalized;
  return Status::ok();
}

Status ops::checkNormGrad(const KernelArgs &a, int64_t &rows, int64_t &d,
                          double &epsilon) {
  Shape normalized;
  CLEAVE_CHECK(checkNorm(a, 1, {{2, "scale"}}, rows, d, epsilon, &normalized));
  const TensorRef &x = a.in(1);
  CLEAVE_CHECK(a.expectDType(a.in(0), x.dtype, "dy"));
  CLEAVE_CHECK(a.expectShape(a.in(0), x.shape, "dy"));
  const char *names[] = {"dx", "dscale", "dbias"};
  for (size_t i = 1; i < a.outputs.size(); ++i) {
    CLEAVE_CHECK(a.expectDType(a.out(i), x.dtype, names[i]));
    CLEAVE_CHECK(a.expectShape(a.out(i), normalized, names[i]));
  }
  return Status::ok();
}
