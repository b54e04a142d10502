//===- OptimizerShape.h - the optimizer ops' checks ------------*- C++ -*-===//
//
// What the CPU (optimizer.cpp) and CUDA (cuda/optimizer.cu) kernels of
// accumulate_grad, sgd and adamw share, so both say the same about
// operands that do not fit. (The step's value is read on the CPU only: on
// the device it is read by the kernel.)
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_OPTIMIZERSHAPE_H
#define CLEAVE_RUNTIME_OPS_OPTIMIZERSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// "f32[4, 8]": a tensor's element type and shape, for messages.
std::string typeText(const TensorRef &t);

/// Checks that optimizer state result `i` (adamw's moments, sgd's momentum
/// buffer) is f32 of the parameter's (result 0's) shape.
Status expectState(const KernelArgs &a, size_t i, const char *what);

/// accumulate_grad (grad) -> acc, updated in place: the same shape, and
/// grad of acc's type or a 16-bit float added into f32.
Status checkAccumulateGrad(const KernelArgs &a);

/// sgd's results: the parameter and, with momentum, its buffer.
Status checkSgdResults(const KernelArgs &a);

/// sgd's momentum attribute (default 0), which needs the momentum buffer
/// (result 1, f32 of the parameter's shape) exactly when it is not 0.
Status sgdMomentum(const KernelArgs &a, double &momentum);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_OPTIMIZERSHAPE_H
