//===- RankBoxes.h - a rank's slice of a sharded parameter as boxes -*- C++ -*-===//
//
// Tensor parallelism gives each rank a slice of a parameter: with a plain
// split one box of the full tensor, with a blocked sharding (`[3 blocks
// {"tensor"}, {}]`, GPT-2's fused QKV weight) the rank's part of every
// block, several boxes concatenated along the blocked dimension
// (docs/tensor-parallel.md, "How a parameter in the program describes
// several blocks"). The emitter writes them as runtime/program.proto's
// Parameter.pieces; the runtime initializes, reads, gathers and
// checkpoints parameters by them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_RANKBOXES_H
#define CLEAVE_PASSES_RANKBOXES_H

#include "ir/CleaveDialect.h"

#include "llvm/ADT/SmallVector.h"

namespace mlir::cleave {

/// Elements [start, start + size) per dimension of a full tensor.
struct TensorBox {
  llvm::SmallVector<int64_t> start, size;
};

/// A rank's slice: `boxes` concatenated along `axis` make a tensor of
/// `localShape` (one box: the slice itself, axis 0).
struct RankBoxes {
  llvm::SmallVector<TensorBox> boxes;
  int64_t axis = 0;
  llvm::SmallVector<int64_t> localShape;
};

/// The boxes of a tensor of `fullShape` sharded by `sharding` over `mesh`
/// that world rank `rank` holds, in the order its local tensor
/// concatenates them. Each dimension's axes (major to minor, whole axes and
/// sub-axes) give the rank an index among as many equal parts; a dimension
/// of n blocks is n blocks each cut so, the rank holding its part of each.
/// A rank's coordinate on a sub-axis `"a":(pre)size` of an axis of N ranks
/// is `(c / (N / (pre * size))) % size`; the rest of the axis replicates.
/// Fails, through `emitError`, on a partial sharding, an axis the mesh
/// lacks, a dimension its parts do not divide, or blocks in two dimensions
/// (whose parts are a grid, not a concatenation along one axis).
FailureOr<RankBoxes> rankBoxes(ArrayRef<int64_t> fullShape,
                               ShardingAttr sharding, MeshAttr mesh,
                               int64_t rank,
                               function_ref<InFlightDiagnostic()> emitError);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_RANKBOXES_H
