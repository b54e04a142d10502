//===- KernelSupport.cpp - the CPU kernels' choice of instruction set -----===//

#include "runtime/cpu/KernelSupport.h"

#include <cstdlib>
#include <string>

using namespace cleave::runtime;

bool cpu::useAvx2() {
  static const bool avx2 = [] {
    const char *isa = std::getenv("CLEAVE_CPU_ISA");
    if (isa && std::string(isa) == "baseline")
      return false;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return avx2;
}
