//===- CheckMemoryFit.cpp - the spec key device_memory_gib ----------------===//
//
// A plan that does not fit the device is refused before any file is
// written, with the rank that is furthest over (not the first one found),
// its largest category and the spec key that would shrink it.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"
#include "passes/PlanAnalysis.h"

#include "mlir/IR/BuiltinOps.h"
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
    char limitText[32];
    std::snprintf(limitText, sizeof limitText, "%g", double(deviceMemoryGib));
    InFlightDiagnostic error = mlir::emitError(getOperation().getLoc());
    error << "spec key 'device_memory_gib': rank " << worst.rank << " needs "
          << size(double(worst.memory.peakBytes))
          << " (its plan), more than the " << limitText
          << " GiB of the device; its largest part is " << largest.key << " ("
          << size(double(largest.bytes)) << "): " << fix;
    if (over > 1)
      error.attachNote() << over << " of the " << (*plan)->ranks.size()
                         << " ranks exceed it; rank " << worst.rank
                         << " needs the most";
    signalPassFailure();
  }
};

} // namespace
