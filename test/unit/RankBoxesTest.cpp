//===- RankBoxesTest.cpp - a rank's boxes of a sharded parameter ----------===//
//
// passes/RankBoxes.h on the shardings tensor parallelism gives parameters
// (docs/tensor-parallel.md): a plain split of either dimension, GPT-2's
// fused QKV weight in 3 blocks, grouped-query attention's key/value heads
// over a sub-axis, replicated; and the shardings it refuses.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/RankBoxes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

class RankBoxesTest : public ::testing::Test {
protected:
  RankBoxesTest() {
    DialectRegistry registry;
    registerCleaveDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// The boxes of rank `rank` of mesh `meshText` as "[start]+[size], ..."
  /// then " along AXIS -> [local]", or the error.
  std::string boxesOf(StringRef meshText, StringRef shardingText,
                      ArrayRef<int64_t> shape, int64_t rank) {
    auto mesh = parseAttribute(meshText, &context).dyn_cast_or_null<MeshAttr>();
    auto sharding =
        parseAttribute(shardingText, &context).dyn_cast_or_null<ShardingAttr>();
    if (!mesh || !sharding)
      return "parse error";
    std::string error;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      error = d.str();
      return success();
    });
    FailureOr<RankBoxes> boxes = rankBoxes(
        shape, sharding, mesh, rank,
        [&] { return emitError(UnknownLoc::get(&context)); });
    if (failed(boxes))
      return "error: " + error;
    auto ints = [](ArrayRef<int64_t> v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    };
    std::string out;
    for (const TensorBox &b : boxes->boxes)
      out += (out.empty() ? "" : ", ") + ints(b.start) + "+" + ints(b.size);
    return out + " along " + std::to_string(boxes->axis) + " -> " +
           ints(boxes->localShape);
  }

  MLIRContext context;
};

const char *kTensor2 = R"(#cleave.mesh<["data"=2, "tensor"=2]>)";
const char *kTensor4 = R"(#cleave.mesh<["tensor"=4]>)";

TEST_F(RankBoxesTest, PlainSplitOfDimension0) {
  // Rank 3 of data 2 x tensor 2 is tensor coordinate 1.
  EXPECT_EQ(boxesOf(kTensor2, R"(#cleave.sharding<[{"tensor"}, {} ]>)",
                    {256, 64}, 3),
            "[128, 0]+[128, 64] along 0 -> [128, 64]");
  EXPECT_EQ(boxesOf(kTensor2, R"(#cleave.sharding<[{"tensor"}, {} ]>)",
                    {256, 64}, 2),
            "[0, 0]+[128, 64] along 0 -> [128, 64]");
}

TEST_F(RankBoxesTest, PlainSplitOfDimension1) {
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[{}, {"tensor"} ]>)",
                    {64, 256}, 2),
            "[0, 128]+[64, 64] along 0 -> [64, 64]");
}

TEST_F(RankBoxesTest, BlockedC_attnHoldsItsPartOfEveryBlock) {
  // docs/tensor-parallel.md: c_attn.weight [192, 64], T = 2, rank 1.
  const char *sharding = R"(#cleave.sharding<[3 blocks {"tensor"}, {} ]>)";
  EXPECT_EQ(boxesOf(R"(#cleave.mesh<["tensor"=2]>)", sharding, {192, 64}, 1),
            "[32, 0]+[32, 64], [96, 0]+[32, 64], [160, 0]+[32, 64] along 0 "
            "-> [96, 64]");
  EXPECT_EQ(boxesOf(R"(#cleave.mesh<["tensor"=2]>)", sharding, {192, 64}, 0),
            "[0, 0]+[32, 64], [64, 0]+[32, 64], [128, 0]+[32, 64] along 0 "
            "-> [96, 64]");
  // Its bias, and blocks of the second dimension.
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[3 blocks {"tensor"} ]>)",
                    {192}, 3),
            "[48]+[16], [112]+[16], [176]+[16] along 0 -> [48]");
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[{}, 2 blocks {"tensor"} ]>)",
                    {8, 16}, 1),
            "[0, 2]+[8, 2], [0, 10]+[8, 2] along 1 -> [8, 4]");
}

TEST_F(RankBoxesTest, SubAxesReplicateOverTheRest) {
  // wk [32, 64] over "tensor":(1)2 of T = 4: ranks 0, 1 hold head 0, ranks
  // 2, 3 head 1; "tensor":(2)2 is the minor half.
  const char *major = R"(#cleave.sharding<[{"tensor":(1)2}, {} ]>)";
  const char *minor = R"(#cleave.sharding<[{"tensor":(2)2}, {} ]>)";
  for (int64_t r = 0; r < 4; ++r) {
    std::string start = r < 2 ? "[0, 0]" : "[16, 0]";
    EXPECT_EQ(boxesOf(kTensor4, major, {32, 64}, r),
              start + "+[16, 64] along 0 -> [16, 64]")
        << "rank " << r;
    start = r % 2 == 0 ? "[0, 0]" : "[16, 0]";
    EXPECT_EQ(boxesOf(kTensor4, minor, {32, 64}, r),
              start + "+[16, 64] along 0 -> [16, 64]")
        << "rank " << r;
  }
  // Two axes on one dimension, major to minor.
  EXPECT_EQ(boxesOf(kTensor2, R"(#cleave.sharding<[{"data", "tensor"}, {} ]>)",
                    {8, 2}, 2),
            "[4, 0]+[2, 2] along 0 -> [2, 2]");
}

TEST_F(RankBoxesTest, ReplicatedIsTheWhole) {
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[{}, {} ]>)", {6, 4}, 3),
            "[0, 0]+[6, 4] along 0 -> [6, 4]");
  // Blocks over no split are one box too.
  EXPECT_EQ(boxesOf(R"(#cleave.mesh<["tensor"=1]>)",
                    R"(#cleave.sharding<[3 blocks {"tensor"}, {} ]>)",
                    {12, 4}, 0),
            "[0, 0]+[12, 4] along 0 -> [12, 4]");
}

TEST_F(RankBoxesTest, RefusedShardings) {
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[{"tensor"}, {} ]>)",
                    {6, 4}, 0),
            "error: dimension 0 (size 6) is not divisible by the 4 pieces of "
            "sharding #cleave.sharding<[{\"tensor\"}, {}]>");
  EXPECT_EQ(boxesOf(kTensor4,
                    R"(#cleave.sharding<[2 blocks {"tensor":(1)2}, 2 blocks {"tensor":(2)2} ]>)",
                    {8, 8}, 0),
            "error: sharding #cleave.sharding<[2 blocks {\"tensor\":(1)2}, 2 "
            "blocks {\"tensor\":(2)2}]> has blocks in dimensions 0 and 1: a "
            "rank's slice would be a grid of boxes, not boxes concatenated "
            "along one dimension");
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[{"data"}, {} ]>)", {8, 8},
                    0),
            "error: mesh axis \"data\" of sharding #cleave.sharding<[{\"data\"}, "
            "{}]> is not in the mesh #cleave.mesh<[\"tensor\"=4]>");
  EXPECT_EQ(boxesOf(kTensor4, R"(#cleave.sharding<[{}, {} ], partial = ["tensor"]>)",
                    {8, 8}, 0),
            "error: a parameter's sharding #cleave.sharding<[{}, {}], partial = "
            "[\"tensor\"]> is partial: a parameter is held whole or split, "
            "never as a partial sum");
}

} // namespace
