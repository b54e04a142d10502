//===- DropoutStream.h - which draw of its stream each element is -*- C++ -*-===//
//
// dropout's mask (docs/dropout.md): element e of a rank's tensor is kept
// iff uniform53(key, counter(e)) >= ratio, then scaled by 1 / (1 - ratio).
//   key     = splitmix64(streamKey(seed, stream) ^ step)
//   counter = first_sample * per_sample + the row-major index of e in the
//             microbatch's FULL tensor (full_shape, the rank's slice at
//             offsets), per_sample = its elements / samples.
// first_sample (the microbatch's first sample within the step's global
// batch), samples (the microbatch's) and step (the data step, from 0) are
// the runtime's (Executor.h); the other attributes the compiler's. The CPU
// and CUDA kernels both read their plan here, so both draw the same mask.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_DROPOUTSTREAM_H
#define CLEAVE_RUNTIME_OPS_DROPOUTSTREAM_H

#include "runtime/Random.h"
#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// The most dimensions a dropout operand may have.
constexpr int kDropoutMaxRank = 8;

/// Everything a dropout kernel needs, by value (a CUDA kernel argument).
struct DropoutPlan {
  uint64_t key = 0;
  uint64_t base = 0; // first_sample * per_sample
  double ratio = 0;
  double scale = 1; // 1 / (1 - ratio)
  int rank = 0;
  int64_t localShape[kDropoutMaxRank] = {};
  int64_t offsets[kDropoutMaxRank] = {};
  int64_t fullStrides[kDropoutMaxRank] = {};

  /// The counter of element `i` (row-major) of the rank's tensor.
  CLEAVE_HOST_DEVICE uint64_t counter(int64_t i) const {
    uint64_t full = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t l = i % localShape[d];
      i /= localShape[d];
      full += uint64_t(l + offsets[d]) * uint64_t(fullStrides[d]);
    }
    return base + full;
  }
  CLEAVE_HOST_DEVICE bool kept(int64_t i) const {
    return uniform53(key, counter(i)) >= ratio;
  }
};

/// Reads and checks a dropout kernel's attributes and operands (x and the
/// result of one float type and shape).
Status dropoutPlan(const KernelArgs &a, DropoutPlan &plan);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_DROPOUTSTREAM_H
