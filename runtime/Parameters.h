//===- Parameters.h - parameters: made, gathered, saved ------*- C++ -*-===//
//
// The parameters of a program (program.proto's Parameter): read from a file
// slice or generated (Executor.h's file comment says how), and gathered from
// the slices of all ranks into full tensors for --save-params. The Runtime's
// members that do this live in Parameters.cpp; checkpoints (saving, loading,
// resharding) in Checkpoint.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_PARAMETERS_H
#define CLEAVE_RUNTIME_PARAMETERS_H

#include "runtime/Checkpoint.h"

#include "program.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

/// Element k of a "normal:STD" parameter (see Executor.h's file comment).
double generatedNormal(uint64_t seed, const std::string &name, uint64_t k);

/// The boxes of the full tensor a parameter's slice is, in the order its
/// tensor concatenates them along pieces_axis: its pieces, or the one box
/// slice_start/slice_size.
std::vector<Box> parameterBoxes(const program::Parameter &param);

/// The runs of a parameter's tensor in the full tensor, in the tensor's
/// order (`local` its element index): the slice's boxes concatenated, or
/// with flat_range (a sharded chunk) the range's elements of that.
std::vector<FlatRun> parameterRuns(const program::Parameter &param);

/// The full tensors of every parameter, in name order, assembled from what
/// each rank's Runtime::parameterSlices wrote (`all`, in rank order): an
/// error naming a parameter that ranks hold with different types or of
/// which some element is held by no rank.
Status assembleParameters(const std::vector<std::string> &all,
                          std::vector<NamedTensor> &full);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_PARAMETERS_H
