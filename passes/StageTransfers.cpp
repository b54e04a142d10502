//===- StageTransfers.cpp - pipeline boundaries as sends and receives -----===//
//
// The partition leaves each stage's crossings in its functions' signatures
// (cleave.boundary arguments and results, and their gradients in the
// backward). Here they become cleave.recv and cleave.send ops over the
// mesh's pipeline axis, with the peer and tag of each transfer decided
// once, so that the emitter only translates them.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_STAGETRANSFERS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The tag of forward activation `boundary` sent by stage `stage`, and of
/// its gradient sent back by stage `stage + 1`.
int64_t forwardTag(int64_t stage, int64_t boundary) {
  return ((2 * stage) << 8) | boundary;
}
int64_t backwardTag(int64_t stage, int64_t boundary) {
  return ((2 * stage + 1) << 8) | boundary;
}

struct Transfer {
  int64_t peer; // pipeline coordinate
  int64_t tag;
};

struct StageTransfers
    : mlir::cleave::impl::StageTransfersBase<StageTransfers> {
  using StageTransfersBase::StageTransfersBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<ModuleOp> stages;
    for (auto stage : top.getOps<ModuleOp>())
      if (stage->hasAttr(kStageAttr))
        stages.push_back(stage);
    if (stages.empty())
      return; // one stage: nothing crosses
    MeshAttr mesh = lookupMesh(top);
    std::optional<int64_t> ranks =
        mesh ? mesh.getAxisSize(kPipelineAxis) : std::nullopt;
    if (!ranks) {
      top.emitError() << "cleave-stage-transfers needs a cleave.mesh with a "
                         "\"pipeline\" axis; run cleave-place-ranks first";
      return signalPassFailure();
    }
    int64_t s = stages.size();
    for (ModuleOp stage : stages) {
      int64_t k = stage->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
      if (k < 0 || k >= s) {
        stage.emitError() << "stage " << k << " of " << s << " stages";
        return signalPassFailure();
      }
      if (failed(lowerStage(stage, k, s, *ranks)))
        return signalPassFailure();
    }
  }

  LogicalResult lowerStage(ModuleOp stage, int64_t k, int64_t s,
                           int64_t ranks) {
    auto prev = [&](Operation *where) -> FailureOr<int64_t> {
      if (k == 0)
        return where->emitError() << "stage 0 receives from no stage";
      return (k - 1) % ranks;
    };
    auto next = [&](Operation *where) -> FailureOr<int64_t> {
      if (k + 1 >= s)
        return where->emitError() << "the last stage sends to no stage";
      return (k + 1) % ranks;
    };
    for (auto forward : llvm::to_vector(stage.getOps<func::FuncOp>())) {
      auto kind = forward->getAttrOfType<StringAttr>("cleave.kind");
      if (forward.isExternal() || (kind && kind.getValue() != "forward"))
        continue;
      func::FuncOp backward;
      if (auto name =
              forward->getAttrOfType<FlatSymbolRefAttr>("cleave.backward"))
        backward = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(forward,
                                                                      name);
      // The backward first: its transfers are named by the forward's
      // boundary attributes, which the forward's lowering removes.
      if (backward) {
        DenseMap<unsigned, Transfer> recvs, sends;
        for (unsigned i = 0; i < backward.getNumArguments(); ++i) {
          auto of = backward.getArgAttrOfType<IntegerAttr>(
              i, "cleave.grad_of_result");
          if (!of)
            continue;
          auto b = of.getInt() < forward.getNumResults()
                       ? forward.getResultAttrOfType<IntegerAttr>(
                             of.getInt(), kBoundaryAttr)
                       : IntegerAttr();
          if (!b)
            return backward.emitError()
                   << "argument " << i << " is the gradient of a result "
                   << "that is not a stage boundary";
          FailureOr<int64_t> peer = next(backward);
          if (failed(peer))
            return failure();
          recvs[i] = {*peer, backwardTag(k, b.getInt())};
        }
        for (unsigned i = 0; i < backward.getNumResults(); ++i) {
          auto of = backward.getResultAttrOfType<IntegerAttr>(
              i, "cleave.grad_of_arg");
          if (!of)
            continue;
          auto b = of.getInt() < forward.getNumArguments()
                       ? forward.getArgAttrOfType<IntegerAttr>(of.getInt(),
                                                               kBoundaryAttr)
                       : IntegerAttr();
          if (!b)
            return backward.emitError()
                   << "result " << i << " is the gradient of an argument "
                   << "that is not a stage boundary";
          FailureOr<int64_t> peer = prev(backward);
          if (failed(peer))
            return failure();
          sends[i] = {*peer, backwardTag(k - 1, b.getInt())};
        }
        if (failed(rewrite(backward, recvs, sends)))
          return failure();
      }
      DenseMap<unsigned, Transfer> recvs, sends;
      for (unsigned i = 0; i < forward.getNumArguments(); ++i)
        if (auto b = forward.getArgAttrOfType<IntegerAttr>(i, kBoundaryAttr)) {
          FailureOr<int64_t> peer = prev(forward);
          if (failed(peer))
            return failure();
          recvs[i] = {*peer, forwardTag(k - 1, b.getInt())};
        }
      for (unsigned i = 0; i < forward.getNumResults(); ++i)
        if (auto b =
                forward.getResultAttrOfType<IntegerAttr>(i, kBoundaryAttr)) {
          FailureOr<int64_t> peer = next(forward);
          if (failed(peer))
            return failure();
          sends[i] = {*peer, forwardTag(k, b.getInt())};
        }
      // The backward reads saved forward results by index: renumber them
      // past the results that become sends.
      SmallVector<int64_t> newIndex;
      int64_t kept = 0;
      for (unsigned i = 0; i < forward.getNumResults(); ++i)
        newIndex.push_back(sends.count(i) ? -1 : kept++);
      if (failed(rewrite(forward, recvs, sends)))
        return failure();
      if (backward) {
        Builder b(backward.getContext());
        for (unsigned i = 0; i < backward.getNumArguments(); ++i)
          if (auto from = backward.getArgAttrOfType<IntegerAttr>(
                  i, "cleave.saved_from")) {
            if (from.getInt() < 0 || from.getInt() >= (int64_t)newIndex.size() ||
                newIndex[from.getInt()] < 0)
              return backward.emitError()
                     << "argument " << i << " is saved from forward result "
                     << from.getInt() << ", which is sent to the next stage";
            backward.setArgAttr(i, "cleave.saved_from",
                                b.getI64IntegerAttr(newIndex[from.getInt()]));
          }
      }
    }
    return success();
  }

  /// Replaces the arguments in `recvs` with receives at the top of the body
  /// (in argument order) and the results in `sends` with sends before the
  /// return (in result order).
  LogicalResult rewrite(func::FuncOp func,
                        const DenseMap<unsigned, Transfer> &recvs,
                        const DenseMap<unsigned, Transfer> &sends) {
    Block &body = func.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    llvm::BitVector dropArgs(func.getNumArguments());
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto it = recvs.find(i);
      if (it == recvs.end())
        continue;
      BlockArgument arg = body.getArgument(i);
      auto recv = b.create<RecvOp>(arg.getLoc(), arg.getType(),
                                   b.getStringAttr(kPipelineAxis),
                                   b.getI64IntegerAttr(it->second.peer),
                                   b.getI64IntegerAttr(it->second.tag));
      // The planned slot offset of the received value moves to the op.
      if (auto offset = func.getArgAttrOfType<IntegerAttr>(i, "cleave.offset"))
        recv->setAttr("cleave.offsets",
                      b.getDenseI64ArrayAttr({offset.getInt()}));
      arg.replaceAllUsesWith(recv.getResult());
      dropArgs.set(i);
    }
    Operation *ret = body.getTerminator();
    b.setInsertionPoint(ret);
    llvm::BitVector dropResults(func.getNumResults());
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto it = sends.find(i);
      if (it == sends.end())
        continue;
      b.create<SendOp>(ret->getLoc(), ret->getOperand(i),
                       b.getStringAttr(kPipelineAxis),
                       b.getI64IntegerAttr(it->second.peer),
                       b.getI64IntegerAttr(it->second.tag));
      dropResults.set(i);
    }
    for (unsigned i = func.getNumResults(); i-- > 0;)
      if (dropResults.test(i))
        ret->eraseOperand(i);
    func.eraseResults(dropResults);
    func.eraseArguments(dropArgs);
    return success();
  }
};

} // namespace
