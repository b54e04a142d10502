//===- LossShape.cpp - operand checks every backend shares ----------------===//
//
// The checks of the losses and their gradients. Shared by the CPU
// (runtime/cpu/losses.cpp) and CUDA kernels of these ops so both refuse the
// same operands with the same words (LossShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/LossShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::lossAttrs(const KernelArgs &a, LossShape &s) {
  std::string reduction;
  CLEAVE_CHECK(a.stringAttr("reduction", reduction, "mean"));
  if (reduction == "none")
    s.reduction = Reduction::None;
  else if (reduction == "sum")
    s.reduction = Reduction::Sum;
  else if (reduction == "mean")
    s.reduction = Reduction::Mean;
  else
    return a.error("reduction must be \"none\", \"sum\" or \"mean\", got \"" +
                   reduction + "\"");
  s.hasIgnore = a.hasAttr("ignore_index");
  s.ignoreIndex = 0;
  if (s.hasIgnore)
    CLEAVE_CHECK(a.intAttr("ignore_index", s.ignoreIndex));
  return Status::ok();
}

Status ops::checkLoss(const KernelArgs &a, LossShape &s) {
  const TensorRef &input = a.in(0), &target = a.in(1);
  if (input.rank() < 2)
    return a.error("input must have rank 2 or more ([N, C, d...]), got shape " +
                   shapeString(input.shape));
  s.n = input.shape[0];
  s.classes = input.shape[1];
  s.positions = product(input.shape, 2);
  Shape targetShape{s.n};
  targetShape.insert(targetShape.end(), input.shape.begin() + 2,
                     input.shape.end());
  CLEAVE_CHECK(a.expectShape(target, targetShape, "target"));
  CLEAVE_CHECK(lossAttrs(a, s));
  CLEAVE_CHECK(a.expectDType(a.out(), input.dtype, "the result"));
  return a.expectShape(a.out(),
                       s.reduction == Reduction::None ? targetShape : Shape{},
                       "the result");
}

Status ops::checkLossGrad(const KernelArgs &a, const TensorRef &target,
                          LossShape &s) {
  const TensorRef &dloss = a.in(0), &out = a.out();
  if (out.rank() < 2)
    return a.error("the result must have rank 2 or more ([N, C, d...]), got "
                   "shape " +
                   shapeString(out.shape));
  s.n = out.shape[0];
  s.classes = out.shape[1];
  s.positions = product(out.shape, 2);
  Shape targetShape{s.n};
  targetShape.insert(targetShape.end(), out.shape.begin() + 2, out.shape.end());
  CLEAVE_CHECK(a.expectShape(target, targetShape, "target"));
  CLEAVE_CHECK(lossAttrs(a, s));
  CLEAVE_CHECK(a.expectDType(dloss, out.dtype, "dloss"));
  CLEAVE_CHECK(a.expectShape(
      dloss, s.reduction == Reduction::None ? targetShape : Shape{}, "dloss"));
  return Status::ok();
}

Status ops::checkLossFused(const KernelArgs &a, LossShape &s) {
  const TensorRef &input = a.in(0), &dloss = a.in(2);
  CLEAVE_CHECK(checkLoss(a, s));
  CLEAVE_CHECK(a.expectDType(dloss, input.dtype, "dloss"));
  CLEAVE_CHECK(a.expectShape(dloss, a.out(0).shape, "dloss"));
  CLEAVE_CHECK(a.expectDType(a.out(1), input.dtype, "dinput"));
  return a.expectShape(a.out(1), input.shape, "dinput");
}
