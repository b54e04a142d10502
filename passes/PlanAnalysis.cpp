//===- PlanAnalysis.cpp - the plan of a planned module
//---------------------===//
//
// Reads what the passes recorded in the IR (cleave-memory-plan's
// `cleave.memory` per stage, cleave-pipeline-schedule's `cleave.pipeline`
// and `cleave.schedule`, the partition's node range, the data-parallel
// pass's all_reduce_grads) and costs the rest with passes/CostModel.h.
// Nothing here decides anything the programs run: it predicts.
//
//===----------------------------------------------------------------------===//

#include "passes/PlanAnalysis.h"

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/CostModel.h"
#include "passes/Layout.h"
#include "passes/NodeName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cctype>
#include <map>

using namespace mlir;
using namespace mlir::cleave;
namespace pl = ::cleave::pipeline;

const std::array<PlanMemoryCategory, 7> mlir::cleave::kPlanMemoryCategories = {{
    {"parameters", &PlanMemory::parameters},
    {"gradients", &PlanMemory::gradients},
    {"optimizer_state", &PlanMemory::optimizerState},
    {"activations", &PlanMemory::activations},
    {"workspace", &PlanMemory::workspace},
    {"constants", &PlanMemory::constants},
    {"io", &PlanMemory::io},
}};

namespace {

int64_t intIn(DictionaryAttr dict, StringRef key) {
  auto attr = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
  return attr ? attr.getInt() : 0;
}

double realIn(DictionaryAttr dict, StringRef key) {
  auto attr = dict ? dict.getAs<FloatAttr>(key) : FloatAttr();
  return attr ? attr.getValueAsDouble() : 0.0;
}

enum class FunctionKind { Forward, Backward, Optimizer };

/// As the emitter reads `cleave.kind`: a function without one is a forward.
/// A refresh function (ZeRO-1's working copies, first in a step) runs once
/// per step, as the optimizer: costed with it.
FunctionKind kindOf(func::FuncOp func) {
  auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
  if (kind && kind.getValue() == "backward")
    return FunctionKind::Backward;
  if (kind &&
      (kind.getValue() == "optimizer" || kind.getValue() == "refresh"))
    return FunctionKind::Optimizer;
  return FunctionKind::Forward;
}

PlanMemory memoryOf(DictionaryAttr dict) {
  PlanMemory m;
  m.peakBytes = intIn(dict, "peak_bytes");
  for (const PlanMemoryCategory &c : kPlanMemoryCategories)
    m.*c.bytes = intIn(dict, c.key);
  // A device arena per stage (the peak), and a host arena for what the
  // plan offloads.
  m.deviceBytes = m.peakBytes;
  m.hostBytes = intIn(dict, "host_arena_bytes");
  m.deviceActivations = intIn(dict, "device_activations");
  m.hostActivations = intIn(dict, "host_activations");
  m.gatheredParameters = intIn(dict, "gathered_parameters");
  return m;
}

void add(PlanMemory &into, const PlanMemory &m) {
  into.peakBytes += m.peakBytes;
  for (const PlanMemoryCategory &c : kPlanMemoryCategories)
    into.*c.bytes += m.*c.bytes;
  into.deviceBytes += m.deviceBytes;
  into.hostBytes += m.hostBytes;
  into.deviceActivations += m.deviceActivations;
  into.hostActivations += m.hostActivations;
  into.gatheredParameters += m.gatheredParameters;
}

/// Tensor parallelism: each parameter's split over mesh axes, or why it is
/// whole (the sharding_stop of an op that reads it, as propagation's remark
/// said).
void planTensorSplits(ModuleOp m, StagePlan &s) {
  // The reason propagation gave at an op reading each parameter.
  llvm::StringMap<std::string> stops;
  // Through casts and f (sequence parallelism passes a whole weight read
  // in its region through a tp_copy).
  m.walk([&](GetParamOp get) {
    SmallVector<Operation *> users(get->getUsers());
    while (!users.empty()) {
      Operation *user = users.pop_back_val();
      if (isa<CastOp, TpCopyOp>(user))
        llvm::append_range(users, user->getUsers());
      else if (auto why = user->getAttrOfType<StringAttr>(kShardingStopAttr))
        stops.try_emplace(get.getName(), why.str());
    }
  });
  for (auto param : m.getOps<ParameterOp>()) {
    TensorSplitPlan split;
    split.name = param.getSymName().str();
    auto local = param.getType().cast<RankedTensorType>();
    split.localShape.assign(local.getShape().begin(), local.getShape().end());
    split.localBytes = tensorBytes(local);
    auto full = param->getAttrOfType<TypeAttr>(kFullTypeAttr);
    auto sharding = param->getAttrOfType<ShardingAttr>(kShardingAttr);
    split.fullShape = split.localShape;
    if (full)
      if (auto type = full.getValue().dyn_cast<RankedTensorType>())
        split.fullShape.assign(type.getShape().begin(), type.getShape().end());
    if (auto unpadded =
            param->getAttrOfType<DenseI64ArrayAttr>(kUnpaddedShapeAttr)) {
      split.paddedShape = split.fullShape;
      split.fullShape.assign(unpadded.asArrayRef().begin(),
                             unpadded.asArrayRef().end());
    }
    if (sharding)
      for (unsigned d = 0; d < sharding.getDims().size(); ++d)
        for (const AxisRef &ref : sharding.getDimAxisRefs(d))
          split.splitDims.push_back({int64_t(d), ref.name.str()});
    if (sharding && full && !split.splitDims.empty()) {
      for (unsigned d = 0; d < split.fullShape.size(); ++d)
        if (sharding.getDimBlocks(d) > 1)
          split.blocks = sharding.getDimBlocks(d);
    } else {
      split.splitDims.clear();
      auto it = stops.find(split.name);
      split.replicatedWhy =
          it != stops.end()
              ? it->second
              : "no split reaches it: every op that reads it runs whole on "
                "each tensor rank (norms, biases added after a row-parallel "
                "product's all-reduce, position embeddings)";
    }
    s.tensorSplits.push_back(std::move(split));
  }
  for (auto func : m.getOps<func::FuncOp>()) {
    if (func->hasAttr(kLastMicrobatchOfAttr))
      continue;
    FunctionKind kind = kindOf(func);
    const char *name = kind == FunctionKind::Forward    ? "forward"
                       : kind == FunctionKind::Backward ? "backward"
                                                        : "optimizer";
    auto add = [&](StringRef op, StringRef reduce, Value input) {
      for (TensorCollectivePlan &c : s.tensorCollectives)
        if (c.function == name && c.op == op && c.reduce == reduce) {
          ++c.count;
          c.bytes += tensorBytes(input.getType());
          return;
        }
      s.tensorCollectives.push_back({name, op.str(), reduce.str(), 1,
                                     double(tensorBytes(input.getType()))});
    };
    func.walk([&](Operation *op) {
      if (auto reduce = dyn_cast<TpReduceOp>(op))
        add("tp_reduce", "sum", reduce.getOperand());
      // Sequence parallelism's collectives, counted by the whole tensor
      // (the gather's result, the reduce-scatter's input).
      else if (auto gather = dyn_cast<SpAllGatherOp>(op))
        add("sp_all_gather", "", gather.getResult());
      else if (auto scatter = dyn_cast<SpReduceScatterOp>(op))
        add("sp_reduce_scatter", "sum", scatter.getInput());
      // The token ids' gather of prescaled_batch false.
      else if (auto ids = dyn_cast<AllGatherOp>(op);
               ids && ids.getAxes().size() == 1 &&
               ids.getAxes()[0].cast<StringAttr>().getValue() == kTensorAxis)
        add("all_gather", "", ids.getResult());
      else if (auto all = dyn_cast<AllReduceOp>(op);
               all && all.getGroup() == kTensorAxis)
        add("all_reduce", all.getReduce(), all.getInput());
    });
  }
}

/// A stage's sizes and costs. `rates` cost what the schedule pass did not
/// record (a one-stage module, every optimizer).
StagePlan planStage(ModuleOp m, int64_t index, int64_t pipelineRanks,
                    const Rates &rates) {
  StagePlan s;
  s.stage = index;
  s.pipelineRank = index % pipelineRanks;
  auto memory = m->getAttrOfType<DictionaryAttr>("cleave.memory");
  s.memory = memoryOf(memory);
  s.slots = intIn(memory, "slots");
  s.peakBytesWithoutRemat = intIn(memory, "peak_bytes_without_remat");
  s.live = liveProfileOf(m);
  for (auto param : m.getOps<ParameterOp>()) {
    ++s.parameters;
    s.parameterBytes += tensorBytes(param.getType());
  }
  double forwardSeconds = 0, forwardCopySeconds = 0, backwardCopySeconds = 0,
         forwardCollectiveSeconds = 0, backwardCollectiveSeconds = 0;
  bool hasBackward = false;
  for (auto func : m.getOps<func::FuncOp>()) {
    // The last microbatch's copy of a backward (cleave-overlap-gradients)
    // runs instead of it, not besides it: only the buckets it starts count.
    bool copy = func->hasAttr(kLastMicrobatchOfAttr);
    if (auto bytes =
            func->getAttrOfType<DenseI64ArrayAttr>("cleave.memory_timeline");
        bytes && !copy) {
      s.memoryTimeline.push_back(
          {func.getName().str(),
           std::vector<int64_t>(bytes.asArrayRef().begin(),
                                bytes.asArrayRef().end())});
      auto without = func->getAttrOfType<DenseI64ArrayAttr>(
          "cleave.memory_timeline_without_remat");
      s.memoryTimelineWithoutRemat.push_back(
          without ? std::vector<int64_t>(without.asArrayRef().begin(),
                                         without.asArrayRef().end())
                  : std::vector<int64_t>());
    }
    FunctionKind kind = kindOf(func);
    hasBackward |= kind == FunctionKind::Backward;
    if (kind == FunctionKind::Forward) {
      if (auto a = func->getAttrOfType<StringAttr>("cleave.first_node"))
        s.firstNode = a.str();
      if (auto a = func->getAttrOfType<StringAttr>("cleave.last_node"))
        s.lastNode = a.str();
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (func.getResultAttr(i, "cleave.boundary"))
          s.sentBytes += tensorBytes(func.getResultTypes()[i]);
    }
    func.walk([&](Operation *op) {
      // The data-parallel buckets, started in the backward or run in the
      // optimizer (a rank's merged optimizer names its other stages'
      // parameters).
      ArrayAttr bucket;
      if (auto reduce = dyn_cast<AllReduceGradsOp>(op))
        bucket =
            reduce.getGroup() == kDataAxis ? reduce.getParams() : ArrayAttr();
      else if (auto start = dyn_cast<AllReduceGradsStartOp>(op))
        bucket =
            start.getGroup() == kDataAxis ? start.getParams() : ArrayAttr();
      if (isa<AllReduceGradsOp, AllReduceGradsStartOp>(op)) {
        if (!bucket)
          return;
        ++s.allReduceBuckets;
        for (Attribute name : bucket)
          if (auto param = lookupParameter(op, name.cast<FlatSymbolRefAttr>()))
            s.allReduceBytes += tensorBytes(param.getType());
        return;
      }
      // ZeRO-1: a bucket's reduce-scatter and its all-gather each move, on
      // a ring, half what one all-reduce of its padded buffers does;
      // counted once, at the reduce-scatter, except for a parameter with a
      // working copy, whose gather's half is in the copy's 16 bits.
      ArrayAttr scattered, gathered;
      if (auto scatter = dyn_cast<ReduceScatterGradsOp>(op))
        scattered = scatter.getParams();
      else if (auto start = dyn_cast<ReduceScatterGradsStartOp>(op))
        scattered = start.getParams();
      else if (auto gather = dyn_cast<AllGatherParamsOp>(op))
        gathered = gather.getParams();
      if (scattered || gathered) {
        s.allReduceBuckets += bool(scattered);
        for (Attribute name : scattered ? scattered : gathered)
          if (auto param = lookupParameter(op, name.cast<FlatSymbolRefAttr>()))
            if (std::optional<StateShards> shards = stateShards(param)) {
              Type element =
                  param.getType().cast<RankedTensorType>().getElementType();
              auto working = param->getAttrOfType<TypeAttr>(kWorkingTypeAttr);
              if (gathered && !working)
                continue;
              double halves = working ? 1 : 2;
              if (gathered)
                element = working.getValue();
              s.allReduceBytes +=
                  double(shards->padded()) * elementBytes(element) * halves / 2;
            }
        return;
      }
      if (copy)
        return;
      if (auto send = dyn_cast<SendOp>(op)) {
        if (kind == FunctionKind::Forward)
          s.sentBytes += tensorBytes(send.getInput().getType());
        return;
      }
      if (isa<RecvOp>(op))
        return;
      if (!op->getDialect() || !isa<CleaveDialect>(op->getDialect()))
        return;
      OpCost cost = estimateCost(op);
      // Host copies (cleave-offload-activations) run once where they are,
      // in the forward or the backward: not forward work to cost again.
      if (isHostCopy(op)) {
        (kind == FunctionKind::Forward ? forwardCopySeconds
                                       : backwardCopySeconds) +=
            hostCopySeconds(op, rates);
        return;
      }
      // Sharded data parallelism's gathers and reduce-scatters, as the
      // copies: where they are.
      if (isShardCollective(op)) {
        (kind == FunctionKind::Forward ? forwardCollectiveSeconds
                                       : backwardCollectiveSeconds) +=
            shardCollectiveSeconds(op, rates);
        return;
      }
      switch (kind) {
      case FunctionKind::Forward:
        s.forwardFlops += cost.flops;
        forwardSeconds += seconds(cost, rates);
        if (!isa<ConstantOp, GetParamOp>(op)) {
          ++s.ops;
          // A one-stage module has no recorded node range: its first and
          // last located ops give it.
          std::string node = onnxNodeName(op->getLoc());
          if (!node.empty() && !func->hasAttr("cleave.first_node") &&
              s.firstNode.empty())
            s.firstNode = node;
          if (!node.empty() && !func->hasAttr("cleave.last_node"))
            s.lastNode = node;
        }
        break;
      case FunctionKind::Backward:
        s.backwardFlops += cost.flops;
        // Forward ops the backward runs again (cleave-remat) cost what
        // they cost in the forward, on top of the gradients'.
        if (op->hasAttr("cleave.recompute"))
          s.recomputeSeconds += seconds(cost, rates);
        break;
      case FunctionKind::Optimizer:
        s.optimizerFlops += cost.flops;
        s.optimizerSeconds += seconds(cost, rates);
        break;
      }
    });
  }
  // The schedule pass's record wins, so the plan costs the schedule it
  // built; the backward is costed as the schedule pass and the partition
  // cost it (kBackwardFactor x the forward).
  auto recorded = [&](StringRef key) -> std::optional<double> {
    if (auto f = m->getAttrOfType<FloatAttr>(key))
      return f.getValueAsDouble();
    return std::nullopt;
  };
  s.recomputeSeconds =
      recorded("cleave.recompute_seconds").value_or(s.recomputeSeconds);
  s.hostCopySeconds = recorded("cleave.host_copy_seconds")
                          .value_or(forwardCopySeconds + backwardCopySeconds);
  s.shardCollectiveSeconds =
      recorded("cleave.shard_collective_seconds")
          .value_or(forwardCollectiveSeconds + backwardCollectiveSeconds);
  s.forwardSeconds = recorded("cleave.forward_seconds")
                         .value_or(forwardSeconds + forwardCopySeconds +
                                   forwardCollectiveSeconds);
  s.backwardSeconds =
      recorded("cleave.backward_seconds")
          .value_or(hasBackward ? forwardSeconds * kBackwardFactor +
                                      s.recomputeSeconds + backwardCopySeconds +
                                      backwardCollectiveSeconds
                                : 0.0);
  return s;
}

std::vector<PlanNote> specNotes(ModuleOp module) {
  std::vector<PlanNote> notes;
  auto list = module->getAttrOfType<ArrayAttr>("cleave.spec_notes");
  for (Attribute a : list ? list.getValue() : ArrayRef<Attribute>()) {
    auto note = a.dyn_cast<DictionaryAttr>();
    if (!note)
      continue;
    auto text = [&](StringRef key) {
      auto s = note.getAs<StringAttr>(key);
      return s ? s.str() : std::string();
    };
    notes.push_back({text("key"), text("value"), text("why")});
  }
  return notes;
}

/// Seconds of a ring all-reduce of `bytes` in `buckets` collectives over
/// `n` ranks: each rank sends and receives 2(n-1)/n of the bytes, in
/// 2(n-1) steps that each pay the link's latency.
double ringAllReduceSeconds(double bytes, int64_t buckets, int64_t n,
                            double linkBytesPerSecond, double latency) {
  if (n < 2 || bytes <= 0)
    return 0;
  double steps = 2.0 * double(n - 1);
  double wire = linkBytesPerSecond > 0
                    ? steps / double(n) * bytes / linkBytesPerSecond
                    : 0.0;
  return wire + double(std::max<int64_t>(buckets, 1)) * steps * latency;
}

LogicalResult computePlan(ModuleOp top, const PlanLayout &layout, Plan &plan) {
  SmallVector<ModuleOp> stages;
  for (auto stage : top.getOps<ModuleOp>())
    if (stage->hasAttr(kStageAttr))
      stages.push_back(stage);
  bool pipelined = !stages.empty();
  if (!pipelined)
    stages.push_back(top);
  for (ModuleOp m : stages)
    if (!m->getAttrOfType<DictionaryAttr>("cleave.memory"))
      return pipelined ? mlir::emitError(m.getLoc())
                             << "stage module has no memory plan; "
                                "run cleave-memory-plan on each stage"
                       : mlir::emitError(top.getLoc())
                             << "the module has no memory plan; "
                                "run cleave-memory-plan first";

  auto info = top->getAttrOfType<DictionaryAttr>("cleave.pipeline");
  auto schedule = top->getAttrOfType<ArrayAttr>("cleave.schedule");
  if (pipelined && (!info || !schedule))
    return mlir::emitError(top.getLoc()) << "the pipeline has no schedule; run "
                                            "cleave-pipeline-schedule first";
  int64_t s = stages.size();
  int64_t pipelineRanks = pipelined ? intIn(info, "ranks") : 1;
  if (pipelineRanks < 1 || s % pipelineRanks != 0 ||
      (pipelined && (int64_t)schedule.size() != pipelineRanks))
    return mlir::emitError(top.getLoc())
           << "cleave.pipeline and cleave.schedule do not "
              "match the "
           << s << " stage modules";
  plan.microbatches = pipelined && intIn(info, "microbatches") > 0
                          ? intIn(info, "microbatches")
                          : layout.microbatches;

  // The mesh: the module's when it has one (first axis slowest), else the
  // layout's data degree and placement.
  plan.mesh.clear();
  if (auto mesh = top->getAttrOfType<MeshAttr>(kMeshAttr)) {
    for (auto [name, size] :
         llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
      plan.mesh.push_back({name.str(), size});
    plan.data = mesh.getAxisSize(kDataAxis).value_or(1);
    plan.pipeline = mesh.getAxisSize(kPipelineAxis).value_or(1);
    plan.tensor = mesh.getAxisSize(kTensorAxis).value_or(1);
    if (plan.pipeline != pipelineRanks)
      return mlir::emitError(top.getLoc())
             << "the mesh's pipeline axis has " << plan.pipeline
             << " ranks, but the schedule runs on " << pipelineRanks;
    std::string order;
    for (auto &[name, size] : plan.mesh)
      order += char(std::toupper(name.front()));
    plan.placement = order == "DPT"   ? "cluster"
                     : order == "TPD" ? "spread"
                                      : order;
  } else {
    std::string order = layout.placement == "cluster"  ? "DPT"
                        : layout.placement == "spread" ? "TPD"
                                                       : layout.placement;
    std::string sorted = order;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != "DPT")
      return mlir::emitError(top.getLoc())
             << "placement must be cluster, spread or an "
                "order of D, P and T, got '"
             << layout.placement << "'";
    plan.data = layout.dataDegree;
    plan.pipeline = pipelineRanks;
    plan.tensor = 1;
    for (char axis : order)
      plan.mesh.push_back(axis == 'D' ? std::make_pair("data", plan.data)
                          : axis == 'P'
                              ? std::make_pair("pipeline", plan.pipeline)
                              : std::make_pair("tensor", plan.tensor));
    plan.placement = layout.placement;
  }
  if (plan.data < 1 || plan.microbatches < 1)
    return mlir::emitError(top.getLoc())
           << "data-degree and microbatches must be at least 1";

  if (auto file = top.getLoc().dyn_cast<FileLineColLoc>())
    plan.model = file.getFilename().str();
  MicrobatchShape read = microbatchShape(stages);
  plan.microbatchSize = read.size;
  plan.seqLen = read.seqLen;
  plan.readParts = read.readParts;
  // The step's global batch: the layout's, which must be the data ranks'
  // microbatches, or that product.
  int64_t perStep = plan.microbatchSize * plan.microbatches * plan.data;
  plan.globalBatch = layout.globalBatch ? layout.globalBatch : perStep;
  if (plan.globalBatch != perStep)
    return mlir::emitError(top.getLoc())
           << "global batch " << plan.globalBatch << " is not " << plan.data
           << " data-parallel rank(s) x " << plan.microbatches
           << " microbatches of " << plan.microbatchSize << " samples";
  plan.notes = specNotes(top);

  llvm::Expected<Rates> rates = layout.ratesFile.empty()
                                    ? defaultRates(layout.backend)
                                    : readRates(layout.ratesFile);
  if (!rates)
    return mlir::emitError(top.getLoc()) << llvm::toString(rates.takeError());
  // The link the schedule was costed with, so transfers and all-reduces
  // use one rate.
  plan.linkBytesPerSecond =
      info ? realIn(info, "link_bytes_per_second") : rates->linkBytesPerSecond;
  plan.linkLatencySeconds =
      info ? realIn(info, "link_latency_seconds") : rates->linkLatencySeconds;

  plan.stages.clear();
  double maxSent = 0;
  for (int64_t st = 0; st < s; ++st) {
    plan.stages.push_back(planStage(stages[st], st, pipelineRanks, *rates));
    if (plan.tensor > 1)
      planTensorSplits(stages[st], plan.stages.back());
    maxSent = std::max(maxSent, plan.stages.back().sentBytes);
  }
  bool trains = llvm::any_of(plan.stages, [](const StagePlan &st) {
    return st.backwardSeconds > 0 || st.backwardFlops > 0;
  });

  // The schedule of one data replica, simulated with the stages' costs.
  pl::Options options;
  auto kindName = info ? info.getAs<StringAttr>("kind") : StringAttr();
  options.kind = pl::parseKind(kindName ? kindName.getValue().str() : "")
                     .value_or(pl::Kind::Interleaved);
  options.ranks = int(pipelineRanks);
  options.microbatches = int(plan.microbatches);
  options.virtualStages = int(s / pipelineRanks);
  options.activeMicrobatches = int(intIn(info, "active_microbatches"));
  pl::Schedule order;
  order.perRank.resize(pipelineRanks);
  order.slotsPerStage.assign(s, 1);
  if (pipelined) {
    for (int64_t p = 0; p < pipelineRanks; ++p) {
      auto actions = schedule[p].dyn_cast<DenseI64ArrayAttr>();
      if (!actions)
        return mlir::emitError(top.getLoc())
               << "cleave.schedule[" << p << "] is not an array of i64";
      ArrayRef<int64_t> a = actions.asArrayRef();
      for (size_t i = 0; i + 3 < a.size(); i += 4) {
        if (a[i] < 0 || a[i] >= s || a[i + 2] < 0 ||
            a[i + 2] >= plan.microbatches)
          return mlir::emitError(top.getLoc())
                 << "the schedule of pipeline rank " << p << " names stage "
                 << a[i] << " microbatch " << a[i + 2] << ", but there are "
                 << s << " stages and " << plan.microbatches << " microbatches";
        pl::Action action;
        action.stage = int(a[i]);
        action.backward = a[i + 1] != 0;
        action.microbatch = int(a[i + 2]);
        action.slot = int(a[i + 3]);
        order.perRank[p].push_back(action);
      }
    }
  } else {
    // One stage runs each microbatch's forward, then its backward.
    for (int64_t mb = 0; mb < plan.microbatches; ++mb) {
      order.perRank[0].push_back({false, 0, int(mb), 0});
      if (trains)
        order.perRank[0].push_back({true, 0, int(mb), 0});
    }
  }
  pl::Costs costs;
  for (const StagePlan &st : plan.stages) {
    costs.forward.push_back(st.forwardSeconds);
    costs.backward.push_back(st.backwardSeconds);
  }
  costs.transfer =
      plan.linkLatencySeconds +
      (plan.linkBytesPerSecond > 0 ? maxSent / plan.linkBytesPerSecond : 0.0);
  pl::Timeline timeline = pl::simulate(order, options, costs);
  double totalBusy = 0;
  for (double b : timeline.busy)
    totalBusy += b;
  plan.timeline = timeline.spans;
  plan.schedule.kind = kindName ? kindName.str() : "interleaved";
  plan.schedule.microbatches = plan.microbatches;
  plan.schedule.virtualStages = s / pipelineRanks;
  plan.schedule.activeMicrobatches = intIn(info, "active_microbatches");
  plan.schedule.theoreticalBubble = info ? realIn(info, "theoretical_bubble")
                                         : pl::theoreticalBubble(options);
  plan.schedule.predictedBubble =
      timeline.makespan > 0
          ? 1 - totalBusy / (timeline.makespan * double(pipelineRanks))
          : 0;
  double first = 0;
  std::vector<double> lastEnd(pipelineRanks, 0);
  if (!timeline.spans.empty()) {
    first = timeline.spans.front().start;
    for (const pl::Span &span : timeline.spans)
      first = std::min(first, span.start);
    for (const pl::Span &span : timeline.spans)
      lastEnd[span.rank] = std::max(lastEnd[span.rank], span.end - first);
  }

  // Every rank of the mesh, decoded from its number (first axis slowest).
  int64_t worldSize = 1;
  for (auto &[name, size] : plan.mesh)
    worldSize *= size;
  plan.ranks.clear();
  for (int64_t r = 0; r < worldSize; ++r) {
    RankPlan rank;
    rank.rank = r;
    int64_t rest = r;
    for (auto it = plan.mesh.rbegin(); it != plan.mesh.rend(); ++it) {
      int64_t coord = rest % it->second;
      rest /= it->second;
      if (it->first == kDataAxis)
        rank.dataRank = coord;
      else if (it->first == kPipelineAxis)
        rank.pipelineRank = coord;
      else if (it->first == kTensorAxis)
        rank.tensorRank = coord;
    }
    int64_t p = rank.pipelineRank;
    rank.firstSample = rank.dataRank * plan.microbatchSize * plan.microbatches;
    double allReduceBytes = 0;
    int64_t buckets = 0;
    for (int64_t st = p; st < s; st += pipelineRanks) {
      const StagePlan &stage = plan.stages[st];
      rank.stages.push_back(st);
      add(rank.memory, stage.memory);
      allReduceBytes += stage.allReduceBytes;
      buckets += stage.allReduceBuckets;
      rank.optimizerSeconds += stage.optimizerSeconds;
      rank.flops += double(plan.microbatches) *
                        (stage.forwardFlops + stage.backwardFlops) +
                    stage.optimizerFlops;
    }
    // The live peak: what the rank's stages always hold, then along its
    // schedule each function's own on top of the microbatches in flight
    // (forwards done, backwards not yet), the optimizers last.
    std::array<int64_t, 2> base = {0, 0}, most = {0, 0};
    std::map<int64_t, int64_t> inFlight;
    auto point = [&](const std::array<int64_t, 2> &own) {
      for (int space = 0; space < 2; ++space) {
        int64_t bytes = own[space];
        for (auto [st, n] : inFlight)
          bytes += n * plan.stages[st].live.saved[space];
        most[space] = std::max(most[space], bytes);
      }
    };
    for (int64_t st : rank.stages)
      for (int space = 0; space < 2; ++space)
        base[space] += plan.stages[st].live.persistent[space];
    if (p < (int64_t)order.perRank.size())
      for (const pl::Action &action : order.perRank[p]) {
        const LiveProfile &live = plan.stages[action.stage].live;
        if (!action.backward) {
          point(live.forwardPeak);
          ++inFlight[action.stage];
        } else {
          --inFlight[action.stage];
          point(live.backwardPeak);
        }
      }
    for (int64_t st : rank.stages)
      point(plan.stages[st].live.optimizerPeak);
    rank.memory.livePeakBytes = base[0] + most[0];
    rank.memory.hostLivePeakBytes = base[1] + most[1];
    rank.pipelineSeconds = lastEnd[p];
    rank.computeSeconds =
        p < (int64_t)timeline.busy.size() ? timeline.busy[p] : 0;
    rank.idleFraction = p < (int64_t)timeline.idleFraction.size()
                            ? timeline.idleFraction[p]
                            : 0;
    rank.allReduceSeconds =
        ringAllReduceSeconds(allReduceBytes, buckets, plan.data,
                             plan.linkBytesPerSecond, plan.linkLatencySeconds);
    plan.ranks.push_back(std::move(rank));
  }
  return success();
}

llvm::json::Object memoryJSON(const PlanMemory &m) {
  llvm::json::Object object{{"peak_bytes", m.peakBytes}};
  for (const PlanMemoryCategory &c : kPlanMemoryCategories)
    object[c.key] = m.*c.bytes;
  if (m.gatheredParameters)
    object["gathered_parameters"] = m.gatheredParameters;
  return object;
}

llvm::json::Array timelineJSON(const StagePlan &s) {
  llvm::json::Array functions;
  for (auto [i, timeline] : llvm::enumerate(s.memoryTimeline)) {
    auto &[name, bytes] = timeline;
    llvm::json::Object function{{"function", name},
                                {"bytes", llvm::json::Array(bytes)}};
    if (i < s.memoryTimelineWithoutRemat.size() &&
        !s.memoryTimelineWithoutRemat[i].empty())
      function["bytes_without_remat"] =
          llvm::json::Array(s.memoryTimelineWithoutRemat[i]);
    functions.push_back(std::move(function));
  }
  return functions;
}

} // namespace

double Plan::stepSeconds() const {
  double step = 0;
  for (const RankPlan &r : ranks)
    step = std::max(step, r.stepSeconds());
  return step;
}

double Plan::flopsPerStep() const {
  double flops = 0;
  for (const RankPlan &r : ranks)
    flops += r.flops;
  return flops;
}

const RankPlan &Plan::worstRank() const {
  const RankPlan *worst = &ranks.front();
  for (const RankPlan &r : ranks)
    if (r.memory.peakBytes > worst->memory.peakBytes)
      worst = &r;
  return *worst;
}

MicrobatchShape mlir::cleave::microbatchShape(ArrayRef<ModuleOp> stages) {
  for (ModuleOp m : stages)
    for (auto func : m.getOps<func::FuncOp>())
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (auto role = func.getArgAttrOfType<StringAttr>(i, "cleave.role"))
          if (role.getValue() == "tokens" || role.getValue() == "targets") {
            auto type = func.getArgumentTypes()[i].cast<RankedTensorType>();
            // A rank's part of the microbatch (cleave-split-token-reads).
            auto attr = func.getArgAttrOfType<IntegerAttr>(i, kReadPartsAttr);
            int64_t parts = attr ? attr.getInt() : 1;
            return {type.getDimSize(0) * parts, type.getDimSize(1), parts};
          }
  return {};
}

/// plan.json's "tensor_parallel": which parameters the tensor axis splits
/// (and along which dimension), which it leaves whole and why, and the
/// collectives over it per step with their bytes.
static llvm::json::Object tensorParallelJSON(const Plan &plan) {
  llvm::json::Array params, collectives;
  int64_t split = 0, whole = 0;
  double splitBytes = 0, wholeBytes = 0;
  std::vector<double> bytesByPipelineRank(plan.pipeline, 0);
  auto shape = [](const std::vector<int64_t> &dims) {
    llvm::json::Array a;
    for (int64_t d : dims)
      a.push_back(d);
    return a;
  };
  for (const StagePlan &st : plan.stages) {
    for (const TensorSplitPlan &t : st.tensorSplits) {
      llvm::json::Object o{{"stage", st.stage},
                           {"name", t.name},
                           {"full_shape", shape(t.fullShape)},
                           {"local_shape", shape(t.localShape)}};
      if (!t.paddedShape.empty())
        o["padded_shape"] = shape(t.paddedShape);
      if (t.replicatedWhy.empty()) {
        ++split;
        splitBytes += t.localBytes;
        llvm::json::Array dims;
        for (const auto &[dim, axis] : t.splitDims)
          dims.push_back(llvm::json::Object{{"dim", dim}, {"axis", axis}});
        o["split"] = std::move(dims);
        if (t.blocks > 1)
          o["blocks"] = t.blocks;
      } else {
        ++whole;
        wholeBytes += t.localBytes;
        o["split"] = llvm::json::Array();
        o["replicated_why"] = t.replicatedWhy;
      }
      params.push_back(std::move(o));
    }
    for (const TensorCollectivePlan &c : st.tensorCollectives) {
      int64_t runs = c.function == "optimizer" ? 1 : plan.microbatches;
      bytesByPipelineRank[st.pipelineRank] += c.bytes * double(runs);
      collectives.push_back(llvm::json::Object{
          {"stage", st.stage},
          {"function", c.function},
          {"op", c.op},
          {"kind", c.op == "sp_all_gather" || c.op == "all_gather"
                       ? "all_gather"
                   : c.op == "sp_reduce_scatter" ? "reduce_scatter"
                                                 : "all_reduce"},
          {"reduce", c.reduce},
          {"axis", "tensor"},
          {"per_run", c.count},
          {"runs_per_step", runs},
          {"per_step", c.count * runs},
          {"bytes_per_step", c.bytes * double(runs)}});
    }
  }
  llvm::json::Array byRank;
  for (double b : bytesByPipelineRank)
    byRank.push_back(b);
  return llvm::json::Object{
      {"axis", "tensor"},
      {"degree", plan.tensor},
      {"split_parameters", split},
      {"replicated_parameters", whole},
      {"split_parameter_bytes_per_rank", splitBytes},
      {"replicated_parameter_bytes_per_rank", wholeBytes},
      {"parameters", std::move(params)},
      {"collectives", std::move(collectives)},
      {"collective_bytes_per_step_by_pipeline_rank", std::move(byRank)}};
}

llvm::json::Value mlir::cleave::toJSON(const Plan &plan) {
  double step = plan.stepSeconds();
  llvm::json::Array axes;
  for (auto &[name, size] : plan.mesh)
    axes.push_back(llvm::json::Object{{"name", name}, {"size", size}});
  llvm::json::Array stages;
  for (const StagePlan &s : plan.stages)
    stages.push_back(llvm::json::Object{
        {"stage", s.stage},
        {"pipeline_rank", s.pipelineRank},
        {"first_node", s.firstNode},
        {"last_node", s.lastNode},
        {"ops", s.ops},
        {"parameters", s.parameters},
        {"parameter_bytes", s.parameterBytes},
        {"forward_seconds", s.forwardSeconds},
        {"backward_seconds", s.backwardSeconds},
        {"recompute_seconds", s.recomputeSeconds},
        {"host_copy_seconds", s.hostCopySeconds},
        {"shard_collective_seconds", s.shardCollectiveSeconds},
        {"forward_flops", s.forwardFlops},
        {"backward_flops", s.backwardFlops},
        {"optimizer_seconds", s.optimizerSeconds},
        {"optimizer_flops", s.optimizerFlops},
        {"all_reduce_bytes", s.allReduceBytes},
        {"sent_bytes", s.sentBytes},
        {"slots", s.slots},
        {"predicted_memory", memoryJSON(s.memory)},
        {"memory_timeline", timelineJSON(s)}});
  // Remat or offload: the peak the same stage would plan without them.
  for (auto [i, s] : llvm::enumerate(plan.stages))
    if (s.peakBytesWithoutRemat)
      (*stages[i].getAsObject())["peak_bytes_without_remat"] =
          s.peakBytesWithoutRemat;
  llvm::json::Array ranks;
  for (const RankPlan &r : plan.ranks) {
    llvm::json::Array held;
    for (int64_t st : r.stages)
      held.push_back(st);
    ranks.push_back(llvm::json::Object{
        {"rank", r.rank},
        {"data_rank", r.dataRank},
        {"pipeline_rank", r.pipelineRank},
        {"tensor_rank", r.tensorRank},
        {"stages", std::move(held)},
        {"first_sample", r.firstSample},
        {"predicted_memory", memoryJSON(r.memory)},
        {"predicted_memory_by_space",
         llvm::json::Object{{"device", r.memory.deviceBytes},
                            {"host", r.memory.hostBytes}}},
        {"predicted_live_peak_bytes",
         llvm::json::Object{{"device", r.memory.livePeakBytes},
                            {"host", r.memory.hostLivePeakBytes}}},
        {"predicted_activations_by_space",
         llvm::json::Object{{"device", r.memory.deviceActivations},
                            {"host", r.memory.hostActivations}}},
        {"predicted_step_seconds", step},
        {"predicted_step_breakdown",
         llvm::json::Object{{"pipeline_seconds", r.pipelineSeconds},
                            {"compute_seconds", r.computeSeconds},
                            {"all_reduce_seconds", r.allReduceSeconds},
                            {"optimizer_seconds", r.optimizerSeconds}}},
        {"bubble_fraction", r.idleFraction},
        {"flops", r.flops}});
  }
  llvm::json::Array spans;
  for (const pl::Span &span : plan.timeline)
    spans.push_back(
        llvm::json::Object{{"rank", span.rank},
                           {"kind", span.backward ? "backward" : "forward"},
                           {"stage", span.stage},
                           {"microbatch", span.microbatch},
                           {"start", span.start},
                           {"end", span.end}});
  llvm::json::Array notes;
  for (const PlanNote &note : plan.notes) {
    // The value is the spec's JSON text; kept as text if it is not JSON.
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(note.value);
    if (!value)
      llvm::consumeError(value.takeError());
    notes.push_back(llvm::json::Object{
        {"key", note.key},
        {"value", value ? std::move(*value) : llvm::json::Value(note.value)},
        {"why", note.why}});
  }
  llvm::json::Object result{
      {"model", plan.model},
      {"world_size", plan.worldSize()},
      {"mesh", llvm::json::Object{{"data", plan.data},
                                  {"pipeline", plan.pipeline},
                                  {"tensor", plan.tensor}}},
      {"mesh_axes", std::move(axes)},
      {"placement", plan.placement},
      {"batch", llvm::json::Object{{"global_batch", plan.globalBatch},
                                   {"microbatch_size", plan.microbatchSize},
                                   {"microbatches", plan.microbatches},
                                   {"seq_len", plan.seqLen}}},
      {"schedule",
       llvm::json::Object{
           {"kind", plan.schedule.kind},
           {"microbatches", plan.schedule.microbatches},
           {"virtual_stages", plan.schedule.virtualStages},
           {"active_microbatches", plan.schedule.activeMicrobatches},
           {"theoretical_bubble", plan.schedule.theoreticalBubble},
           {"predicted_bubble", plan.schedule.predictedBubble}}},
      {"link",
       llvm::json::Object{{"bytes_per_second", plan.linkBytesPerSecond},
                          {"latency_seconds", plan.linkLatencySeconds}}},
      {"predicted_step_seconds", step},
      {"flops_per_step", plan.flopsPerStep()},
      {"stages", std::move(stages)},
      {"ranks", std::move(ranks)},
      {"timeline", std::move(spans)},
      {"notes", std::move(notes)}};
  if (plan.tensor > 1)
    result["tensor_parallel"] = tensorParallelJSON(plan);
  return result;
}

PlanAnalysis::PlanAnalysis(Operation *op) : module(dyn_cast<ModuleOp>(op)) {}

FailureOr<const Plan *> PlanAnalysis::getPlan(const PlanLayout &layout) {
  if (plan && computedFor == layout)
    return &*plan;
  if (!module)
    return failure();
  Plan computed;
  if (failed(computePlan(module, layout, computed)))
    return failure();
  plan = std::move(computed);
  computedFor = layout;
  return &*plan;
}
