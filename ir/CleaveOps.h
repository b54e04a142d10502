//===- CleaveOps.h - cleave dialect operations -----------------*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEOPS_H
#define CLEAVE_IR_CLEAVEOPS_H

#include "ir/CleaveDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::cleave {

/// Result type of a numpy-broadcasting binary op: the broadcast shape, with
/// `resultElementType` or, when null, the operands' common element type.
LogicalResult inferBroadcastResult(std::optional<Location> loc,
                                   ValueRange operands, Type resultElementType,
                                   SmallVectorImpl<Type> &inferred);

/// Result type of a reduction of `x` over `axes`.
LogicalResult inferReduceResult(std::optional<Location> loc, Value x,
                                ArrayRef<int64_t> axes, bool keepdims,
                                SmallVectorImpl<Type> &inferred);

/// Result type of a loss over `input: [N, C, d...]` and `target: [N, d...]`.
LogicalResult inferLossResult(std::optional<Location> loc, Value input,
                              Value target, LossReduction reduction,
                              SmallVectorImpl<Type> &inferred);

/// The numpy broadcast of two shapes, or failure when they do not broadcast.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);

/// Checks an embedding's optional `padding_idx` against its table of
/// `vocab` rows (embedding and embedding_grad share it).
LogicalResult verifyPaddingIdx(Operation *op, std::optional<int64_t> row,
                               int64_t vocab);

/// Registers the cleave dialect and the dialects it builds on.
void registerCleaveDialects(DialectRegistry &registry);

} // namespace mlir::cleave

#define GET_OP_CLASSES
#include "ir/CleaveOps.h.inc"

#endif // CLEAVE_IR_CLEAVEOPS_H
