//===- SchedulePipeline.cpp - the cleave-pipeline-schedule pass -----------===//
//
// Writes the order in which each pipeline rank runs its stages' forward and
// backward functions per microbatch (PipelineSchedule.h builds and checks
// it), the activation slots each stage needs for the microbatches in
// flight, and each stage's predicted time from the cost model.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"
#include "passes/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;
namespace pipeline = ::cleave::pipeline;

namespace {

struct SchedulePipeline
    : mlir::cleave::impl::PipelineScheduleBase<SchedulePipeline> {
  using PipelineScheduleBase::PipelineScheduleBase;

  void runOnOperation() override {
    if (failed(schedule()))
      signalPassFailure();
  }

  /// A module that is not split runs as a pipeline of one stage on one
  /// pipeline rank: each microbatch's forward, then its backward (if
  /// autodiff made one). The emitter then has one path for every layout.
  LogicalResult scheduleOneStage(ModuleOp module) {
    if (ranks != 1)
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-schedule: the module has no stage modules, "
                "but ranks = "
             << static_cast<int64_t>(ranks)
             << "; run cleave-pipeline-partition first";
    if (microbatches < 1)
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-schedule: microbatches must be at least 1";
    bool hasBackward = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
      hasBackward |= kind && kind.getValue() == "backward";
    }
    SmallVector<int64_t> flat;
    for (int64_t mb = 0; mb < microbatches; ++mb)
      for (int64_t backward = 0; backward <= int64_t(hasBackward); ++backward)
        flat.append({0, backward, mb, 0});
    Builder b(module.getContext());
    module->setAttr("cleave.schedule",
                    b.getArrayAttr({b.getDenseI64ArrayAttr(flat)}));
    return success();
  }

  LogicalResult schedule() {
    ModuleOp module = getOperation();
    SmallVector<ModuleOp> stageModules;
    for (auto stage : module.getOps<ModuleOp>())
      if (stage->hasAttr("cleave.stage"))
        stageModules.push_back(stage);
    if (stageModules.empty())
      return scheduleOneStage(module);
    std::optional<pipeline::Kind> k = pipeline::parseKind(kind);
    if (!k)
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-schedule: kind must be "
                "simple, interleaved or "
                "interleaved_virtual, got '"
             << kind << "'";
    int64_t s = stageModules.size();
    if (ranks < 1 || s % ranks != 0)
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-schedule: " << s
             << " stages do not divide evenly over "
             << static_cast<int64_t>(ranks) << " pipeline ranks";
    // A stage that autodiff gave no backward (nothing differentiable flows
    // through it, e.g. one that only slices the token ids or targets) runs
    // forwards only: its boundary values are not floats, so the next stage
    // sends it no gradient (cleave-stage-transfers) and it has none to
    // send. Such stages must come first: a stage with a backward after one
    // without would wait for a gradient that is never sent.
    int64_t forwardOnly = 0;
    for (auto [index, stage] : llvm::enumerate(stageModules)) {
      bool hasBackward = false;
      stage.walk([&](func::FuncOp func) {
        auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
        hasBackward |= kind && kind.getValue() == "backward";
      });
      if (!hasBackward && forwardOnly == (int64_t)index)
        ++forwardOnly;
      else if (!hasBackward)
        return stage.emitError()
               << "stage " << index << " has no backward (no gradient flows "
               << "through it to the loss) but stage " << index - 1
               << " before it has one, which would wait for a gradient stage "
               << index << " never sends; choose other partition points so "
               << "that the stages without gradients come first";
    }
    pipeline::Options options;
    options.forwardOnlyStages = forwardOnly;
    options.kind = *k;
    options.ranks = ranks;
    options.microbatches = microbatches;
    options.virtualStages = s / ranks;
    options.activeMicrobatches = activeMicrobatches;
    std::string error;
    std::optional<pipeline::Schedule> built = pipeline::build(options, error);
    if (!built)
      return mlir::emitError(module.getLoc()) << error;
    if (!pipeline::verify(*built, options, error))
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-schedule: the " << kind
             << " schedule would hang: " << error;

    llvm::Expected<Rates> rates =
        ratesFile.empty() ? defaultRates(backend) : readRates(ratesFile);
    if (!rates)
      return mlir::emitError(module.getLoc())
             << llvm::toString(rates.takeError());
    Builder b(module.getContext());
    for (auto [index, stage] : llvm::enumerate(stageModules)) {
      int64_t id = stage->getAttrOfType<IntegerAttr>("cleave.stage").getInt();
      if (id != (int64_t)index)
        return stage.emitError() << "stage modules must be in order; found "
                                    "stage "
                                 << id << " at position " << index;
      // Per microbatch: the forward's work, the forward ops the backward
      // computes again (cleave-remat), and the host copies of the
      // offloaded checkpoints (cleave-offload-activations) and sharded
      // data parallelism's gathers and reduce-scatters, which run once
      // where they are. The
      // last microbatch's copy of a backward (cleave-overlap-gradients)
      // runs instead of it: not counted.
      double forward = 0, recompute = 0, forwardCopies = 0, backwardCopies = 0,
             forwardCollectives = 0, backwardCollectives = 0;
      stage.walk([&](func::FuncOp func) {
        auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
        bool isForward = !kind || kind.getValue() == "forward";
        if (!isForward && (kind.getValue() != "backward" ||
                           func->hasAttr(kLastMicrobatchOfAttr)))
          return;
        func.walk([&](Operation *op) {
          if (!op->getDialect() || !isa<CleaveDialect>(op->getDialect()))
            return;
          if (isHostCopy(op)) {
            (isForward ? forwardCopies : backwardCopies) +=
                hostCopySeconds(op, *rates);
            return;
          }
          if (isShardCollective(op)) {
            (isForward ? forwardCollectives : backwardCollectives) +=
                shardCollectiveSeconds(op, *rates);
            return;
          }
          double t = seconds(estimateCost(op), *rates);
          if (isForward)
            forward += t;
          else if (op->hasAttr("cleave.recompute"))
            recompute += t;
        });
      });
      bool forwardOnlyStage = (int64_t)index < forwardOnly;
      stage->setAttr("cleave.slots",
                     b.getI64IntegerAttr(built->slotsPerStage[index]));
      stage->setAttr(
          "cleave.forward_seconds",
          b.getF64FloatAttr(forward + forwardCopies + forwardCollectives));
      stage->setAttr("cleave.backward_seconds",
                     b.getF64FloatAttr(forwardOnlyStage
                                           ? 0.0
                                           : forward * kBackwardFactor +
                                                 recompute + backwardCopies +
                                                 backwardCollectives));
      stage->setAttr("cleave.recompute_seconds",
                     b.getF64FloatAttr(forwardOnlyStage ? 0.0 : recompute));
      stage->setAttr(
          "cleave.host_copy_seconds",
          b.getF64FloatAttr(forwardCopies +
                            (forwardOnlyStage ? 0.0 : backwardCopies)));
      stage->setAttr(
          "cleave.shard_collective_seconds",
          b.getF64FloatAttr(forwardCollectives +
                            (forwardOnlyStage ? 0.0 : backwardCollectives)));
    }
    SmallVector<Attribute> perRank;
    for (const std::vector<pipeline::Action> &actions : built->perRank) {
      SmallVector<int64_t> flat;
      for (const pipeline::Action &a : actions) {
        flat.push_back(a.stage);
        flat.push_back(a.backward);
        flat.push_back(a.microbatch);
        flat.push_back(a.slot);
      }
      perRank.push_back(b.getDenseI64ArrayAttr(flat));
    }
    module->setAttr("cleave.schedule", b.getArrayAttr(perRank));
    NamedAttrList info;
    info.append("kind", b.getStringAttr(kind));
    info.append("ranks", b.getI64IntegerAttr(ranks));
    info.append("microbatches", b.getI64IntegerAttr(microbatches));
    info.append("virtual_stages", b.getI64IntegerAttr(options.virtualStages));
    info.append("active_microbatches", b.getI64IntegerAttr(activeMicrobatches));
    info.append("theoretical_bubble",
                b.getF64FloatAttr(pipeline::theoreticalBubble(options)));
    info.append("link_bytes_per_second",
                b.getF64FloatAttr(rates->linkBytesPerSecond));
    info.append("link_latency_seconds",
                b.getF64FloatAttr(rates->linkLatencySeconds));
    module->setAttr("cleave.pipeline", info.getDictionary(module.getContext()));
    return success();
  }
};

} // namespace
