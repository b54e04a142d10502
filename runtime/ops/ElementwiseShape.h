//===- ElementwiseShape.h - the elementwise ops' shape check ---*- C++ -*-===//
//
// What the CPU (elementwise.cpp) and CUDA (cuda/elementwise.cu) kernels of
// the broadcasting ops share, so both say the same thing about operands
// that do not fit.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_ELEMENTWISESHAPE_H
#define CLEAVE_RUNTIME_OPS_ELEMENTWISESHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// Checks that operands [first, first + count) broadcast together (numpy
/// rules) to the result's shape: "operands of shapes [..] and [..] do not
/// broadcast to the result shape [..]" otherwise.
Status checkBroadcast(const KernelArgs &a, size_t first, size_t count);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_ELEMENTWISESHAPE_H
