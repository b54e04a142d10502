//===- PipelinePartition.cpp - contiguous pipeline stages -----------------===//
//
// Splits the forward function into `stages` contiguous pieces, each moved
// into a nested module `@stage<k>` that holds the parameters it reads: the
// later passes (autodiff, optimizer, memory plan) run on each stage module
// as on a one-stage model, and the emitter wires the stages together. The
// cuts are chosen by dynamic programming over the places where the fewest
// activation bytes cross (between layers), minimizing the slowest stage
// (`optimize=speed`) or a mix of memory and time (`optimize=memory` with
// `memory-weight`), by the cost model; or given by ONNX node name.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/CostModel.h"
#include "passes/CutPoints.h"
#include "passes/Layout.h"
#include "passes/NodeName.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <limits>

namespace mlir::cleave {
#define GEN_PASS_DEF_PIPELINEPARTITION
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

std::string nodeName(Operation *op) { return onnxNodeName(op->getLoc()); }

/// Ops every stage makes for itself instead of receiving: storage names.
bool cloned(Operation *op) { return isa<ConstantOp, GetParamOp>(op); }

struct PipelinePartition
    : mlir::cleave::impl::PipelinePartitionBase<PipelinePartition> {
  using PipelinePartitionBase::PipelinePartitionBase;

  // The forward function's work, in order: ops that are not cloned.
  SmallVector<Operation *> work;
  // Per value defined by a work op: its def position and last use position
  // (work.size() when the function returns it).
  ValueSpans spans;

  void runOnOperation() override {
    if (failed(partition()))
      signalPassFailure();
  }

  LogicalResult partition() {
    ModuleOp module = getOperation();
    if (stages < 1)
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-partition: stages must be "
                "at least 1";
    if (stages == 1)
      return success();
    if (optimize != "speed" && optimize != "memory")
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-partition: optimize must "
                "be speed or memory, got '"
             << optimize << "'";
    func::FuncOp forward;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func->hasAttr("cleave.kind"))
        continue;
      if (forward)
        return func.emitError()
               << "cleave-pipeline-partition expects one "
                  "forward function, found @"
               << forward.getName() << " and @" << func.getName();
      forward = func;
    }
    if (!forward)
      return mlir::emitError(module.getLoc())
             << "cleave-pipeline-partition: no forward function to split";
    Block &body = forward.getBody().front();
    Operation *ret = body.getTerminator();
    for (Operation &op : body)
      if (&op != ret && !cloned(&op))
        work.push_back(&op);
    spans = valueSpans(work, ret->getOperands());

    FailureOr<SmallVector<int64_t>> cuts =
        splitPoints.empty() ? chooseCuts(forward) : namedCuts(forward);
    if (failed(cuts))
      return failure();
    return build(module, forward, *cuts);
  }

  /// The values crossing the cut before work[c], in order of definition.
  SmallVector<Value> crossingValues(int64_t c) {
    SmallVector<Value> values;
    for (auto &[v, span] : spans)
      if (span.first < c && span.second >= c)
        values.push_back(v);
    return values;
  }

  FailureOr<SmallVector<int64_t>> namedCuts(func::FuncOp forward) {
    if ((int64_t)splitPoints.size() != stages - 1)
      return mlir::emitError(forward.getLoc())
             << "partition_points names " << splitPoints.size()
             << " split point(s), but " << static_cast<int64_t>(stages)
             << " stages need " << static_cast<int64_t>(stages) - 1;
    SmallVector<int64_t> cuts;
    for (const std::string &name : splitPoints) {
      int64_t found = -1;
      for (auto [i, op] : llvm::enumerate(work))
        if (nodeName(op) == name) {
          found = i;
          break;
        }
      if (found < 0) {
        std::string some;
        for (int64_t i = 0; i < (int64_t)work.size() && i < 400; i += 40)
          some += (some.empty() ? "'" : ", '") + nodeName(work[i]) + "'";
        return mlir::emitError(forward.getLoc())
               << "partition_points: no ONNX node named '" << name
               << "' in the model (node names look like " << some << ")";
      }
      if (found == 0 || (!cuts.empty() && found <= cuts.back()))
        return mlir::emitError(forward.getLoc())
               << "partition_points: '" << name
               << "' does not come after the previous split point; give the "
                  "nodes where stages 1.."
               << static_cast<int64_t>(stages) - 1 << " begin, in model order";
      cuts.push_back(found);
    }
    return cuts;
  }

  FailureOr<SmallVector<int64_t>> chooseCuts(func::FuncOp forward) {
    int64_t n = work.size();
    FailureOr<Rates> rates = loadRates(forward);
    if (failed(rates))
      return failure();
    SmallVector<int64_t> crossing = crossingBytes(spans, n, /*asFp32=*/false);
    // Places between layers: where the fewest bytes cross (the residual
    // stream of a transformer, once per half block), counted as if in fp32.
    SmallVector<int64_t> between = crossingBytes(spans, n, /*asFp32=*/true);
    skipCutsInsideNodes(work, between);
    // No stage without a parameter: no place before the first op that
    // reads one, nor after the last (the loss). The head's logits, split
    // over the vocabulary by tensor parallelism, can be fewer bytes than
    // the residual stream and would otherwise be the one least place.
    int64_t firstRead = n, lastRead = -1;
    for (auto [i, op] : llvm::enumerate(work))
      if (!isa<CastOp>(op) && llvm::any_of(op->getOperands(), [](Value v) {
            while (auto cast = v.getDefiningOp<CastOp>())
              v = cast->getOperand(0);
            return v.getDefiningOp<GetParamOp>() != nullptr;
          })) {
        firstRead = std::min<int64_t>(firstRead, i);
        lastRead = std::max<int64_t>(lastRead, i);
      }
    for (int64_t c = 1; c < n; ++c)
      if (c <= firstRead || c > lastRead)
        between[c] = 0;
    SmallVector<int64_t> places = leastCrossingPlaces(between);
    if ((int64_t)places.size() < stages - 1)
      return mlir::emitError(forward.getLoc())
             << static_cast<int64_t>(stages)
             << " pipeline stages (pipeline_parallel_degree x "
                "virtual_pipeline_degree) need "
             << static_cast<int64_t>(stages) - 1
             << " places to cut between layers, but the model has "
             << places.size() << " (it has " << places.size() + 1
             << " pieces to place); use at most " << places.size() + 1
             << " stages";

    // Prefix sums of time; memory per piece is computed directly.
    //
    // With activation checkpointing (cleave-remat, after autodiff) what it
    // will recompute runs forward twice: the layers, between the first and
    // the last place (`each`, `group_<k>`, `contiguous`), or the attention
    // cores (`selective`).
    SmallVector<bool> again(n, false);
    if (recompute && !places.empty())
      for (int64_t i = places.front(); i < places.back(); ++i)
        again[i] = true;
    if (recomputeAttention)
      for (auto [begin, end] : attentionCores(work))
        for (int64_t i = begin; i < end; ++i)
          again[i] = true;
    // With activation offload (cleave-offload-activations, after remat)
    // each checkpoint, the input of a segment of `offloadEvery` layers, is
    // copied to host memory after the forward and back before the
    // backward: its bytes twice at the host link, in the layer's stage.
    SmallVector<double> copies(n, 0.0);
    if (offloadEvery > 0 && rates->hostBytesPerSecond > 0) {
      SmallVector<int64_t> layerBounds = {0};
      layerBounds.append(places.begin(), places.end());
      layerBounds.push_back(n);
      SmallVector<std::pair<int64_t, int64_t>> layers =
          layersBetweenPlaces(work, layerBounds);
      for (size_t l = 0; l < layers.size(); l += offloadEvery) {
        int64_t at = layers[l].first;
        copies[at] += 2.0 * double(crossing[at]) / rates->hostBytesPerSecond;
      }
    }
    SmallVector<double> time(n + 1, 0.0);
    for (int64_t i = 0; i < n; ++i)
      time[i + 1] = time[i] + copies[i] +
                    seconds(estimateCost(work[i]), *rates) *
                        (1 + kBackwardFactor + (again[i] ? 1 : 0));
    SmallVector<int64_t> bounds = {0};
    bounds.append(places.begin(), places.end());
    bounds.push_back(n);
    int64_t k = bounds.size();
    double totalTime = time[n];
    double totalMemory = std::max<double>(1.0, segmentMemory(0, n));
    auto cost = [&](int64_t a, int64_t b) {
      int64_t from = bounds[a], to = bounds[b];
      double t = time[to] - time[from] +
                 transferSeconds(double(crossing[to < n ? to : 0]), *rates);
      if (optimize == "speed")
        return t;
      double m = segmentMemory(from, to);
      return memoryWeight * m / totalMemory +
             (1 - memoryWeight) * t / std::max(totalTime, 1e-30);
    };
    // best[s][j]: the least slowest-stage cost placing bounds[0..j) in s
    // stages.
    const double inf = std::numeric_limits<double>::infinity();
    int64_t s = stages;
    std::vector<std::vector<double>> best(s + 1, std::vector<double>(k, inf));
    std::vector<std::vector<int64_t>> from(s + 1, std::vector<int64_t>(k, -1));
    best[0][0] = 0;
    for (int64_t st = 1; st <= s; ++st)
      for (int64_t j = 1; j < k; ++j)
        for (int64_t i = st - 1; i < j; ++i) {
          if (best[st - 1][i] == inf)
            continue;
          double v = std::max(best[st - 1][i], cost(i, j));
          if (v < best[st][j]) {
            best[st][j] = v;
            from[st][j] = i;
          }
        }
    SmallVector<int64_t> cuts;
    for (int64_t st = s, j = k - 1; st > 1; --st) {
      j = from[st][j];
      cuts.push_back(bounds[j]);
    }
    std::reverse(cuts.begin(), cuts.end());
    return cuts;
  }

  /// Memory a stage of work[from, to) holds: parameters with their
  /// gradients and AdamW state (4 copies), and the activations it makes.
  double segmentMemory(int64_t from, int64_t to) {
    llvm::StringSet<> params;
    double bytes = 0;
    for (int64_t i = from; i < to; ++i) {
      for (Value v : work[i]->getOperands())
        if (auto get = v.getDefiningOp<GetParamOp>())
          if (params.insert(get.getName()).second)
            bytes += 4.0 * tensorBytes(get.getType());
      for (Value r : work[i]->getResults())
        if (auto t = r.getType().dyn_cast<RankedTensorType>())
          bytes += tensorBytes(t);
    }
    return bytes;
  }

  FailureOr<Rates> loadRates(func::FuncOp forward) {
    llvm::Expected<Rates> rates =
        ratesFile.empty() ? defaultRates(backend) : readRates(ratesFile);
    if (!rates) {
      mlir::emitError(forward.getLoc()) << llvm::toString(rates.takeError());
      return failure();
    }
    return *rates;
  }

  /// Moves work[cuts[k-1], cuts[k]) into module @stage<k>.
  LogicalResult build(ModuleOp module, func::FuncOp forward,
                      ArrayRef<int64_t> cuts) {
    MLIRContext *ctx = module.getContext();
    int64_t n = work.size();
    SmallVector<int64_t> bounds = {0};
    bounds.append(cuts.begin(), cuts.end());
    bounds.push_back(n);
    int64_t s = stages;
    Block &body = forward.getBody().front();
    Operation *ret = body.getTerminator();
    SymbolTable symbols(module);

    // Which stages read each parameter.
    llvm::StringMap<SmallVector<int64_t>> readers;
    auto stageOf = [&](int64_t pos) {
      return int64_t(std::upper_bound(bounds.begin(), bounds.end(), pos) -
                     bounds.begin()) -
             1;
    };
    for (int64_t i = 0; i < n; ++i)
      for (Value v : work[i]->getOperands())
        if (auto get = v.getDefiningOp<GetParamOp>()) {
          auto &list = readers[get.getName()];
          if (list.empty() || list.back() != stageOf(i))
            list.push_back(stageOf(i));
        }

    OpBuilder top = OpBuilder::atBlockEnd(module.getBody());
    for (int64_t k = 0; k < s; ++k) {
      int64_t from = bounds[k], to = bounds[k + 1];
      auto stage =
          top.create<ModuleOp>(forward.getLoc(), ("stage" + std::to_string(k)));
      for (NamedAttribute attr : module->getAttrs())
        if (attr.getName().getValue().startswith("cleave."))
          stage->setAttr(attr.getName(), attr.getValue());
      stage->setAttr("cleave.stage", top.getI64IntegerAttr(k));
      stage->setAttr("cleave.stages", top.getI64IntegerAttr(s));
      OpBuilder b = OpBuilder::atBlockEnd(stage.getBody());

      // Parameters this stage reads.
      llvm::StringSet<> held;
      for (int64_t i = from; i < to; ++i)
        for (Value v : work[i]->getOperands())
          if (auto get = v.getDefiningOp<GetParamOp>())
            if (held.insert(get.getName()).second) {
              auto param = symbols.lookup<ParameterOp>(get.getName());
              auto copy = cast<ParameterOp>(b.clone(*param));
              auto &list = readers[get.getName()];
              if (list.size() > 1)
                copy->setAttr("cleave.tied_stages", b.getI64ArrayAttr(list));
            }

      // Arguments: the activations received, then the model inputs read.
      SmallVector<Value> received = crossingValues(from);
      if (k == 0)
        received.clear();
      SmallVector<Value> sent;
      if (k + 1 < s)
        sent = crossingValues(to);
      auto func = b.create<func::FuncOp>(forward.getLoc(), forward.getName(),
                                         FunctionType::get(ctx, {}, {}));
      Block *entry = func.addEntryBlock();
      IRMapping map;
      SmallVector<DictionaryAttr> argAttrs;
      auto boundaryAttrs = [&](Value v, int64_t index) {
        NamedAttrList list;
        list.append("cleave.boundary", b.getI64IntegerAttr(index));
        if (v.getType()
                .cast<RankedTensorType>()
                .getElementType()
                .isa<FloatType>())
          list.append("cleave.differentiable", UnitAttr::get(ctx));
        return list.getDictionary(ctx);
      };
      for (auto [i, v] : llvm::enumerate(received)) {
        map.map(v, entry->addArgument(v.getType(), v.getLoc()));
        argAttrs.push_back(boundaryAttrs(v, i));
      }
      OpBuilder fb = OpBuilder::atBlockEnd(entry);
      auto operandOf = [&](Value v) -> Value {
        if (Value mapped = map.lookupOrNull(v))
          return mapped;
        if (auto arg = v.dyn_cast<BlockArgument>()) {
          Value a = entry->addArgument(v.getType(), v.getLoc());
          // Its attributes, cleave.role (cleave-input-roles) included.
          NamedAttrList attrs(forward.getArgAttrDict(arg.getArgNumber()));
          argAttrs.push_back(attrs.getDictionary(ctx));
          map.map(v, a);
          return a;
        }
        Operation *def = v.getDefiningOp();
        if (def && cloned(def)) {
          OpBuilder::InsertionGuard guard(fb);
          fb.setInsertionPointToStart(entry);
          Operation *copy = fb.clone(*def);
          map.map(def->getResults(), copy->getResults());
          return map.lookup(v);
        }
        return Value(); // defined in another stage: a bug in the cut
      };
      for (int64_t i = from; i < to; ++i) {
        Operation *op = work[i];
        for (Value v : op->getOperands())
          if (!operandOf(v))
            return op->emitError() << "cleave-pipeline-partition: operand "
                                      "from another stage was not received";
        fb.clone(*op, map);
      }
      SmallVector<Value> results;
      SmallVector<DictionaryAttr> resultAttrs;
      if (k + 1 < s) {
        for (auto [i, v] : llvm::enumerate(sent)) {
          Value mapped = operandOf(v);
          if (!mapped)
            return mlir::emitError(forward.getLoc())
                   << "cleave-pipeline-partition: a "
                      "value sent on was never received";
          results.push_back(mapped);
          resultAttrs.push_back(boundaryAttrs(v, i));
        }
      } else {
        for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
          Value mapped = operandOf(v);
          if (!mapped)
            return ret->emitError() << "cleave-pipeline-partition: a result "
                                       "is not computed in the last stage";
          results.push_back(mapped);
          DictionaryAttr attrs = forward.getResultAttrDict(i);
          resultAttrs.push_back(attrs ? attrs : DictionaryAttr::get(ctx));
        }
      }
      fb.create<func::ReturnOp>(ret->getLoc(), results);
      func.setType(FunctionType::get(ctx, entry->getArgumentTypes(),
                                     ValueRange(results).getTypes()));
      func.setAllArgAttrs(argAttrs);
      func.setAllResultAttrs(resultAttrs);
      func->setAttr("cleave.first_node",
                    b.getStringAttr(from < to ? nodeName(work[from]) : ""));
      func->setAttr("cleave.last_node",
                    b.getStringAttr(from < to ? nodeName(work[to - 1]) : ""));
    }
    // The stages hold everything now.
    forward.erase();
    for (auto param : llvm::to_vector(module.getOps<ParameterOp>()))
      param.erase();
    return success();
  }
};

} // namespace
