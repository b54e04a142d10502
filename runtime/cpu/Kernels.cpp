//===- Kernels.cpp - dispatch of the CPU kernels --------------------------===//
// (The kernels themselves are being written; this dispatch knows none yet.)

#include "runtime/cpu/Kernels.h"

using namespace cleave::runtime;

Status cleave::runtime::runCpuKernel(const std::string &op,
                                     const Attributes &,
                                     const std::vector<TensorRef> &,
                                     const std::vector<TensorRef> &) {
  return Status::error(op + ": no CPU kernel");
}

const std::vector<std::string> &cleave::runtime::cpuKernelOps() {
  static const std::vector<std::string> ops;
  return ops;
}
