//===- Kernels.h - the CPU backend's kernel entry point --------*- C++ -*-===//
//
// One kernel per cleave dialect op (ir/CleaveOps.td gives each op's
// semantics). The executor calls runKernel with views of planned memory; the
// outputs are allocated and shaped already. Kernels are multithreaded with
// OpenMP and call OpenBLAS for matrix products.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CPU_KERNELS_H
#define CLEAVE_RUNTIME_CPU_KERNELS_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace cleave::runtime {

/// An op attribute, as program.proto's Attribute carries it. Float
/// attributes come as `f`, integers and bools as `i`, enums (reduction,
/// approximate) as `s`, arrays (axes, perm, start/limit/step) as `ints`.
struct AttrValue {
  enum class Kind { Int, Float, String, Ints } kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};
using Attributes = std::map<std::string, AttrValue>;

/// The checks every backend makes before running dialect op `op`: the
/// numbers of operands and results, required operands present, no negative
/// dimension, element types defined. Each kernel then checks only what is
/// particular to its op.
Status checkKernelOperands(const std::string &op,
                           const std::vector<TensorRef> &inputs,
                           const std::vector<TensorRef> &outputs);

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
