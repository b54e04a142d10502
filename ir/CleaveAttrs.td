//===- CleaveAttrs.td - cleave dialect attributes ----------*- tablegen -*-===//
//
// Attributes of the cleave dialect. Sharding attributes for tensor and
// sharded-data parallelism join the loss reduction here.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ATTRS_TD
#define CLEAVE_ATTRS_TD

include "ir/CleaveDialect.td"
include "mlir/IR/EnumAttr.td"

def Cleave_LossReductionEnum : I32EnumAttr<"LossReduction",
    "how a loss is reduced over its samples", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

def Cleave_LossReductionAttr
    : EnumAttr<Cleave_Dialect, Cleave_LossReductionEnum, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // CLEAVE_ATTRS_TD
