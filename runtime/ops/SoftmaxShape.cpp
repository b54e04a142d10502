//===- SoftmaxShape.cpp - operand checks every backend shares -------------===//
//
// The checks of softmax, log_softmax and their gradients. Shared by the CPU
// (runtime/cpu/softmax.cpp) and CUDA kernels of these ops so both refuse the
// same operands with the same words (SoftmaxShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/SoftmaxShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::softmaxLayout(const KernelArgs &a, int64_t &outer,
                          int64_t &classes, int64_t &inner) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  int64_t axis;
  CLEAVE_CHECK(a.intAttr("axis", axis, -1));
  if (x.rank() == 0)
    return a.error("x must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, axis, x.rank()));
  outer = product(x.shape, 0, axis);
  classes = x.shape[axis];
  inner = product(x.shape, axis + 1);
  return Status::ok();
}

Status ops::softmaxGradLayout(const KernelArgs &a, int64_t &outer,
                              int64_t &classes, int64_t &inner) {
  CLEAVE_CHECK(softmaxLayout(a, outer, classes, inner));
  CLEAVE_CHECK(a.expectDType(a.in(1), a.in(0).dtype, "dy"));
  return a.expectShape(a.in(1), a.in(0).shape, "dy");
}
