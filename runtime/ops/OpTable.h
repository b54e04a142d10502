//===- OpTable.h - the dialect ops as every backend receives them - C++ -*-===//
//
// What a backend is handed for one op of a program: its attributes (as
// program.proto carries them) and the checks every backend makes before
// running it (operand and result counts from the op table, required
// operands present, dimensions and element types defined). The executor,
// the CPU backend (runtime/cpu/) and the CUDA backend (runtime/cuda/) all
// include this; it belongs to neither backend, hence its own folder.
// Plain C++17: no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_OPTABLE_H
#define CLEAVE_RUNTIME_OPS_OPTABLE_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <cstdint>
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

/// The ops of the table, sorted.
const std::vector<std::string> &tableOps();

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_OPS_OPTABLE_H
