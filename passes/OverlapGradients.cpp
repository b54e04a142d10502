//===- OverlapGradients.cpp - data-parallel all-reduces during backward ---===//
//
// cleave-data-parallel reduces the gradients in buckets at the optimizer's
// start (ZeRO-1, cleave-shard-optimizer-state: reduce-scatters them); a
// bucket's gradients are final earlier, once the step's last
// microbatch has accumulated them. This pass starts each bucket there, in a
// copy of the backward that only the last microbatch runs, and the
// optimizer waits for it (see Passes.td for the IR before and after).
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_OVERLAPGRADIENTS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

bool hasKind(func::FuncOp func, StringRef kind) {
  auto attr = func->getAttrOfType<StringAttr>("cleave.kind");
  return attr && attr.getValue() == kind;
}

/// A data-parallel bucket the optimizer reduces synchronously: a
/// `cleave.all_reduce_grads` or (ZeRO-1) a `cleave.reduce_scatter_grads`
/// over the data axis; null for anything else.
ArrayAttr bucketParams(Operation *op) {
  if (auto reduce = dyn_cast<AllReduceGradsOp>(op))
    return reduce.getGroup() == kDataAxis ? reduce.getParams() : ArrayAttr();
  if (auto scatter = dyn_cast<ReduceScatterGradsOp>(op))
    return scatter.getGroup() == kDataAxis ? scatter.getParams() : ArrayAttr();
  return {};
}

/// The op after which `bucket`'s gradients are complete in `body`: the last
/// accumulation into one of its parameters, provided every one of them is
/// accumulated there; null otherwise.
Operation *completionOf(Operation *bucket, Block &body) {
  llvm::StringSet<> bucketParams, accumulated;
  for (Attribute name : ::bucketParams(bucket))
    bucketParams.insert(name.cast<FlatSymbolRefAttr>().getValue());
  Operation *last = nullptr;
  for (auto acc : body.getOps<AccumulateGradOp>())
    if (bucketParams.contains(acc.getName())) {
      accumulated.insert(acc.getName());
      last = acc;
    }
  return accumulated.size() == bucketParams.size() ? last : nullptr;
}

struct OverlapGradients
    : mlir::cleave::impl::OverlapGradientsBase<OverlapGradients> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    // A pipeline: each rank's stage modules together (a merged optimizer
    // reduces buckets that another of the rank's stages completes);
    // otherwise the module is the one rank's.
    SmallVector<SmallVector<ModuleOp>> ranks;
    llvm::DenseSet<Operation *> seen;
    for (auto stage : top.getOps<ModuleOp>())
      if (stage->hasAttr(kStageAttr) && !seen.contains(stage)) {
        ranks.push_back(rankModules(stage));
        for (ModuleOp m : ranks.back())
          seen.insert(m);
      }
    if (ranks.empty())
      ranks.push_back({top});
    for (ArrayRef<ModuleOp> modules : ranks)
      overlap(modules);
  }

  void overlap(ArrayRef<ModuleOp> modules) {
    // The data-parallel buckets still reduced synchronously, in the
    // optimizer's order; and where numbering may go on (a rank that was
    // already overlapped once).
    SmallVector<Operation *> buckets;
    int64_t nextEvent = 1;
    for (ModuleOp module : modules)
      for (auto func : module.getOps<func::FuncOp>())
        func.walk([&](Operation *op) {
          if (auto start = dyn_cast<AllReduceGradsStartOp>(op))
            nextEvent = std::max<int64_t>(nextEvent, start.getEvent() + 1);
          if (auto start = dyn_cast<ReduceScatterGradsStartOp>(op))
            nextEvent = std::max<int64_t>(nextEvent, start.getEvent() + 1);
          if (bucketParams(op) && hasKind(func, "optimizer"))
            buckets.push_back(op);
        });
    if (buckets.empty())
      return;

    for (ModuleOp module : modules) {
      SymbolTable symbols(module);
      for (auto backward : llvm::to_vector(module.getOps<func::FuncOp>())) {
        if (!hasKind(backward, "backward") || backward.isExternal() ||
            backward->hasAttr(kLastMicrobatchAttr) ||
            backward->hasAttr(kLastMicrobatchOfAttr))
          continue;
        // The buckets this backward completes, after the op that completes
        // them, in bucket order.
        llvm::DenseMap<Operation *, SmallVector<Operation *>> startsAfter;
        SmallVector<Operation *> rest;
        for (Operation *bucket : buckets) {
          if (Operation *done =
                  completionOf(bucket, backward.getBody().front()))
            startsAfter[done].push_back(bucket);
          else
            rest.push_back(bucket);
        }
        if (startsAfter.empty())
          continue;
        buckets = std::move(rest);

        // The copy keeps every op's attributes, the planned offsets
        // included: it runs in the original's storage.
        auto variant = cast<func::FuncOp>(backward->clone());
        variant.setName((backward.getName() + "_last_microbatch").str());
        symbols.insert(variant, std::next(Block::iterator(backward)));
        variant->setAttr(kLastMicrobatchOfAttr,
                         FlatSymbolRefAttr::get(backward.getNameAttr()));
        backward->setAttr(kLastMicrobatchAttr,
                          FlatSymbolRefAttr::get(variant.getNameAttr()));

        // The two bodies op for op, taken before the starts go in.
        auto originals = llvm::to_vector(
            llvm::make_pointer_range(backward.getBody().front()));
        auto copies = llvm::to_vector(
            llvm::make_pointer_range(variant.getBody().front()));
        for (auto [original, copy] : llvm::zip(originals, copies)) {
          auto it = startsAfter.find(original);
          if (it == startsAfter.end())
            continue;
          OpBuilder b(copy->getContext());
          b.setInsertionPointAfter(copy);
          for (Operation *bucket : it->second) {
            int64_t event = nextEvent++;
            if (auto reduce = dyn_cast<AllReduceGradsOp>(bucket))
              b.create<AllReduceGradsStartOp>(
                  reduce.getLoc(), reduce.getParams(), event,
                  reduce.getGroup(), reduce.getReduce());
            else if (auto scatter = dyn_cast<ReduceScatterGradsOp>(bucket))
              b.create<ReduceScatterGradsStartOp>(
                  scatter.getLoc(), scatter.getParams(), event,
                  scatter.getGroup(), scatter.getReduce());
            OpBuilder(bucket).create<WaitGradsOp>(bucket->getLoc(), event);
            bucket->erase();
          }
        }
      }
    }
  }
};

} // namespace
