//===- MergeChunkOptimizers.cpp - one optimizer per pipeline rank ---------===//
//
// A pipeline rank with virtual stages holds several stage modules, each
// with its optimizer; clipping needs the norm over all of them, so the
// rank runs one optimizer: every chunk's work up to its norm's all-reduce,
// the chunks' norms added, one all-reduce over the pipeline, every chunk's
// updates. Decided here on the IR; the emitter translates the result.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace mlir::cleave {
#define GEN_PASS_DEF_MERGECHUNKOPTIMIZERS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// A stage's optimizer and the all-reduce of its clipping norm over the
/// pipeline (null without clipping).
struct Chunk {
  func::FuncOp func;
  AllReduceOp pivot;
};

func::FuncOp optimizerOf(ModuleOp stage) {
  for (auto func : stage.getOps<func::FuncOp>())
    if (auto kind = func->getAttrOfType<StringAttr>("cleave.kind"))
      if (kind.getValue() == "optimizer" && !func.isExternal())
        return func;
  return {};
}

struct MergeChunkOptimizers
    : mlir::cleave::impl::MergeChunkOptimizersBase<MergeChunkOptimizers> {
  using MergeChunkOptimizersBase::MergeChunkOptimizersBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    std::map<int64_t, ModuleOp> stages;
    for (auto stage : top.getOps<ModuleOp>())
      if (auto k = stage->getAttrOfType<IntegerAttr>(kStageAttr))
        stages[k.getInt()] = stage;
    if (stages.empty())
      return;
    MeshAttr mesh = lookupMesh(top);
    std::optional<int64_t> ranks =
        mesh ? mesh.getAxisSize(kPipelineAxis) : std::nullopt;
    if (!ranks) {
      top.emitError() << "cleave-merge-chunk-optimizers needs a cleave.mesh "
                         "with a \"pipeline\" axis; run cleave-place-ranks "
                         "first";
      return signalPassFailure();
    }
    std::map<int64_t, SmallVector<Chunk>> byRank;
    for (auto &[k, stage] : stages) {
      func::FuncOp func = optimizerOf(stage);
      if (!func)
        continue;
      AllReduceOp pivot;
      func.walk([&](AllReduceOp op) {
        if (op.getGroup() == kPipelineAxis)
          pivot = op;
      });
      byRank[k % *ranks].push_back({func, pivot});
    }
    for (auto &[rank, chunks] : byRank)
      if (chunks.size() > 1 && failed(merge(rank, chunks)))
        return signalPassFailure();
  }

  LogicalResult merge(int64_t rank, MutableArrayRef<Chunk> chunks) {
    Chunk &host = chunks.front();
    bool clipped = bool(host.pivot);
    for (Chunk &c : chunks.drop_front()) {
      if (bool(c.pivot) != clipped)
        return c.func.emitError()
               << "pipeline rank " << rank << ": some of its stages clip "
               << "their gradients and some do not";
      if (c.func.getFunctionType() != host.func.getFunctionType())
        return c.func.emitError()
               << "pipeline rank " << rank << ": its stages' optimizers "
               << "take different arguments (" << c.func.getFunctionType()
               << " and " << host.func.getFunctionType() << ")";
    }
    Block &hostBody = host.func.getBody().front();
    Operation *hostReturn = hostBody.getTerminator();
    OpBuilder before(clipped ? host.pivot.getOperation() : hostReturn);
    OpBuilder after(hostReturn);
    Value norm = clipped ? host.pivot.getInput() : Value();
    for (Chunk &c : chunks.drop_front()) {
      Block &body = c.func.getBody().front();
      IRMapping map;
      for (auto [from, to] :
           llvm::zip(body.getArguments(), hostBody.getArguments()))
        map.map(from, to);
      // Up to the norm's all-reduce (all of it without clipping): before
      // the host's all-reduce, after the host's own work.
      bool past = false;
      for (Operation &op : body.without_terminator()) {
        if (clipped && &op == c.pivot.getOperation()) {
          map.map(c.pivot.getResult(), host.pivot.getResult());
          norm = before.create<AddOp>(c.pivot.getLoc(), norm,
                                      map.lookup(c.pivot.getInput()));
          past = true;
          continue;
        }
        (past ? after : before).clone(op, map);
      }
      c.func.erase();
    }
    if (clipped)
      host.pivot.getInputMutable().assign(norm);
    return success();
  }
};

} // namespace
