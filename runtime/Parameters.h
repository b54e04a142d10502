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

#include <google/protobuf/repeated_field.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

/// Element k of a "normal:STD" parameter (see Executor.h's file comment).
double generatedNormal(uint64_t seed, const std::string &name, uint64_t k);

/// Calls f(fullIndex, sliceIndex, count) for each run of `count` elements
/// that are contiguous in both the full row-major tensor and the slice.
template <typename F>
void forEachSliceRun(const google::protobuf::RepeatedField<int64_t> &full,
                     const google::protobuf::RepeatedField<int64_t> &start,
                     const google::protobuf::RepeatedField<int64_t> &size,
                     F &&f) {
  int rank = full.size();
  int64_t total = 1;
  bool whole = true;
  for (int d = 0; d < rank; ++d) {
    total *= size[d];
    whole &= size[d] == full[d];
  }
  if (total == 0)
    return;
  if (whole) {
    f(int64_t(0), int64_t(0), total);
    return;
  }
  std::vector<int64_t> stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    stride[d] = stride[d + 1] * full[d + 1];
  int64_t run = size[rank - 1];
  std::vector<int64_t> index(rank, 0);
  for (int64_t sliceIndex = 0; sliceIndex < total; sliceIndex += run) {
    int64_t fullIndex = 0;
    for (int d = 0; d < rank; ++d)
      fullIndex += (start[d] + index[d]) * stride[d];
    f(fullIndex, sliceIndex, run);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < size[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_PARAMETERS_H
