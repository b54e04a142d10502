//===- ShardingRulesTest.cpp - units for the per-op sharding rules --------===//
//
// Each rule of ir/ShardingRules.cpp on the smallest op that shows it, in
// Shardy's notation (ShardingRule::str): which factors operands and results
// share, which are reductions (partial sums when split) and which must stay
// whole.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "ir/ShardingInterface.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Parses a function and gives the rule of its first op, or "no rule" /
/// "no interface".
class ShardingRules : public ::testing::Test {
protected:
  ShardingRules() {
    DialectRegistry registry;
    registerCleaveDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  std::string ruleOf(StringRef args, StringRef body) {
    std::string source =
        ("func.func @f(" + args + ") {\n" + body + "\n  return\n}").str();
    module = parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return "parse error";
    auto func = *module->getOps<func::FuncOp>().begin();
    Operation &op = func.getBody().front().front();
    auto rules = dyn_cast<ShardingRuleOpInterface>(&op);
    if (!rules)
      return "no interface";
    FailureOr<ShardingRule> rule = rules.getShardingRule();
    return succeeded(rule) ? rule->str() : "no rule";
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ShardingRules, ElementwiseSharesAFactorPerDimension) {
  EXPECT_EQ("([i, j], [i, j])->([i, j]) {i=4, j=8}",
            ruleOf("%a: tensor<4x8xf32>, %b: tensor<4x8xf32>",
                   "%0 = cleave.add %a, %b : (tensor<4x8xf32>, "
                   "tensor<4x8xf32>) -> tensor<4x8xf32>"));
}

TEST_F(ShardingRules, BroadcastDimensionsHaveNoFactor) {
  // A bias [8] aligns with the last dimension; a [4, 1] operand's 1 is
  // broadcast and never split.
  EXPECT_EQ("([i, j, k], [k])->([i, j, k]) {i=2, j=4, k=8}",
            ruleOf("%a: tensor<2x4x8xf32>, %b: tensor<8xf32>",
                   "%0 = cleave.add %a, %b : (tensor<2x4x8xf32>, "
                   "tensor<8xf32>) -> tensor<2x4x8xf32>"));
  EXPECT_EQ("([i, 1], [i, j])->([i, j]) {i=4, j=8}",
            ruleOf("%a: tensor<4x1xf32>, %b: tensor<4x8xf32>",
                   "%0 = cleave.mul %a, %b : (tensor<4x1xf32>, "
                   "tensor<4x8xf32>) -> tensor<4x8xf32>"));
}

TEST_F(ShardingRules, UnaryOpsAndCasts) {
  EXPECT_EQ("([i, j])->([i, j]) {i=2, j=8}",
            ruleOf("%x: tensor<2x8xf32>",
                   "%0 = cleave.gelu %x : tensor<2x8xf32>"));
  EXPECT_EQ("([i])->([i]) {i=8}",
            ruleOf("%x: tensor<8xf32>",
                   "%0 = cleave.cast %x : tensor<8xf32> -> tensor<8xbf16>"));
}

TEST_F(ShardingRules, MatmulContractsAReductionFactor) {
  // Column parallel splits k on the weight and the result; row parallel
  // splits l on both operands and leaves partial sums.
  EXPECT_EQ("([i, j, l], [l, k])->([i, j, k]) {i=2, j=4, k=16, l=32} "
            "reduction={l}",
            ruleOf("%x: tensor<2x4x32xf32>, %w: tensor<32x16xf32>",
                   "%0 = cleave.matmul %x, %w : (tensor<2x4x32xf32>, "
                   "tensor<32x16xf32>) -> tensor<2x4x16xf32>"));
}

TEST_F(ShardingRules, MatmulTransposedOperands) {
  // dw = x^T dy: the tokens are contracted.
  EXPECT_EQ("([k, i], [k, j])->([i, j]) {i=64, j=192, k=16} reduction={k}",
            ruleOf("%x: tensor<16x64xf32>, %dy: tensor<16x192xf32>",
                   "%0 = cleave.matmul %x, %dy {transpose_lhs} : "
                   "(tensor<16x64xf32>, tensor<16x192xf32>) -> "
                   "tensor<64x192xf32>"));
  // A head tied to an embedding [vocab, d] reads it transposed.
  EXPECT_EQ("([i, j, l], [k, l])->([i, j, k]) {i=2, j=4, k=16, l=8} "
            "reduction={l}",
            ruleOf("%h: tensor<2x4x8xf32>, %e: tensor<16x8xf32>",
                   "%0 = cleave.matmul %h, %e {transpose_rhs} : "
                   "(tensor<2x4x8xf32>, tensor<16x8xf32>) -> "
                   "tensor<2x4x16xf32>"));
}

TEST_F(ShardingRules, SumsArePartialMaximaStayWhole) {
  EXPECT_EQ("([i, j])->([i]) {i=4, j=8} reduction={j}",
            ruleOf("%x: tensor<4x8xf32>",
                   "%0 = cleave.reduce_sum %x {axes = array<i64: 1>, "
                   "keepdims = false} : tensor<4x8xf32> -> tensor<4xf32>"));
  EXPECT_EQ("([i, j])->([i, 1]) {i=4, j=8} need_replication={j}",
            ruleOf("%x: tensor<4x8xf32>",
                   "%0 = cleave.reduce_max %x {axes = array<i64: 1>, "
                   "keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>"));
}

TEST_F(ShardingRules, SoftmaxAxisAndNormalizedDimensionsStayWhole) {
  EXPECT_EQ("([i, j, k])->([i, j, k]) {i=2, j=4, k=8} need_replication={k}",
            ruleOf("%x: tensor<2x4x8xf32>",
                   "%0 = cleave.softmax %x {axis = 2 : i64} : "
                   "tensor<2x4x8xf32>"));
  EXPECT_EQ("([i, j, k], [k], [k])->([i, j, k]) {i=2, j=4, k=8} "
            "need_replication={k}",
            ruleOf("%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: "
                   "tensor<8xf32>",
                   "%0 = cleave.layer_norm %x scale %g bias %b {axis = 2 : "
                   "i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, "
                   "tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>"));
  EXPECT_EQ("([i, j], [j])->([i, j]) {i=4, j=8} need_replication={j}",
            ruleOf("%x: tensor<4x8xf32>, %g: tensor<8xf32>",
                   "%0 = cleave.rms_norm %x, %g {axis = 1 : i64, epsilon = "
                   "1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> "
                   "tensor<4x8xf32>"));
}

TEST_F(ShardingRules, TransposePermutesFactors) {
  EXPECT_EQ("([i, j, k, l])->([i, k, j, l]) {i=2, j=8, k=4, l=16}",
            ruleOf("%x: tensor<2x8x4x16xf32>",
                   "%0 = cleave.transpose %x {perm = array<i64: 0, 2, 1, 3>} "
                   ": tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>"));
}

TEST_F(ShardingRules, ReshapeSplitsAndMergesDimensions) {
  // Heads split out of the model dimension: [2, 8, 64] -> [2, 8, 4, 16].
  EXPECT_EQ("([i, j, kl])->([i, j, k, l]) {i=2, j=8, k=4, l=16}",
            ruleOf("%x: tensor<2x8x64xf32>",
                   "%0 = cleave.reshape %x : tensor<2x8x64xf32> -> "
                   "tensor<2x8x4x16xf32>"));
  // Tokens merged for the loss, a size-1 dimension dropped on the way.
  EXPECT_EQ("([i, 1, j, k])->([ij, k]) {i=2, j=4, k=16}",
            ruleOf("%x: tensor<2x1x4x16xf32>",
                   "%0 = cleave.reshape %x : tensor<2x1x4x16xf32> -> "
                   "tensor<8x16xf32>"));
}

TEST_F(ShardingRules, ReshapeRefinesBothShapes) {
  // nn.MultiheadAttention's export: [seq, batch, d] -> [seq, batch*heads,
  // head_dim], the heads split out of d and merged into the batch.
  EXPECT_EQ("([i, j, kl])->([i, jk, l]) {i=8, j=2, k=4, l=8}",
            ruleOf("%x: tensor<8x2x32xf32>",
                   "%0 = cleave.reshape %x : tensor<8x2x32xf32> -> "
                   "tensor<8x8x8xf32>"));
}

TEST_F(ShardingRules, ReshapeThatRegroupsHasNoRule) {
  EXPECT_EQ("no rule", ruleOf("%x: tensor<6x4xf32>",
                              "%0 = cleave.reshape %x : tensor<6x4xf32> -> "
                              "tensor<4x6xf32>"));
}

TEST_F(ShardingRules, EmbeddingVocabularyIsAReduction) {
  // Megatron-LM's vocab-parallel embedding: rows split, partial sums out.
  EXPECT_EQ("([i, j], [k, l])->([k, l, j]) {i=16, j=8, k=2, l=4} "
            "reduction={i}",
            ruleOf("%e: tensor<16x8xf32>, %ids: tensor<2x4xi64>",
                   "%0 = cleave.embedding %e, %ids : (tensor<16x8xf32>, "
                   "tensor<2x4xi64>) -> tensor<2x4x8xf32>"));
}

TEST_F(ShardingRules, SoftmaxCrossEntropyReducesClassesOverTheGroup) {
  // Megatron-LM's vocab-parallel cross-entropy: split classes are reduced
  // by the op's own lowering, the loss is whole.
  EXPECT_EQ("([i, j], [i])->([]) {i=8, j=16} reduction={i} "
            "group_reduction={j}",
            ruleOf("%l: tensor<8x16xf32>, %t: tensor<8xi64>",
                   "%0 = cleave.softmax_cross_entropy %l, %t {reduction = "
                   "#cleave.reduction<mean>} : (tensor<8x16xf32>, "
                   "tensor<8xi64>) -> tensor<f32>"));
  EXPECT_EQ("([i, j, k], [i, k])->([i, k]) {i=2, j=16, k=4} "
            "group_reduction={j}",
            ruleOf("%l: tensor<2x16x4xf32>, %t: tensor<2x4xi64>",
                   "%0 = cleave.softmax_cross_entropy %l, %t {reduction = "
                   "#cleave.reduction<none>} : (tensor<2x16x4xf32>, "
                   "tensor<2x4xi64>) -> tensor<2x4xf32>"));
}

TEST_F(ShardingRules, AttentionSplitsByHeads) {
  // Keys and the head width stay whole (inside the softmax).
  EXPECT_EQ("([i, j, k, m], [i, j, l, m], [i, j, l, n], [k, l])->([i, j, k, "
            "n]) {i=2, j=4, k=8, l=8, m=16, n=16} need_replication={l, m}",
            ruleOf("%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, "
                   "%v: tensor<2x4x8x16xf32>, %m: tensor<8x8xi1>",
                   "%0 = cleave.attention %q, %k, %v mask %m {scale = 0.25 "
                   ": f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, "
                   "tensor<2x4x8x16xf32>, tensor<8x8xi1>) -> "
                   "tensor<2x4x8x16xf32>"));
}

TEST_F(ShardingRules, GroupedQueryAttentionHeadsAreKeyValueTimesRepeats) {
  // 4 query heads over 2 key/value heads: q's heads are [kv, rep], so a
  // split over more ranks than kv heads splits rep too.
  EXPECT_EQ("([i, jk, l, n], [i, j, m, n], [i, j, m, o])->([i, jk, l, o]) "
            "{i=2, j=2, k=2, l=8, m=8, n=16, o=16} need_replication={m, n}",
            ruleOf("%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, "
                   "%v: tensor<2x2x8x16xf32>",
                   "%0 = cleave.attention %q, %k, %v {causal, scale = 0.25 "
                   ": f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, "
                   "tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>"));
}

TEST_F(ShardingRules, RotaryKeepsItsPairsWhole) {
  EXPECT_EQ("([i, j, k, l], [k, l], [k, l])->([i, j, k, l]) {i=2, j=4, k=8, "
            "l=16} need_replication={l}",
            ruleOf("%x: tensor<2x4x8x16xf32>, %c: tensor<8x16xf32>, %s: "
                   "tensor<8x16xf32>",
                   "%0 = cleave.rotary %x, %c, %s : (tensor<2x4x8x16xf32>, "
                   "tensor<8x16xf32>, tensor<8x16xf32>) -> "
                   "tensor<2x4x8x16xf32>"));
}

TEST_F(ShardingRules, SliceOfABlockSplitsItsInside) {
  // k out of a fused QKV projection: block 1 of 3; its inside is shared.
  EXPECT_EQ("([i, j, kl])->([i, j, l]) {i=2, j=8, k=3, l=64} "
            "need_replication={k}",
            ruleOf("%x: tensor<2x8x192xf32>",
                   "%0 = cleave.slice %x {start = array<i64: 0, 0, 64>, "
                   "limit = array<i64: 2, 8, 128>, step = array<i64: 1, 1, "
                   "1>} : tensor<2x8x192xf32> -> tensor<2x8x64xf32>"));
  // Any other slice keeps its dimension whole.
  EXPECT_EQ("([i])->([j]) {i=8, j=3} need_replication={i, j}",
            ruleOf("%x: tensor<8xf32>",
                   "%0 = cleave.slice %x {start = array<i64: 1>, limit = "
                   "array<i64: 4>, step = array<i64: 1>} : tensor<8xf32> "
                   "-> tensor<3xf32>"));
}

TEST_F(ShardingRules, ConcatOfEqualPartsIsBlocked) {
  EXPECT_EQ("([i, k], [i, k])->([i, jk]) {i=2, j=2, k=4} "
            "need_replication={j}",
            ruleOf("%a: tensor<2x4xf32>, %b: tensor<2x4xf32>",
                   "%0 = cleave.concat %a, %b {axis = 1 : i64} : "
                   "(tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>"));
  EXPECT_EQ("([i, k], [i, l])->([i, j]) {i=2, j=8, k=3, l=5} "
            "need_replication={j, k, l}",
            ruleOf("%a: tensor<2x3xf32>, %b: tensor<2x5xf32>",
                   "%0 = cleave.concat %a, %b {axis = 1 : i64} : "
                   "(tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>"));
}

TEST_F(ShardingRules, GatherKeepsTheIndexedDimensionWhole) {
  // Learned positions: rows picked by index, the width shared.
  EXPECT_EQ("([i, k], [j])->([j, k]) {i=32, j=8, k=64} need_replication={i}",
            ruleOf("%w: tensor<32x64xf32>, %i: tensor<8xi64>",
                   "%0 = cleave.gather %w, %i {axis = 0 : i64} : "
                   "(tensor<32x64xf32>, tensor<8xi64>) -> tensor<8x64xf32>"));
}

TEST_F(ShardingRules, BroadcastToHasNoFactorOnABroadcastDimension) {
  // Grouped-query attention's repeat of the key/value heads.
  EXPECT_EQ("([i, j, 1, l, m])->([i, j, k, l, m]) {i=2, j=2, k=2, l=8, m=16}",
            ruleOf("%x: tensor<2x2x1x8x16xf32>",
                   "%0 = cleave.broadcast_to %x : tensor<2x2x1x8x16xf32> -> "
                   "tensor<2x2x2x8x16xf32>"));
}

TEST_F(ShardingRules, OpsWithoutARuleAreNotShardedByPropagation) {
  EXPECT_EQ("no interface",
            ruleOf("%x: tensor<8xf32>",
                   "%0 = cleave.cumsum %x {axis = 0 : i64} : tensor<8xf32>"));
}

} // namespace
