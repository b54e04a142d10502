//===- DistributionOps.h - collectives, transfers, mesh checks -*- C++ -*-===//
//
// Included only by what builds or reads communication ops, so that the
// dialect's widely included headers stay as they were.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_DISTRIBUTIONOPS_H
#define CLEAVE_IR_DISTRIBUTIONOPS_H

#include "ir/CleaveDialect.h"

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

/// Checks `sharding` against a value of `type` on `mesh`: one entry per
/// dimension, every axis in the mesh, each split dimension divisible by
/// its axes' sizes. Reports through `emitError`.
LogicalResult verifySharding(ShardingAttr sharding, Type type, MeshAttr mesh,
                             function_ref<InFlightDiagnostic()> emitError);

/// The number of ranks in the group spanned by `axes` on `mesh`, or
/// failure (reported) when an axis is missing, repeated, or there are none.
FailureOr<int64_t> groupSize(ArrayRef<StringRef> axes, MeshAttr mesh,
                             function_ref<InFlightDiagnostic()> emitError);

} // namespace mlir::cleave

#endif // CLEAVE_IR_DISTRIBUTIONOPS_H
