//===- OptimizerShape.h - the optimizer ops' checks ------------*- C++ -*-===//
//
// What the CPU (optimizer.cpp) and CUDA (cuda/optimizer.cu) kernels of
// accumulate_grad and sgd share, so both say the same about operands that
// do not fit. (The step's value is read on the CPU only: on the device it
// is read by the kernel.)
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CPU_OPTIMIZERSHAPE_H
#define CLEAVE_RUNTIME_CPU_OPTIMIZERSHAPE_H

#include "runtime/cpu/KernelSupport.h"

namespace cleave::runtime::cpu {

/// accumulate_grad (grad) -> acc, updated in place: the same shape, and
/// grad of acc's type or a 16-bit float added into f32.
Status checkAccumulateGrad(const KernelArgs &a);

/// sgd's results: the parameter and, with momentum, its buffer.
Status checkSgdResults(const KernelArgs &a);

/// sgd's momentum attribute (default 0), which needs the momentum buffer
/// (result 1, f32 of the parameter's shape) exactly when it is not 0.
Status sgdMomentum(const KernelArgs &a, double &momentum);

} // namespace cleave::runtime::cpu

#endif // CLEAVE_RUNTIME_CPU_OPTIMIZERSHAPE_H
