//===- IRTest.cpp - units for the dialect's shape rules ------------------===//

#include "ir/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

TEST(BroadcastShapes, AlignsOnTheRight) {
  auto r = broadcastShapes({2, 1, 8}, {4, 1});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(SmallVector<int64_t>({2, 4, 8}), *r);
}

TEST(BroadcastShapes, RejectsMismatch) {
  EXPECT_TRUE(failed(broadcastShapes({2, 3}, {4, 3})));
}

TEST(BroadcastShapes, ScalarBroadcastsToAnything) {
  auto r = broadcastShapes({}, {3, 5});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(SmallVector<int64_t>({3, 5}), *r);
}

TEST(InferTypes, MatmulBuildsWithoutAResultType) {
  MLIRContext context;
  context.loadDialect<CleaveDialect>();
  OpBuilder b(&context);
  auto loc = b.getUnknownLoc();
  auto module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());
  auto f32 = b.getF32Type();
  auto lhs = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({2, 3, 4}, f32), 1.0f));
  auto rhs = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({4, 5}, f32), 1.0f));
  auto mm = b.create<MatmulOp>(loc, lhs, rhs);
  EXPECT_EQ(RankedTensorType::get({2, 3, 5}, f32), mm.getType());
  module->destroy();
}
