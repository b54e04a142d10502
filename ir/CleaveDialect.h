//===- CleaveDialect.h - the cleave dialect and its attributes -*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEDIALECT_H
#define CLEAVE_IR_CLEAVEDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "ir/CleaveDialect.h.inc"
#include "ir/CleaveEnums.h.inc"

namespace mlir::cleave {
/// One entry of a dimension's axes in a `#cleave.sharding`: a whole mesh
/// axis (size 0) or its sub-axis of `size` ranks after factors of product
/// `preSize` (openxla/shardy's `"axis":(pre)size`): on an axis of n ranks,
/// coordinate `c` has sub-axis coordinate `(c / (n / (preSize * size))) %
/// size`.
struct AxisRef {
  llvm::StringRef name;
  int64_t preSize = 1;
  int64_t size = 0;
  bool isWhole() const { return size == 0; }
};
} // namespace mlir::cleave

#define GET_ATTRDEF_CLASSES
#include "ir/CleaveAttrs.h.inc"

#endif // CLEAVE_IR_CLEAVEDIALECT_H
