//===- ShardingInterface.h - the sharding-rule op interface ----*- C++ -*-===//

#ifndef CLEAVE_IR_SHARDINGINTERFACE_H
#define CLEAVE_IR_SHARDINGINTERFACE_H

#include "ir/ShardingRule.h"

#include "mlir/IR/OpDefinition.h"

#include "ir/ShardingInterface.h.inc"

namespace mlir {
class DialectRegistry;
namespace cleave {
/// Attaches the sharding rules of ir/ShardingRules.cpp to the cleave ops.
void registerShardingRules(DialectRegistry &registry);
} // namespace cleave
} // namespace mlir

#endif // CLEAVE_IR_SHARDINGINTERFACE_H
