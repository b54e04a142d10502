//===- DistributionOps.h - collectives, transfers, mesh checks -*- C++ -*-===//
//
// Included only by what builds or reads communication ops, so that the
// dialect's widely included headers stay as they were.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_DISTRIBUTIONOPS_H
#define CLEAVE_IR_DISTRIBUTIONOPS_H

#include "ir/CleaveDialect.h"
#include "ir/CleaveOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#define GET_TYPEDEF_CLASSES
#include "ir/CleaveTypes.h.inc"

#define GET_OP_CLASSES
#include "ir/DistributionOps.h.inc"

namespace mlir::cleave {

/// The `cleave.mesh` of the nearest enclosing op that has one (a stage
/// module inherits its parent's), or null.
MeshAttr lookupMesh(Operation *op);

/// The parameter `name` as `user` sees it: the nearest symbol table's, or,
/// in a pipeline stage module, a parameter of another stage on the same
/// pipeline rank (stage k and stage j share a rank when k = j mod the
/// mesh's pipeline size): a rank's merged optimizer
/// (cleave-merge-chunk-optimizers) sits in one of its stages and updates the
/// parameters of all of them. Null when there is none.
ParameterOp lookupParameter(Operation *user, FlatSymbolRefAttr name);

/// The modules whose functions run on one rank together with `module`'s:
/// for a pipeline stage module, every stage module on the same pipeline
/// rank (stage k and stage j when k = j mod the mesh's pipeline size), in
/// stage order; otherwise `module` alone.
SmallVector<ModuleOp> rankModules(ModuleOp module);

/// Checks `sharding` against a value of `type` on `mesh`: one entry per
/// dimension, every axis in the mesh, each split dimension divisible by
/// its axes' sizes. Reports through `emitError`.
LogicalResult verifySharding(ShardingAttr sharding, Type type, MeshAttr mesh,
                             function_ref<InFlightDiagnostic()> emitError);

/// The number of ranks in the group spanned by `axes` on `mesh`, or
/// failure (reported) when an axis is missing, repeated, or there are none.
FailureOr<int64_t> groupSize(ArrayRef<StringRef> axes, MeshAttr mesh,
                             function_ref<InFlightDiagnostic()> emitError);

/// How a parameter's optimizer state is split (ZeRO-1, `cleave.state_axis`):
/// the parameter viewed flat and padded with zeros to `ranks * chunk`
/// elements, the rank at coordinate c on `axis` owning elements
/// [c * chunk, (c + 1) * chunk). Its gradient and parameter buffers are
/// planned at the padded size, its state tensors at `chunk`. A chunk is
/// ceil(elements / ranks) rounded up to whole kStateChunkAlignment bytes
/// (of the narrower of the parameter's type and its `cleave.working_type`),
/// so that every rank's chunk starts where a tensor may.
inline constexpr int64_t kStateChunkAlignment = 64;

struct StateShards {
  StringRef axis;
  int64_t ranks = 1;
  int64_t elements = 0; // the parameter's, without padding
  int64_t chunk = 0;
  int64_t padded() const { return ranks * chunk; }
};

/// The parameter's split, or nullopt when it has no `cleave.state_axis`
/// or the axis is not in the enclosing mesh (the attribute's verifier
/// reports that).
std::optional<StateShards> stateShards(ParameterOp param);

/// The type of one chunk of `param`'s split state: 1-D, `chunk` elements
/// of the parameter's element type.
RankedTensorType chunkType(ParameterOp param, const StateShards &shards);

/// The type functions read `param` in and a rank stores it whole in: its
/// `cleave.working_type` copy's (ZeRO-1's split fp32 masters), else its
/// own.
RankedTensorType readType(ParameterOp param);

} // namespace mlir::cleave

#endif // CLEAVE_IR_DISTRIBUTIONOPS_H
