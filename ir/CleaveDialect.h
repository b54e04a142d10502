//===- CleaveDialect.h - the cleave dialect and its attributes -*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEDIALECT_H
#define CLEAVE_IR_CLEAVEDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "ir/CleaveDialect.h.inc"
#include "ir/CleaveEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/CleaveAttrs.h.inc"

#endif // CLEAVE_IR_CLEAVEDIALECT_H
