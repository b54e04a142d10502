//===- CheckMemoryFit.cpp - the spec key device_memory_gib ----------------===//
//
// A plan that does not fit the device is refused before any file is
// written, with the rank that is furthest over (not the first one found),
// its largest category and the spec key that would shrink it.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"
#include "passes/PlanAnalysis.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

namespace mlir::cleave {
#define GEN_PASS_DEF_CHECKMEMORYFIT
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

std::string size(double bytes) {
  return bytes >= 1073741824.0
             ? llvm::formatv("{0:F2} GiB", bytes / 1073741824.0).str()
             : llvm::formatv("{0:F2} MiB", bytes / 1048576.0).str();
}

/// Bytes of the model states (parameters, gradients, optimizer state) on
/// one rank were every trained parameter sharded over `k` ranks
/// (sharded_data_parallel_degree = k: flat chunks cut as stateShards cuts
/// them, the parameter, its gradient and each state tensor one chunk);
/// frozen parameters whole.
int64_t modelStatesAt(ModuleOp module, int64_t k) {
  llvm::StringMap<int64_t> stateTensors; // trained parameter -> its states
  module.walk([&](Operation *op) {
    if (auto adamw = dyn_cast<AdamWOp>(op))
      stateTensors[adamw.getName()] = 2;
    else if (auto sgd = dyn_cast<SgdOp>(op))
      stateTensors[sgd.getName()] =
          sgd.getMomentum().convertToDouble() > 0 ? 1 : 0;
  });
  int64_t bytes = 0;
  module.walk([&](ParameterOp param) {
    auto type = param.getType().cast<RankedTensorType>();
    int64_t elementBytes =
        std::max<int64_t>(1, type.getElementType().getIntOrFloatBitWidth() / 8);
    auto alignUp = [](int64_t n, int64_t a) { return (n + a - 1) / a * a; };
    auto it = stateTensors.find(param.getSymName());
    if (it == stateTensors.end()) {
      bytes += alignUp(type.getNumElements() * elementBytes,
                       kStateChunkAlignment);
      return;
    }
    int64_t perAlignment =
        std::max<int64_t>(1, kStateChunkAlignment / elementBytes);
    int64_t chunk = alignUp((type.getNumElements() + k - 1) / k, perAlignment);
    bytes += chunk * elementBytes * (2 + it->second);
  });
  return bytes;
}

/// The largest trained parameter's bytes: at least that much is gathered
/// at once under sharding.
int64_t largestParameter(ModuleOp module) {
  int64_t largest = 0;
  module.walk([&](ParameterOp param) {
    auto type = param.getType().cast<RankedTensorType>();
    largest = std::max<int64_t>(
        largest, type.getNumElements() *
                     std::max<int64_t>(
                         1, type.getElementType().getIntOrFloatBitWidth() / 8));
  });
  return largest;
}

/// Trained parameters' elements: SMP's rule of thumb counts them.
int64_t parameterCount(ModuleOp module) {
  int64_t count = 0;
  module.walk([&](ParameterOp param) {
    count += param.getType().cast<RankedTensorType>().getNumElements();
  });
  return count;
}

struct CheckMemoryFit : mlir::cleave::impl::CheckMemoryFitBase<CheckMemoryFit> {
  using CheckMemoryFitBase::CheckMemoryFitBase;

  void runOnOperation() override {
    // Only reads the IR; the emitter reuses the analysis.
    markAllAnalysesPreserved();
    if (deviceMemoryGib <= 0)
      return;
    // Passes.td's PlanLayoutOptions, in PlanLayout's order.
    PlanLayout layout{dataDegree,  placement, microbatches,
                      globalBatch, backend,   ratesFile};
    FailureOr<const Plan *> plan = getAnalysis<PlanAnalysis>().getPlan(layout);
    if (failed(plan))
      return signalPassFailure();
    double limit = deviceMemoryGib * 1073741824.0;
    int64_t over = llvm::count_if((*plan)->ranks, [&](const RankPlan &r) {
      return double(r.memory.peakBytes) > limit;
    });
    if (over == 0)
      return;
    const RankPlan &worst = (*plan)->worstRank();
    // The categories a spec key can shrink, in the order ties go to.
    struct Category {
      const char *key;
      int64_t bytes;
    } categories[] = {{"activations", worst.memory.activations},
                      {"parameters", worst.memory.parameters},
                      {"gradients", worst.memory.gradients},
                      {"optimizer_state", worst.memory.optimizerState},
                      {"workspace", worst.memory.workspace}};
    Category largest = categories[0];
    for (const Category &c : categories)
      if (c.bytes > largest.bytes)
        largest = c;
    std::string fix = StringRef(largest.key) == "activations"
                          ? "lower 'batch_size' or raise 'microbatches' (or "
                            "'pipeline_parallel_degree')"
                          : "raise 'pipeline_parallel_degree'";
    // Optimizer state first: ZeRO-1 splits it over the data-parallel ranks.
    if (StringRef(largest.key) == "optimizer_state") {
      bool split = false;
      getOperation().walk(
          [&](ParameterOp p) { split |= p->hasAttr(kStateAxisAttr); });
      if (split)
        fix = "add data-parallel ranks ('world_size'), over which "
              "'shard_optimizer_state' splits it, or raise "
              "'pipeline_parallel_degree'";
      else if (dataDegree > 1)
        fix = llvm::formatv("set 'shard_optimizer_state': true (each of the "
                            "{0} data-parallel ranks would keep about {1} of "
                            "it), or raise 'pipeline_parallel_degree'",
                            int64_t(dataDegree),
                            size(double(largest.bytes) / double(dataDegree)))
                  .str();
      else
        fix = "add data-parallel ranks with 'shard_optimizer_state': true, "
              "or raise 'pipeline_parallel_degree'";
    }
    // Model states first: sharded data parallelism splits all three over
    // the group (not with a pipeline, which sharding refuses).
    bool modelState = StringRef(largest.key) != "activations" &&
                      StringRef(largest.key) != "workspace";
    std::string degreeAdvice;
    if (modelState && (*plan)->pipeline == 1 && dataDegree > 1)
      degreeAdvice = shardingAdvice(worst, limit);
    if (!degreeAdvice.empty())
      fix = degreeAdvice;
    char limitText[32];
    std::snprintf(limitText, sizeof limitText, "%g", double(deviceMemoryGib));
    InFlightDiagnostic error = mlir::emitError(getOperation().getLoc());
    error << "spec key 'device_memory_gib': rank " << worst.rank << " needs "
          << size(double(worst.memory.peakBytes))
          << " (its plan), more than the " << limitText
          << " GiB of the device; its largest part is " << largest.key << " ("
          << size(double(largest.bytes)) << "): " << fix;
    if (!degreeAdvice.empty()) {
      int64_t count = parameterCount(getOperation());
      int64_t hosts = std::max<int64_t>(1, (count + 2999999999) / 3000000000);
      error.attachNote()
          << "SMP's rule of thumb for GPU memory: one more 8-GPU host in the "
             "sharding group per 3B parameters; for these "
          << llvm::formatv("{0:F2}", double(count) / 1e9)
          << "B parameters that is " << hosts << " host"
          << (hosts > 1 ? "s" : "") << ", 'sharded_data_parallel_degree': "
          << 8 * hosts;
    }
    if (over > 1)
      error.attachNote() << over << " of the " << (*plan)->ranks.size()
                         << " ranks exceed it; rank " << worst.rank
                         << " needs the most";
    signalPassFailure();
  }

  /// Which sharding degree would hold the model states of `worst`: the
  /// smallest one dividing the data-parallel degree whose plan would fit,
  /// its model states sharded by modelStatesAt and everything else as
  /// planned (and, if nothing is gathered yet, the largest parameter and
  /// its flattened gradient on top); else how many ranks would be needed. Empty
  /// when no degree helps (the rest alone does not fit).
  std::string shardingAdvice(const RankPlan &worst, double limit) {
    ModuleOp module = getOperation();
    int64_t current = 1;
    module.walk([&](ParameterOp p) {
      if (p->hasAttr(kParamAxisAttr))
        if (std::optional<StateShards> shards = stateShards(p))
          current = std::max(current, shards->ranks);
    });
    int64_t rest = worst.memory.peakBytes - worst.memory.parameters -
                   worst.memory.gradients - worst.memory.optimizerState;
    // Not sharded yet: the largest parameter gathered whole, and its
    // gradient's flattened copy before the reduce-scatter, on top of the
    // activations (an upper estimate: the plan at the degree found fits).
    if (worst.memory.gatheredParameters == 0)
      rest += 2 * largestParameter(module);
    // Gradient buckets (cleave-bucket-scatters): a bucket's flattened
    // gradients, their joined copy and its flat view live together until
    // its wait; three bucket-sized copies bound them (an upper estimate).
    auto bucketBytes = [&](int64_t k) -> int64_t {
      if (bucketElements <= 0)
        return 0;
      int64_t padded = 0;
      module.walk([&](ParameterOp param) {
        int64_t n = param.getType().cast<RankedTensorType>().getNumElements();
        padded += k * ((n + k - 1) / k);
      });
      return 3 * std::min<int64_t>(bucketElements, padded) * 4;
    };
    auto predicted = [&](int64_t k) {
      return double(rest + modelStatesAt(module, k) + bucketBytes(k));
    };
    for (int64_t k = current + 1; k <= dataDegree; ++k)
      if (dataDegree % k == 0 && predicted(k) <= limit)
        return llvm::formatv("set 'sharded_data_parallel_degree': {0}, the "
                             "smallest that divides the {1} data-parallel "
                             "ranks and fits (each rank would need about {2} "
                             "by this plan, its parameters, gradients and "
                             "optimizer state split over {0} ranks)",
                             k, int64_t(dataDegree), size(predicted(k)))
            .str();
    // More ranks than there are: the least that would do.
    for (int64_t k = dataDegree + 1; k <= (int64_t(1) << 20); k *= 2)
      if (predicted(k) <= limit) {
        int64_t least = k / 2 + 1;
        while (predicted(least) > limit)
          ++least;
        return llvm::formatv(
                   "no 'sharded_data_parallel_degree' dividing the {0} "
                   "data-parallel ranks fits (all {0}: about {1} per rank); "
                   "sharding over at least {2} ranks would (about {3} per "
                   "rank): raise 'world_size' to a multiple of such a degree",
                   int64_t(dataDegree), size(predicted(dataDegree)), least,
                   size(predicted(least)))
            .str();
      }
    return {};
  }
};

} // namespace
