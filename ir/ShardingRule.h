//===- ShardingRule.h - how an op's dimensions may be split -----*- C++ -*-===//
//
// The value the sharding-rule interface returns (openxla/shardy's
// OpShardingRuleAttr, as a plain struct): each dimension of each operand
// and result is a product of factors, major to minor. A factor that
// appears in several operands and results must be split the same way in
// all of them: that is how a sharding propagates through the op.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_SHARDINGRULE_H
#define CLEAVE_IR_SHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::cleave {

enum class FactorKind {
  /// Split freely: each rank computes its slice of the results.
  Parallel,
  /// Summed over by the op: split, each rank computes a partial sum of the
  /// results (the results' sharding gets the axes as `partial`).
  Reduction,
  /// Must not be split (a softmax's axis, a norm's normalized dimensions):
  /// the operand is gathered along it first.
  NeedReplication,
  /// Reduced by the op itself when split: each rank reduces its slice and
  /// the op's lowering combines the group's results with collectives of
  /// its own, so the results are whole, not partial (Megatron-LM's
  /// vocab-parallel softmax-cross-entropy all-reduces the max, the sum of
  /// exponentials and the target's logit over the group).
  GroupReduction,
};

struct ShardingRule {
  /// Per factor: its size and kind.
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<FactorKind> factorKinds;
  /// Per operand (result), per dimension: its factors, major to minor.
  /// A dimension with none has size 1 and is broadcast: never split.
  using DimFactors = llvm::SmallVector<int64_t, 1>;
  llvm::SmallVector<llvm::SmallVector<DimFactors>> operandFactors;
  llvm::SmallVector<llvm::SmallVector<DimFactors>> resultFactors;

  int64_t addFactor(int64_t size, FactorKind kind) {
    factorSizes.push_back(size);
    factorKinds.push_back(kind);
    return int64_t(factorSizes.size()) - 1;
  }
  int64_t getNumFactors() const { return factorSizes.size(); }

  /// Shardy's notation, factors named i, j, k, ... in order:
  /// `([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}`; a
  /// dimension of several factors prints as `ij`, one of none as `1`.
  std::string str() const;
};

} // namespace mlir::cleave

#endif // CLEAVE_IR_SHARDINGRULE_H
