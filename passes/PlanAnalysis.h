//===- PlanAnalysis.h - what the compiled job holds, runs and costs -*- C++
//-*-===//
//
// One analysis of the planned IR gives the plan of every layout (one stage
// or a pipeline, any data degree): per rank its mesh coordinates, the stages
// it holds, its predicted memory by category and by memory space, its
// predicted step time and FLOPs; per stage its node range and sizes; the
// schedule and its bubble. plan.json (toJSON), the report page and the
// device-memory check (cleave-check-memory-fit) all read this one result,
// so what they show cannot disagree. docs/plan.md says where each number
// comes from.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_PLANANALYSIS_H
#define CLEAVE_PASSES_PLANANALYSIS_H

#include "passes/LivePeak.h"
#include "passes/PipelineSchedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/AnalysisManager.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::cleave {

/// What the module does not (yet) carry about the layout: the options of
/// the passes that read the plan (cleave-emit-program,
/// cleave-check-memory-fit). A module with a `cleave.mesh` takes the data
/// degree and the placement from the mesh instead; one with a
/// `cleave.pipeline` takes its microbatches and link rates from there.
struct PlanLayout {
  int64_t dataDegree = 1;
  std::string placement = "cluster"; // cluster (DPT), spread (TPD) or an
                                     // order of D, P and T, slowest first
  int64_t microbatches = 1;
  int64_t globalBatch = 0; // 0: microbatch size x microbatches x data degree
  std::string backend = "cpu"; // whose checked-in rates cost the ops
  std::string ratesFile;       // or rates from cleave-calibrate

  bool operator==(const PlanLayout &o) const {
    return dataDegree == o.dataDegree && placement == o.placement &&
           microbatches == o.microbatches && globalBatch == o.globalBatch &&
           backend == o.backend && ratesFile == o.ratesFile;
  }
};

/// Predicted bytes of one rank (or stage) by what they hold, as
/// cleave-memory-plan's `cleave.memory` dictionary names them.
struct PlanMemory {
  int64_t peakBytes = 0;
  int64_t parameters = 0, gradients = 0, optimizerState = 0, activations = 0,
          workspace = 0, constants = 0, io = 0;
  /// By memory space: the device arena (the peak) and the host arena
  /// (offloaded activations), and the activations each holds, as the memory
  /// plan's allocator of each space sized them.
  int64_t deviceBytes = 0, hostBytes = 0;
  int64_t deviceActivations = 0, hostActivations = 0;
  /// Part of the activations: whole parameters gathered and live at once
  /// (sharded data parallelism's cleave.gather_param; 0 without it).
  int64_t gatheredParameters = 0;
  /// The most bytes of live tensors at once over a step, per space, as the
  /// runtime measures them (LivePeak.h): at most the arena's bytes, which
  /// add alignment and first-fit holes. Of a rank only: its stages'
  /// profiles along its schedule, not a sum.
  int64_t livePeakBytes = 0, hostLivePeakBytes = 0;
};

/// The categories the memory-fit advice chooses among, with their keys.
struct PlanMemoryCategory {
  const char *key;
  int64_t PlanMemory::*bytes;
};
extern const std::array<PlanMemoryCategory, 7> kPlanMemoryCategories;

/// Tensor parallelism: a parameter of a stage, split over mesh axes (the
/// full tensor's dimension `dim` over `axis`, in `blocks` blocks: a fused
/// QKV weight is 3) or whole on every rank of the tensor axis, with why.
struct TensorSplitPlan {
  std::string name;
  std::vector<int64_t> fullShape, localShape;
  // A padded vocabulary (cleave-pad-vocabulary): the shape it is split
  // as; fullShape is the model's.
  std::vector<int64_t> paddedShape;
  std::vector<std::pair<int64_t, std::string>> splitDims; // (dim, axis)
  int64_t blocks = 1;
  std::string replicatedWhy; // empty when split
  double localBytes = 0;
};

/// Tensor parallelism: the collectives over the tensor axis that one run of
/// a stage's function makes, by kind (`tp_reduce`: Megatron's g, a sum;
/// `all_reduce`: e.g. the vocabulary-parallel softmax's max).
struct TensorCollectivePlan {
  std::string function; // "forward", "backward", "optimizer"
  std::string op, reduce;
  int64_t count = 0; // per run of the function
  double bytes = 0;  // per run, the all-reduced tensors' bytes
};

struct StagePlan {
  int64_t stage = 0, pipelineRank = 0;
  std::string firstNode, lastNode; // the ONNX nodes it starts and ends with
  int64_t ops = 0, parameters = 0, slots = 0;
  double parameterBytes = 0;
  double sentBytes = 0; // one microbatch's activations to the next stage
  /// Per microbatch, from the cost model (or the schedule pass's record).
  double forwardSeconds = 0, backwardSeconds = 0;
  /// Of those: the forward ops the backward computes again (cleave-remat's
  /// `cleave.recompute`), in the backward; the copies to host memory and
  /// back (cleave-offload-activations: offloads in the forward, fetches in
  /// the backward), at the host link's rate (CostModel.h, hostCopySeconds);
  /// sharded data parallelism's all-gathers of parameters (forward and
  /// backward) and reduce-scatters of gradients, at the link's rate
  /// (shardCollectiveSeconds). All on the critical path.
  double recomputeSeconds = 0, hostCopySeconds = 0, shardCollectiveSeconds = 0;
  double forwardFlops = 0, backwardFlops = 0;
  /// Once per step.
  double optimizerSeconds = 0, optimizerFlops = 0;
  // Gradients all-reduced over the data axis (ZeRO-1: reduce-scattered,
  // then the parameters all-gathered: the same bytes on a ring).
  double allReduceBytes = 0;
  int64_t allReduceBuckets = 0; // collectives that carry them
  PlanMemory memory;
  /// The device arena in use at each op of one microbatch's functions and
  /// the optimizer, in module order (cleave-memory-plan's
  /// `cleave.memory_timeline`): its highest value is the stage's peak.
  std::vector<std::pair<std::string, std::vector<int64_t>>> memoryTimeline;
  /// The same had remat and offload not run (the memory plan's
  /// `cleave.memory_timeline_without_remat`), by function as above; empty
  /// for a stage that neither recomputes nor offloads.
  std::vector<std::vector<int64_t>> memoryTimelineWithoutRemat;
  int64_t peakBytesWithoutRemat = 0; // 0: as peakBytes
  /// With a tensor axis: its parameters' splits and its collectives.
  std::vector<TensorSplitPlan> tensorSplits;
  std::vector<TensorCollectivePlan> tensorCollectives;
  /// Its live tensor bytes by function, for the ranks' live peaks.
  LiveProfile live;
};

struct RankPlan {
  int64_t rank = 0; // world rank
  int64_t dataRank = 0, pipelineRank = 0, tensorRank = 0;
  std::vector<int64_t> stages; // the stages (chunks) it holds, in order
  int64_t firstSample = 0;     // its first sample of the global batch
  PlanMemory memory;           // summed over its chunks
  /// The step of this rank: its pipeline part ends at pipelineSeconds
  /// (computing for computeSeconds of it), then its gradients are
  /// all-reduced and the optimizer runs.
  double pipelineSeconds = 0, computeSeconds = 0, allReduceSeconds = 0,
         optimizerSeconds = 0, idleFraction = 0;
  double stepSeconds() const {
    return pipelineSeconds + allReduceSeconds + optimizerSeconds;
  }
  double flops = 0; // per step
};

struct SchedulePlan {
  std::string kind;
  int64_t microbatches = 1, virtualStages = 1, activeMicrobatches = 0;
  double theoreticalBubble = 0, predictedBubble = 0;
};

struct PlanNote {
  std::string key, value, why;
};

struct Plan {
  std::string model;
  /// The mesh axes, slowest first, and their sizes.
  std::vector<std::pair<std::string, int64_t>> mesh;
  int64_t data = 1, pipeline = 1, tensor = 1;
  std::string placement;
  int64_t globalBatch = 0, microbatchSize = 0, microbatches = 1, seqLen = 0;
  /// The parts each microbatch is read in, one per tensor rank
  /// (cleave-split-token-reads); 1: read whole.
  int64_t readParts = 1;
  SchedulePlan schedule;
  std::vector<StagePlan> stages;
  std::vector<RankPlan> ranks;                    // by world rank
  std::vector<::cleave::pipeline::Span> timeline; // one data replica
  double linkBytesPerSecond = 0, linkLatencySeconds = 0;
  std::vector<PlanNote> notes;

  int64_t worldSize() const { return data * pipeline * tensor; }
  /// The step of the job: every rank waits for the slowest.
  double stepSeconds() const;
  double flopsPerStep() const;
  /// The rank with the largest predicted peak (the lowest such rank).
  const RankPlan &worstRank() const;
};

/// plan.json: the one shape of every layout.
llvm::json::Value toJSON(const Plan &plan);

/// The microbatch as the token ids and targets are read: its [size, seq],
/// from the shape of the arguments that cleave-input-roles names the token
/// ids and targets in `modules` (the stage modules, or the one module),
/// and the parts a rank reads one of (their cleave.read_parts); {0, 0, 1}
/// without them.
struct MicrobatchShape {
  int64_t size = 0, seqLen = 0, readParts = 1;
};
MicrobatchShape microbatchShape(ArrayRef<ModuleOp> modules);

/// The plan of a planned top-level module (after cleave-memory-plan, and
/// for a pipeline cleave-pipeline-schedule). Computed on first use; use it
/// with getAnalysis<PlanAnalysis>() and keep it by marking it preserved.
class PlanAnalysis {
public:
  explicit PlanAnalysis(Operation *op);

  /// The plan; failure (with an error on the module) when the module is not
  /// planned or the layout is impossible. `layout` fills in what the module
  /// does not say; a later call with another layout recomputes.
  FailureOr<const Plan *> getPlan(const PlanLayout &layout);

private:
  ModuleOp module;
  std::optional<PlanLayout> computedFor;
  std::optional<Plan> plan;
};

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PLANANALYSIS_H
