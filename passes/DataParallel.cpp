//===- DataParallel.cpp - gradient all-reduce for data parallelism --------===//
//
// With `degree` data-parallel ranks, each rank runs the forward and
// backward of its own samples; before the optimizer step the gradients
// are averaged over the ranks, in buckets of about `bucket-bytes` (as
// PyTorch's DDP), so every rank takes the same step.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_DATAPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct DataParallel : mlir::cleave::impl::DataParallelBase<DataParallel> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (degree < 1 || bucketBytes < 1) {
      module.emitError() << "cleave-data-parallel: degree and bucket-bytes "
                            "must be at least 1";
      return signalPassFailure();
    }
    if (degree == 1)
      return;
    func::FuncOp optimizer;
    for (auto func : module.getOps<func::FuncOp>())
      if (auto kind = func->getAttrOfType<StringAttr>("cleave.kind"))
        if (kind.getValue() == "optimizer")
          optimizer = func;
    if (!optimizer) {
      module.emitError() << "cleave-data-parallel: no optimizer function to "
                            "average gradients for; run cleave-optimizer "
                            "first";
      return signalPassFailure();
    }
    // The parameters the optimizer updates, in reverse order of
    // declaration: roughly the order backward finishes their gradients.
    llvm::SetVector<StringRef> trained;
    optimizer.walk([&](GetGradOp get) { trained.insert(get.getName()); });
    SymbolTable symbols(module);
    OpBuilder b = OpBuilder::atBlockBegin(&optimizer.getBody().front());
    SmallVector<Attribute> bucket;
    int64_t bytes = 0;
    auto flush = [&] {
      if (bucket.empty())
        return;
      b.create<AllReduceGradsOp>(optimizer.getLoc(), b.getArrayAttr(bucket),
                                 b.getStringAttr("data"),
                                 b.getStringAttr("mean"),
                                 /*members=*/DenseI64ArrayAttr());
      bucket.clear();
      bytes = 0;
    };
    for (StringRef name : llvm::reverse(trained)) {
      auto param = symbols.lookup<ParameterOp>(name);
      bucket.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
      bytes += tensorBytes(param.getType());
      if (bytes >= bucketBytes)
        flush();
    }
    flush();
  }
};

} // namespace
