//===- CostModelTest.cpp - the cost model's FLOPs, rates and files --------===//

#include "ir/CleaveDialect.h"
#include "ir/CleaveOps.h"
#include "passes/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The checkout (CMake passes it: __FILE__ is relative under ccache's
/// CCACHE_BASEDIR).
std::string sourceRoot() { return CLEAVE_SOURCE_DIR; }

TEST(CostModel, CheckedInRatesAreTheDefaults) {
  for (const char *backend : {"cpu", "h100"}) {
    llvm::SmallString<256> path(sourceRoot());
    llvm::sys::path::append(path, "data", "rates",
                            std::string(backend) + ".json");
    llvm::Expected<Rates> file = readRates(path);
    ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
    llvm::Expected<Rates> defaults = defaultRates(backend);
    ASSERT_TRUE(bool(defaults));
    EXPECT_EQ(file->backend, backend);
    EXPECT_DOUBLE_EQ(file->flopsPerSecond, defaults->flopsPerSecond);
    EXPECT_DOUBLE_EQ(file->bytesPerSecond, defaults->bytesPerSecond);
    EXPECT_DOUBLE_EQ(file->linkBytesPerSecond, defaults->linkBytesPerSecond);
    EXPECT_DOUBLE_EQ(file->linkLatencySeconds, defaults->linkLatencySeconds);
    EXPECT_DOUBLE_EQ(file->hostBytesPerSecond, defaults->hostBytesPerSecond);
    EXPECT_GT(file->hostBytesPerSecond, 0);
  }
  llvm::Expected<Rates> none = defaultRates("tpu");
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("cpu, h100"),
            std::string::npos);
}

std::string writeTemp(const std::string &text) {
  llvm::SmallString<128> path;
  llvm::sys::fs::createTemporaryFile("rates", "json", path);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  os << text;
  return std::string(path);
}

TEST(CostModel, BadRatesFilesNameTheProblem) {
  auto error = [](const std::string &text) {
    llvm::Expected<Rates> r = readRates(writeTemp(text));
    return r ? std::string("accepted") : llvm::toString(r.takeError());
  };
  EXPECT_NE(error("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error("[1]").find("expects an object"), std::string::npos);
  EXPECT_NE(error("{\"flops_per_second\": 1e9}").find(
                "'bytes_per_second' is missing or not a number"),
            std::string::npos);
  EXPECT_NE(error("{\"flops_per_second\": -1, \"bytes_per_second\": 1, "
                  "\"link_bytes_per_second\": 1, \"link_latency_seconds\": 0}")
                .find("'flops_per_second' must be positive"),
            std::string::npos);
  EXPECT_NE(readRates("/nonexistent/rates.json")
                .takeError()
                .operator bool(),
            false);
  const char *withoutHost =
      "{\"flops_per_second\": 1e9, \"bytes_per_second\": 8e9, "
      "\"link_bytes_per_second\": 1e9, \"link_latency_seconds\": 0";
  EXPECT_NE(error(std::string(withoutHost) + ", \"host_bytes_per_second\": 0}")
                .find("'host_bytes_per_second' must be positive"),
            std::string::npos);
  EXPECT_NE(
      error(std::string(withoutHost) + ", \"host_bytes_per_second\": \"x\"}")
          .find("'host_bytes_per_second' is not a number"),
      std::string::npos);
  // A file from before the host rate: a copy's bytes read and written at
  // the memory rate, as such files were read.
  llvm::Expected<Rates> old = readRates(writeTemp(std::string(withoutHost) + "}"));
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  EXPECT_DOUBLE_EQ(old->hostBytesPerSecond, 4e9);
  Rates r = *defaultRates("cpu");
  llvm::Expected<Rates> back = readRates(writeTemp(formatRates(r)));
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_DOUBLE_EQ(back->flopsPerSecond, r.flopsPerSecond);
  EXPECT_DOUBLE_EQ(back->hostBytesPerSecond, r.hostBytesPerSecond);
}

TEST(CostModel, CountsProductAndAttentionFlops) {
  MLIRContext context;
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @f(%x: tensor<2x8x64xf32>, %w: tensor<192x64xf32>,
                 %q: tensor<2x4x8x16xf32>) -> tensor<2x8x192xf32> {
      %y = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x8x64xf32>, tensor<192x64xf32>) -> tensor<2x8x192xf32>
      %a = cleave.attention %q, %q, %q {causal, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
      %g = cleave.gelu %y : tensor<2x8x192xf32>
      return %g : tensor<2x8x192xf32>
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(bool(module));
  SmallVector<Operation *> ops;
  module->walk([&](Operation *op) {
    if (isa<MatmulOp, AttentionOp, GeluOp>(op))
      ops.push_back(op);
  });
  ASSERT_EQ(ops.size(), 3u);
  OpCost matmul = estimateCost(ops[0]);
  EXPECT_DOUBLE_EQ(matmul.flops, 2.0 * 2 * 8 * 192 * 64);
  EXPECT_DOUBLE_EQ(matmul.bytes, 4.0 * (2 * 8 * 64 + 192 * 64 + 2 * 8 * 192));
  OpCost attention = estimateCost(ops[1]);
  EXPECT_DOUBLE_EQ(attention.flops,
                   (4.0 * 2 * 4 * 8 * 8 * 16 + 5.0 * 2 * 4 * 8 * 8) / 2);
  OpCost gelu = estimateCost(ops[2]);
  EXPECT_DOUBLE_EQ(gelu.flops, 2.0 * 8 * 192);
  Rates r;
  r.flopsPerSecond = 1e9;
  r.bytesPerSecond = 1e9;
  EXPECT_DOUBLE_EQ(seconds(matmul, r), matmul.flops / 1e9);
  EXPECT_DOUBLE_EQ(seconds(gelu, r), gelu.bytes / 1e9);
  r.linkBytesPerSecond = 1e9;
  r.linkLatencySeconds = 1e-6;
  EXPECT_DOUBLE_EQ(transferSeconds(1e6, r), 1e-6 + 1e-3);
  EXPECT_DOUBLE_EQ(transferSeconds(0, r), 0);
}

// A host copy is its bytes at the host link's rate, not the memory's.
TEST(CostModel, HostCopiesCostTheHostLink) {
  MLIRContext context;
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @f(%x: tensor<1024x256xf32>) -> tensor<1024x256xf32> {
      %h = cleave.offload %x {cleave.memory_space = #cleave.memory_space<host>} : tensor<1024x256xf32>
      %d = cleave.fetch %h : tensor<1024x256xf32>
      return %d : tensor<1024x256xf32>
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(bool(module));
  SmallVector<Operation *> copies;
  module->walk([&](Operation *op) {
    if (isHostCopy(op))
      copies.push_back(op);
  });
  ASSERT_EQ(copies.size(), 2u);
  Rates r = *defaultRates("h100");
  for (Operation *copy : copies)
    EXPECT_DOUBLE_EQ(hostCopySeconds(copy, r), 1024.0 * 256 * 4 / 5.5e10);
  r.hostBytesPerSecond = 0; // unknown: not priced
  EXPECT_DOUBLE_EQ(hostCopySeconds(copies[0], r), 0);
}

TEST(CostModel, CountsTheOptimizerUpdateInPlace) {
  MLIRContext context;
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  const char *source = R"mlir(
    cleave.parameter @w : tensor<64x32xf32>
    func.func @optimizer(%g: tensor<64x32xf32>, %step: tensor<i64>) {
      cleave.adamw @w, %g, %step {lr = 1.0e-03} : tensor<64x32xf32>, tensor<i64>
      cleave.sgd @w, %g, %step {lr = 1.0e-01, momentum = 0.9} : tensor<64x32xf32>, tensor<i64>
      return
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(bool(module));
  SmallVector<Operation *> ops;
  module->walk([&](Operation *op) {
    if (isa<AdamWOp, SgdOp>(op))
      ops.push_back(op);
  });
  ASSERT_EQ(ops.size(), 2u);
  // AdamW: 14 operations an element; p, g, m, v read and p, m, v written.
  OpCost adamw = estimateCost(ops[0]);
  EXPECT_DOUBLE_EQ(adamw.flops, 14.0 * 64 * 32);
  EXPECT_DOUBLE_EQ(adamw.bytes, 7.0 * 4 * 64 * 32);
  OpCost sgd = estimateCost(ops[1]);
  EXPECT_DOUBLE_EQ(sgd.flops, 6.0 * 64 * 32);
  EXPECT_DOUBLE_EQ(sgd.bytes, 5.0 * 4 * 64 * 32);
}

} // namespace
