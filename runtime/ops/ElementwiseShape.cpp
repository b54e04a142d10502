//===- ElementwiseShape.cpp - operand checks every backend shares ---------===//
//
// The checks of the broadcasting elementwise ops. Shared by the CPU
// (runtime/cpu/elementwise.cpp) and CUDA kernels of these ops so both refuse
// the same operands with the same words (ElementwiseShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/ElementwiseShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::checkBroadcast(const KernelArgs &a, size_t first, size_t count) {
  Shape shape = a.in(first).shape;
  bool fits = true;
  for (size_t i = first + 1; fits && i < first + count; ++i) {
    Shape merged;
    fits = broadcastShapes(shape, a.in(i).shape, merged);
    shape = merged;
  }
  if (fits && shape == a.out().shape)
    return Status::ok();
  std::string shapes;
  for (size_t i = first; i < first + count; ++i)
    shapes += (i > first ? (i + 1 == first + count ? " and " : ", ") : "") +
              shapeString(a.in(i).shape);
  return a.error("operands of shapes " + shapes +
                 " do not broadcast to the result shape " +
                 shapeString(a.out().shape));
}
