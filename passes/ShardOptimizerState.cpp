//===- ShardOptimizerState.cpp - ZeRO-1: optimizer state split over data --===//
//
// Rewrites a stage's `@optimizer` so that each rank of the mesh axis keeps
// and updates one chunk of every trained parameter (Passes.td,
// ShardOptimizerState): gradients reduce-scattered instead of all-reduced,
// the clipping norm summed over the chunks, updated chunks all-gathered.
// The chunks themselves (flat, zero-padded to a multiple of the ranks) are
// described once, by `stateShards` in ir/DistributionOps.h, which the
// memory plan and the emitter read too.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SHARDOPTIMIZERSTATE
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct ShardOptimizerState
    : mlir::cleave::impl::ShardOptimizerStateBase<ShardOptimizerState> {
  using ShardOptimizerStateBase::ShardOptimizerStateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketBytes < 1) {
      module.emitError() << "cleave-shard-optimizer-state: bucket-bytes must "
                            "be at least 1";
      return signalPassFailure();
    }
    MeshAttr mesh = lookupMesh(module);
    if (!mesh || !mesh.getAxisSize(axis)) {
      module.emitError() << "cleave-shard-optimizer-state: the module's mesh "
                            "has no axis \""
                         << axis << "\" to split optimizer state over; run "
                         << "cleave-place-ranks first";
      return signalPassFailure();
    }
    if (!replicaAxis.empty() && !mesh.getAxisSize(replicaAxis)) {
      module.emitError() << "cleave-shard-optimizer-state: the module's mesh "
                            "has no replica axis \""
                         << replicaAxis << "\"";
      return signalPassFailure();
    }
    func::FuncOp optimizer;
    for (auto func : module.getOps<func::FuncOp>())
      if (auto kind = func->getAttrOfType<StringAttr>("cleave.kind"))
        if (kind.getValue() == "optimizer")
          optimizer = func;
    SmallVector<GetGradOp> reads;
    if (optimizer)
      optimizer.walk([&](GetGradOp get) { reads.push_back(get); });
    if (reads.empty())
      return; // nothing trained here (a pipeline stage's norm only)
    bool averaged = false;
    optimizer.walk([&](AllReduceGradsOp op) {
      averaged |= op.getGroup() == axis;
    });
    if (averaged) {
      optimizer.emitError() << "cleave-shard-optimizer-state: the gradients "
                               "are already all-reduced over \""
                            << axis << "\"; run this pass instead of "
                            << "cleave-data-parallel, not after it";
      return signalPassFailure();
    }

    // Every trained parameter splits its state; the attribute is what the
    // memory plan and the emitter read.
    SymbolTable symbols(module);
    llvm::SetVector<StringRef> trained;
    for (GetGradOp get : reads)
      trained.insert(get.getName());
    OpBuilder b(module.getContext());
    SmallVector<ParameterOp> params;
    for (StringRef name : trained) {
      auto param = symbols.lookup<ParameterOp>(name);
      if (!param) {
        get(reads, name).emitOpError() << "no cleave.parameter named @" << name;
        return signalPassFailure();
      }
      param->setAttr(kStateAxisAttr, b.getStringAttr(axis));
      params.push_back(param);
    }

    // Buckets, last parameters first (the order backward finishes them),
    // by the padded bytes each collective moves.
    SmallVector<SmallVector<Attribute>> buckets(1);
    int64_t bytes = 0;
    for (ParameterOp param : llvm::reverse(params)) {
      if (bytes >= bucketBytes) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
      std::optional<StateShards> shards = stateShards(param);
      bytes += shards->padded() *
               elementBytes(param.getType().cast<RankedTensorType>()
                                .getElementType());
    }

    // Reduce-scatter first, as cleave-data-parallel's all-reduce, so that
    // cleave-overlap-gradients can start it in the backward: a tied
    // parameter's sum over the pipeline then adds whole buffers, of which
    // each rank reads only its chunk, reduced over the data axis on every
    // pipeline rank holding the parameter (they share their data
    // coordinate, so their chunks are the same elements).
    Block &body = optimizer.getBody().front();
    b.setInsertionPointToStart(&body);
    Location loc = optimizer.getLoc();
    Operation *last = nullptr;
    for (auto &bucket : buckets)
      last = b.create<ReduceScatterGradsOp>(loc, b.getArrayAttr(bucket),
                                            b.getStringAttr(axis),
                                            b.getStringAttr("mean"));

    // Each read of a gradient becomes a read of this rank's chunk, right
    // after the reduce-scatter (a read names the buffer; the tied sums and
    // every user of the chunks come after it); the updates and the sum of
    // squares take it as it is.
    for (GetGradOp get : reads) {
      auto param = symbols.lookup<ParameterOp>(get.getName());
      // After the previous read: the builder's place may be the read that
      // is erased next.
      b.setInsertionPointAfter(last);
      auto shard = b.create<GetGradShardOp>(
          get.getLoc(), chunkType(param, *stateShards(param)),
          get.getNameAttr());
      Value chunk = shard.getResult();
      last = shard;
      if (!replicaAxis.empty()) {
        // MiCS's second hop: the chunk reduced in this group, averaged
        // over the groups.
        b.setInsertionPointAfter(shard);
        auto mean = b.create<AllReduceOp>(get.getLoc(), chunk,
                                          b.getStringAttr(replicaAxis),
                                          b.getStringAttr("mean"));
        chunk = mean.getResult();
        last = mean;
      }
      get.getResult().replaceAllUsesWith(chunk);
      get.erase();
    }

    // The clipping norm: each rank's sum covers its chunks only.
    SmallVector<SumSquaresOp> sums;
    optimizer.walk([&](SumSquaresOp op) { sums.push_back(op); });
    for (SumSquaresOp sum : sums) {
      b.setInsertionPointAfter(sum);
      auto total = b.create<AllReduceOp>(sum.getLoc(), sum.getResult(),
                                         b.getStringAttr(axis),
                                         b.getStringAttr("sum"));
      sum.getResult().replaceAllUsesExcept(total.getResult(), total);
    }

    // Every rank holds the whole updated parameters again.
    b.setInsertionPoint(body.getTerminator());
    for (auto &bucket : buckets)
      b.create<AllGatherParamsOp>(loc, b.getArrayAttr(bucket),
                                  b.getStringAttr(axis));
  }

  static GetGradOp get(ArrayRef<GetGradOp> reads, StringRef name) {
    for (GetGradOp op : reads)
      if (op.getName() == name)
        return op;
    return reads.front();
  }
};

} // namespace
