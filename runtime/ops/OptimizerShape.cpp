//===- OptimizerShape.cpp - operand checks every backend shares -----------===//
//
// The checks of accumulate_grad and sgd. Shared by the CPU
// (runtime/cpu/optimizer.cpp) and CUDA kernels of these ops so both refuse
// the same operands with the same words (OptimizerShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/OptimizerShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

std::string ops::typeText(const TensorRef &t) {
  return std::string(dtypeName(t.dtype)) + shapeString(t.shape);
}

Status ops::expectState(const KernelArgs &a, size_t i, const char *what) {
  CLEAVE_CHECK(a.expectDType(a.out(i), DType::F32, what));
  return a.expectShape(a.out(i), a.out(0).shape, what);
}

Status ops::checkAccumulateGrad(const KernelArgs &a) {
  const TensorRef &grad = a.in(0), &acc = a.out();
  if (grad.shape != acc.shape)
    return a.error("grad is " + typeText(grad) +
                   ", but the gradient buffer is " + typeText(acc));
  bool sameOrWider = grad.dtype == acc.dtype ||
                     (acc.dtype == DType::F32 &&
                      (grad.dtype == DType::F16 || grad.dtype == DType::BF16));
  if (!sameOrWider)
    return a.error(std::string("cannot add a ") + dtypeName(grad.dtype) +
                   " gradient into a " + dtypeName(acc.dtype) +
                   " gradient buffer (same type, or 16-bit into f32)");
  return Status::ok();
}

Status ops::checkSgdResults(const KernelArgs &a) {
  if (a.outputs.size() != 1 && a.outputs.size() != 2)
    return a.error("got " + std::to_string(a.outputs.size()) +
                   " results, expected the parameter and, with momentum, "
                   "its momentum buffer");
  return Status::ok();
}

Status ops::sgdMomentum(const KernelArgs &a, double &momentum) {
  CLEAVE_CHECK(a.floatAttr("momentum", momentum, 0.0));
  bool hasBuffer = a.outputs.size() == 2;
  if ((momentum != 0) != hasBuffer)
    return a.error(momentum != 0
                       ? "momentum " + std::to_string(momentum) +
                             " needs a momentum buffer as result 1"
                       : std::string("a momentum buffer without momentum"));
  if (hasBuffer)
    CLEAVE_CHECK(expectState(a, 1, "the momentum buffer"));
  return Status::ok();
}
