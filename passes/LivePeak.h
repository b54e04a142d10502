//===- LivePeak.h - the live tensor bytes a stage's functions hold -*- C++ -*-===//
//
// The runtime measures memory as the bytes of live tensors (Executor.h,
// "Measured peak"): a tensor is live from the instruction that writes it
// (or the runtime's fill) until its Free; parameters and constants always.
// The arena the memory plan sizes holds more (alignment, first-fit holes),
// so its extent is only an upper bound of that. This analysis predicts the
// measured number itself, per memory space: it replays each function of a
// planned stage module with the frees the emitter will give it
// (EmitFunction.cpp: a value that a kernel, collective or copy writes is
// freed after its last reader when that reader is not a send, a return or
// a gradient bucket; a saved value in the backward that reads it last;
// received values and inputs never), counting the bytes the runtime counts
// (unaligned; a gathered ZeRO-3 parameter by its padded space, its whole
// view not again). The plan analysis combines the profiles of a rank's
// stages along its schedule (livePeakOfRank).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_LIVEPEAK_H
#define CLEAVE_PASSES_LIVEPEAK_H

#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <cstdint>

namespace mlir::cleave {

/// One stage module's live bytes, per memory space (0: device, 1: host).
struct LiveProfile {
  /// Live from the second step on whatever runs: parameters, gradients,
  /// optimizer state, constants, the inputs the runtime fills, and what a
  /// function writes but nothing frees (received and sent values, the
  /// loss), once per copy of the function the emitter makes (a pipeline
  /// stage's slots).
  std::array<int64_t, 2> persistent = {0, 0};
  /// What one microbatch's forward leaves for its backward (freed there).
  std::array<int64_t, 2> saved = {0, 0};
  /// The most bytes above the persistent ones and the other microbatches
  /// in flight while each function runs (the backward's from its own
  /// microbatch's saved bytes on).
  std::array<int64_t, 2> forwardPeak = {0, 0}, backwardPeak = {0, 0},
                         optimizerPeak = {0, 0};
  /// The emitter's copies of the forward and backward (slots; at least 1).
  int64_t copies = 1;
};

/// The profile of a stage module (or the one module of a layout without
/// pipeline) that cleave-memory-plan has planned, in its final form (after
/// cleave-stage-transfers).
LiveProfile liveProfileOf(ModuleOp stage);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_LIVEPEAK_H
