//===- ShardingInterface.td - how an op may be sharded -----*- tablegen -*-===//
//
// The per-op sharding rule, as openxla/shardy's OpShardingRule: every
// dimension of every operand and result is a product of named factors;
// a factor shared by operands and results is where a sharding propagates,
// a reduction factor that is split makes the results partial sums. Later
// passes (tensor-parallel propagation, collective insertion) ask an op for
// its rule instead of growing a list of op cases.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_INTERFACE_TD
#define CLEAVE_SHARDING_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Cleave_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    How the op's operands and results may be split over a device mesh,
    as factors (ir/ShardingRule.h). A matmul
    `[M, K] x [K, N] -> [M, N]` has the rule `([i, k], [k, j]) -> ([i, j])`
    with `k` a reduction factor: splitting `j` on both `rhs` and the result
    needs no communication (column parallel); splitting `k` on both
    operands makes the result a partial sum (row parallel) that an
    all-reduce or reduce-scatter completes.

    The rules are attached to the ops as external models in
    ir/ShardingRules.cpp (one function per op family), so the op
    definitions do not change when a rule does.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{The op's sharding rule, or failure when no split of any
                 dimension is valid without gathering it first (a reshape
                 that is not a split or merge of dimensions).}],
      /*retTy=*/"::mlir::FailureOr<::mlir::cleave::ShardingRule>",
      /*methodName=*/"getShardingRule",
      /*args=*/(ins)>
  ];
}

#endif // CLEAVE_SHARDING_INTERFACE_TD
