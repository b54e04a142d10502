//===- Kernels.h - the CPU backend's kernel entry point --------*- C++ -*-===//
//
// One kernel per cleave dialect op (ir/CleaveOps.td gives each op's
// semantics, runtime/ops/OpTable.h what every backend checks first); the
// executor calls it with views of planned memory, outputs already shaped.
// Kernels are multithreaded with OpenMP and call OpenBLAS for products.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CPU_KERNELS_H
#define CLEAVE_RUNTIME_CPU_KERNELS_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/ops/OpTable.h"

#include <string>
#include <vector>

namespace cleave::runtime {

/// Runs dialect op `op` (its name without "cleave.", e.g. "layer_norm").
/// An absent optional operand is a TensorRef with null data. Returns an
/// error naming the op for an op or element type without a kernel, or
/// operands that do not fit the op.
Status runCpuKernel(const std::string &op, const Attributes &attributes,
                    const std::vector<TensorRef> &inputs,
                    const std::vector<TensorRef> &outputs);

/// The ops runCpuKernel implements, sorted.
const std::vector<std::string> &cpuKernelOps();

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_CPU_KERNELS_H
