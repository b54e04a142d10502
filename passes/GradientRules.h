//===- GradientRules.h - one reverse-mode rule per dialect op --*- C++ -*-===//
//
// cleave-autodiff walks a function backwards and asks, for each op, the
// gradients of its operands from the gradients of its results. The rules
// build dialect ops only (the *_grad ops of ir/CleaveOps.td where a fused
// kernel pays, plain elementwise ops elsewhere), so the backward pass is
// ordinary IR that later passes and cleave-opt see like any other.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_GRADIENTRULES_H
#define CLEAVE_PASSES_GRADIENTRULES_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::cleave {

/// Whether gradients flow through values of `type` (float tensors).
bool isDifferentiable(Type type);

/// Builds the gradients of `op`'s operands. `resultGrads[i]` is the gradient
/// of result i, or null where nothing depends on it; `wanted[j]` says
/// whether operand j needs a gradient. On success `operandGrads[j]` is the
/// gradient of operand j (null where not wanted or not differentiable). An
/// op without a rule is an error naming it.
LogicalResult buildOperandGradients(OpBuilder &b, Operation *op,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads);

/// `grad` summed over the dimensions that numpy broadcasting added or
/// stretched, so that it has `target`'s shape.
Value unbroadcast(OpBuilder &b, Location loc, Value grad, Type target);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_GRADIENTRULES_H
