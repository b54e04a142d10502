//===- ValueOrigins.h - what a value was made from -------------*- C++ -*-===//
//
// Walks back through the ops that only relabel or re-lay a value (casts,
// reshapes, transposes), so that passes recognizing a value's role (the
// token ids an embedding looks up) agree on what counts as the same value.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_VALUEORIGINS_H
#define CLEAVE_PASSES_VALUEORIGINS_H

#include "ir/CleaveOps.h"

namespace mlir::cleave {

/// `v` through casts, reshapes and transposes back to what made it.
inline Value throughLayout(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<CastOp, ReshapeOp, TransposeOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// Whether `ids` are the model's input (a function argument, perhaps cast
/// or reshaped), not computed (OPT's learned positions).
inline bool isModelInput(Value ids) {
  return throughLayout(ids).isa<BlockArgument>();
}

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_VALUEORIGINS_H
