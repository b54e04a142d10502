//===- ShardOptimizerState.cpp - ZeRO-1: optimizer state split over data --===//
//
// Rewrites a stage's `@optimizer` so that each rank of the mesh axis keeps
// and updates one chunk of every trained parameter (Passes.td,
// ShardOptimizerState): gradients reduce-scattered instead of all-reduced,
// the clipping norm summed over the chunks, updated chunks all-gathered.
// Under mixed precision (master-copies) the fp32 master weights split too,
// each rank keeping a whole 16-bit working copy that a refresh function
// rebuilds at the start of each step.
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

    // ZeRO-1 under mixed precision: the masters split too, where every
    // read is in one 16-bit type.
    SmallVector<ParameterOp> working;
    if (masterCopies)
      for (ParameterOp param : params)
        if (useWorkingCopy(module, param))
          working.push_back(param);

    // Buckets, last parameters first (the order backward finishes them),
    // by the padded bytes each collective moves.
    SmallVector<SmallVector<Attribute>> buckets = bucketsOf(params);

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

    // Every rank holds the whole updated parameters again; those with a
    // working copy at the start of the next step, from their masters.
    SmallVector<ParameterOp> whole;
    for (ParameterOp param : params)
      if (!param->hasAttr(kWorkingTypeAttr))
        whole.push_back(param);
    b.setInsertionPoint(body.getTerminator());
    if (!whole.empty())
      for (auto &bucket : bucketsOf(whole))
        b.create<AllGatherParamsOp>(loc, b.getArrayAttr(bucket),
                                    b.getStringAttr(axis));
    if (!working.empty())
      addRefresh(module, working);
  }

  /// Buckets of about bucketBytes, last parameters first (the order the
  /// backward finishes them), by the padded bytes each collective moves
  /// (a working copy's in its type).
  SmallVector<SmallVector<Attribute>> bucketsOf(MutableArrayRef<ParameterOp> params) {
    SmallVector<SmallVector<Attribute>> buckets(1);
    int64_t bytes = 0;
    for (ParameterOp param : llvm::reverse(params)) {
      if (bytes >= bucketBytes) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
      bytes += stateShards(param)->padded() *
               elementBytes(readType(param).getElementType());
    }
    return buckets;
  }

  /// Gives `param` a working copy when every function reads it only
  /// through casts to one 16-bit float type, and makes those reads
  /// cleave.get_param of that type. Other readers (an fp32 lookup, a norm)
  /// need its fp32 value whole: then nothing changes.
  static bool useWorkingCopy(ModuleOp module, ParameterOp param) {
    if (!param.getType().cast<RankedTensorType>().getElementType().isF32() ||
        param->hasAttr(kParamAxisAttr))
      return false;
    SmallVector<GetParamOp> reads;
    FloatType low;
    bool readable = true;
    module.walk([&](GetParamOp get) {
      if (get.getName() != param.getSymName())
        return;
      reads.push_back(get);
      for (Operation *user : get->getUsers()) {
        auto cast = dyn_cast<CastOp>(user);
        auto to = cast ? cast.getType()
                             .cast<RankedTensorType>()
                             .getElementType()
                             .dyn_cast<FloatType>()
                       : FloatType();
        if (!to || to.getWidth() != 16 || (low && to != low))
          readable = false;
        else
          low = to;
      }
    });
    if (!readable || !low)
      return false;
    param->setAttr(kWorkingTypeAttr, TypeAttr::get(low));
    for (GetParamOp get : reads) {
      OpBuilder b(get);
      auto read = b.create<GetParamOp>(
          get.getLoc(), get.getType().cast<RankedTensorType>().clone(low),
          get.getNameAttr());
      for (Operation *user : llvm::make_early_inc_range(get->getUsers())) {
        user->getResult(0).replaceAllUsesWith(read.getResult());
        user->erase();
      }
      get.erase();
    }
    return true;
  }

  /// The stage's refresh function: each working copy rounded from this
  /// rank's master chunk and gathered, first in every step.
  void addRefresh(ModuleOp module, MutableArrayRef<ParameterOp> working) {
    OpBuilder b(module.getContext());
    Location loc = working.front().getLoc();
    auto refresh = b.create<func::FuncOp>(
        loc, "refresh_params", b.getFunctionType({}, {}));
    refresh->setAttr("cleave.kind", b.getStringAttr("refresh"));
    SymbolTable(module).insert(refresh); // renamed if the name is taken
    b.setInsertionPointToStart(refresh.addEntryBlock());
    for (ParameterOp param : working)
      b.create<CastMasterChunkOp>(
          param.getLoc(), FlatSymbolRefAttr::get(param.getSymNameAttr()));
    for (auto &bucket : bucketsOf(working))
      b.create<AllGatherParamsOp>(loc, b.getArrayAttr(bucket),
                                  b.getStringAttr(axis));
    b.create<func::ReturnOp>(loc);
  }

  static GetGradOp get(ArrayRef<GetGradOp> reads, StringRef name) {
    for (GetGradOp op : reads)
      if (op.getName() == name)
        return op;
    return reads.front();
  }
};

} // namespace
