//===- OffloadActivations.cpp - checkpoints to host memory and back -------===//
//
// SMP's activation offloading, ahead of time: after cleave-remat a forward
// keeps for its backward the checkpoints its segments are recomputed from.
// Each checkpoint is copied to host memory right after the forward makes it
// (`cleave.offload`; the device value then dies after its last forward
// reader) and copied back (`cleave.fetch`) `horizon` segments before the
// backward of the segment that reads it starts, so the copy overlaps the
// compute of the segments in between. The memory plan gives the host values
// the host arena. docs/remat.md says what is offloaded and why.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/ForwardBackward.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_OFFLOADACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

bool isRecompute(Operation *op) { return op->hasAttr("cleave.recompute"); }

/// Ops that name storage (a clone's parameter read): they do not end a
/// run of recomputed ops.
bool isStorage(Operation *op) { return isa<ConstantOp, GetParamOp>(op); }

struct OffloadActivations
    : mlir::cleave::impl::OffloadActivationsBase<OffloadActivations> {
  using OffloadActivationsBase::OffloadActivationsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (horizon < 1) {
      mlir::emitError(module.getLoc())
          << "cleave-offload-activations: horizon must be at least 1 "
             "(activation_loading_horizon), got "
          << static_cast<int64_t>(horizon);
      return signalPassFailure();
    }
    FailureOr<SmallVector<std::pair<func::FuncOp, func::FuncOp>>> pairs =
        forwardBackwardPairs(module, "cleave-offload-activations");
    if (failed(pairs))
      return signalPassFailure();
    for (auto [forward, backward] : *pairs)
      if (failed(offload(forward, backward)))
        return signalPassFailure();
  }

  LogicalResult offload(func::FuncOp forward, func::FuncOp backward) {
    Block &body = forward.getBody().front();
    Operation *ret = body.getTerminator();
    Block &back = backward.getBody().front();
    MLIRContext *ctx = forward.getContext();
    auto host = MemorySpaceAttr::get(ctx, MemorySpace::host);

    // Where each segment's backward starts: the first op of each run of
    // recomputed ops (cleave-remat puts a segment's clones together,
    // before the first op that reads them), in backward order, which is
    // the reverse of the segments' forward order.
    llvm::DenseMap<Operation *, int64_t> position;
    SmallVector<Operation *> segmentStarts;
    bool inRun = false;
    int64_t index = 0;
    for (Operation &op : back) {
      position[&op] = index++;
      if (isRecompute(&op)) {
        if (!inRun)
          segmentStarts.push_back(&op);
        inRun = true;
      } else if (!isStorage(&op)) {
        inRun = false;
      }
    }
    if (segmentStarts.empty())
      return success(); // nothing is recomputed: no checkpoints

    // The checkpoints: saved values a recomputed op reads. Other saved
    // values (a segment's interior left saved, the loss gradient, what the
    // head reads) stay on the device.
    llvm::MapVector<BlockArgument, Value> checkpoints; // argument -> source
    for (BlockArgument arg : back.getArguments()) {
      auto from = backward.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                         "cleave.saved_from");
      if (!from)
        continue;
      if (from.getInt() < 0 || from.getInt() >= ret->getNumOperands())
        return backward.emitError() << "argument " << arg.getArgNumber()
                                    << " has no valid cleave.saved_from";
      Value source = ret->getOperand(from.getInt());
      Operation *def = source.getDefiningOp();
      // A device value that lives on anyway gains nothing from a host
      // copy, and its fetch would take device space a second time: a
      // function argument (the step's inputs, or a pipeline stage's
      // received activation, held in its slot for the whole function) and
      // a value the forward also returns for another reason (sent to the
      // next stage: slot storage too).
      // The token ids gathered over the tensor group (prescaled_batch
      // false) are the step's input as their argument is, and as small.
      bool gatheredInput = def && isa<AllGatherOp>(def) &&
                           def->getOperand(0).isa<BlockArgument>();
      bool livesOn =
          !def || gatheredInput ||
          llvm::any_of(ret->getOpOperands(), [&](OpOperand &use) {
            return use.get() == source &&
                   !forward.getResultAttr(use.getOperandNumber(),
                                          "cleave.saved");
          });
      if (livesOn || isStorage(def) || def->hasAttr(kMemorySpaceAttr) ||
          !llvm::any_of(arg.getUsers(), isRecompute))
        continue;
      checkpoints.insert({arg, source});
    }

    // Forward: a host copy right after each checkpoint is made, saved
    // instead of it.
    llvm::DenseMap<Value, Value> hostCopy;
    for (auto &[arg, source] : checkpoints) {
      if (hostCopy.count(source))
        continue;
      OpBuilder b(ctx);
      b.setInsertionPointAfter(source.getDefiningOp());
      auto copy =
          b.create<OffloadOp>(source.getLoc(), source.getType(), source);
      copy->setAttr(kMemorySpaceAttr, host);
      hostCopy[source] = copy.getResult();
    }
    for (unsigned i = 0; i < ret->getNumOperands(); ++i) {
      auto it = hostCopy.find(ret->getOperand(i));
      if (it == hostCopy.end() || !forward.getResultAttr(i, "cleave.saved"))
        continue;
      ret->setOperand(i, it->second);
      forward.setResultAttr(i, kMemorySpaceAttr, host);
    }

    // Backward: each checkpoint fetched `horizon` segments before the
    // segment whose backward reads it first starts, or when the first
    // segment's starts.
    for (auto &[arg, source] : checkpoints) {
      backward.setArgAttr(arg.getArgNumber(), kMemorySpaceAttr, host);
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers()) {
        Operation *top = back.findAncestorOpInBlock(*user);
        if (top && (!first || position[top] < position[first]))
          first = top;
      }
      int64_t segment = -1;
      for (auto [j, start] : llvm::enumerate(segmentStarts))
        if (position[start] <= position[first])
          segment = j;
      // The last segments' checkpoints come back when the first segment's
      // backward starts, not during the head's backward before it: that
      // holds the step's largest temporaries (the loss gradient), and a
      // fetch there would add to the peak (on GPT-2 124M a 3 MB fetch
      // split the hole the 206 MB gradient's reshape needed: +165 MB).
      // A checkpoint read before any segment comes back just before that.
      Operation *at = segment < 0 ? first
                      : segment - int64_t(horizon) >= 0
                          ? segmentStarts[segment - horizon]
                          : segmentStarts.front();
      OpBuilder b(at);
      auto fetch = b.create<FetchOp>(arg.getLoc(), arg.getType(), arg);
      arg.replaceAllUsesExcept(fetch.getResult(), fetch);
    }
    return success();
  }
};

} // namespace
