//===- CleaveDialect.cpp - dialect registration and attributes -----------===//

#include "ir/CleaveDialect.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "ir/ShardingInterface.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#include "ir/CleaveDialect.cpp.inc"
#include "ir/CleaveEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/CleaveAttrs.cpp.inc"

void CleaveDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/CleaveOps.cpp.inc"
      >();
  registerAttributes();
  registerTypes();
  registerDistributionOps();
}

void CleaveDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/CleaveAttrs.cpp.inc"
      >();
}

void mlir::cleave::registerCleaveDialects(DialectRegistry &registry) {
  registry.insert<CleaveDialect, func::FuncDialect>();
  registerShardingRules(registry);
}
