//===- OverlapGradients.h - gradient all-reduce overlapping backward -*- C++ -*-===//
//
// Data parallelism overlapping backward: each bucket's gradient all-reduce
// (over the "data" group, at the optimizer's start) is started instead in
// the step's last backward, right after the instruction that finishes the
// bucket's gradients, and the optimizer waits for it (Collective.event and
// Event.wait). The last microbatch's backward becomes a function of its own
// for that. A program without a data group of two or more ranks is left as
// it is.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_OVERLAPGRADIENTS_H
#define CLEAVE_PASSES_OVERLAPGRADIENTS_H

#include <cstdint>

namespace cleave::program {
class Program;
}

namespace mlir::cleave {

void overlapGradientReduction(::cleave::program::Program &program,
                              int64_t microbatches);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_OVERLAPGRADIENTS_H
