//===- SoftmaxShape.h - the softmax ops' layout and checks -----*- C++ -*-===//
//
// What the CPU (softmax.cpp) and CUDA (cuda/softmax.cu) kernels of softmax,
// log_softmax and their gradients share, so both check the same things and
// say the same about operands that do not fit.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_SOFTMAXSHAPE_H
#define CLEAVE_RUNTIME_OPS_SOFTMAXSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// The [outer, classes, inner] view of operand 0 around the `axis`
/// attribute (default -1), after checking the result has its type and
/// shape.
Status softmaxLayout(const KernelArgs &a, int64_t &outer, int64_t &classes,
                     int64_t &inner);

/// softmaxLayout for the gradients (y, dy) -> dx, also checking that dy
/// has y's type and shape.
Status softmaxGradLayout(const KernelArgs &a, int64_t &outer,
                         int64_t &classes, int64_t &inner);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_SOFTMAXSHAPE_H
