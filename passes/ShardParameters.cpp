//===- ShardParameters.cpp - ZeRO-3: parameters kept as chunks -----------===//
//
// Sharded data parallelism on top of cleave-shard-optimizer-state (Passes.td,
// ShardParameters): a parameter whose gradient and state are already split
// over `cleave.state_axis` also keeps only its chunk of the parameter, and
// the functions that read it all-gather the whole into a transient value
// just before the op that reads it first. The chunks are stateShards'
// (ir/DistributionOps.h): the update writes exactly the chunk this rank
// keeps, so nothing is gathered after it.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SHARDPARAMETERS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct ShardParameters
    : mlir::cleave::impl::ShardParametersBase<ShardParameters> {
  using ShardParametersBase::ShardParametersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (threshold < 0) {
      module.emitError() << "cleave-shard-parameters: threshold must not be "
                            "negative, got "
                         << static_cast<int64_t>(threshold);
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    llvm::StringSet<> sharded;
    for (auto param : module.getOps<ParameterOp>()) {
      std::optional<StateShards> shards = stateShards(param);
      if (!shards || shards->elements < threshold)
        continue;
      param->setAttr(kParamAxisAttr, b.getStringAttr(shards->axis));
      sharded.insert(param.getSymName());
    }
    if (sharded.empty())
      return;
    if (processesPerHost < 0) {
      module.emitError() << "cleave-shard-parameters: processes-per-host "
                            "must not be negative, got "
                         << static_cast<int64_t>(processesPerHost);
      return signalPassFailure();
    }

    for (auto func : module.getOps<func::FuncOp>()) {
      auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
      if (func.isExternal())
        continue;
      if (kind && kind.getValue() == "optimizer") {
        dropGathers(func, sharded);
        continue;
      }
      SmallVector<AccumulateGradOp> accumulations;
      func.walk([&](AccumulateGradOp acc) {
        if (sharded.contains(acc.getName()))
          accumulations.push_back(acc);
      });
      for (AccumulateGradOp acc : accumulations)
        scatterGradient(acc, module);
      SmallVector<GetParamOp> reads;
      func.walk([&](GetParamOp get) {
        if (sharded.contains(get.getName()))
          reads.push_back(get);
      });
      for (GetParamOp get : reads) {
        // Gathered just before each op that reads it, so that the whole
        // parameter takes space only while it is read: a tied embedding
        // read first and last in the forward is gathered twice rather than
        // held through every layer between.
        llvm::SetVector<Operation *> readers;
        for (Operation *user : get->getUsers())
          if (Operation *inBlock =
                  get->getBlock()->findAncestorOpInBlock(*user))
            readers.insert(inBlock);
        for (Operation *reader : readers) {
          b.setInsertionPoint(reader);
          auto gather = b.create<GatherParamOp>(
              get.getLoc(), get.getType(), get.getNameAttr(), IntegerAttr());
          ParameterOp param = lookupParameter(gather, get.getNameAttr());
          if (int64_t k = param ? perHost(module, *stateShards(param)) : 0)
            gather->setAttr(kGatherPerHostAttr, b.getI64IntegerAttr(k));
          get.getResult().replaceUsesWithIf(
              gather.getResult(), [&](OpOperand &use) {
                return get->getBlock()->findAncestorOpInBlock(
                           *use.getOwner()) == reader;
              });
        }
        get.erase();
      }
    }
  }

  /// The ranks of a sharding group on each host when every group of
  /// `shards.axis` spans several hosts with as many consecutive
  /// coordinates on each, else 0 (gather flat).
  int64_t perHost(ModuleOp module, const StateShards &shards) {
    Operation *top = module;
    while (top->getParentOp())
      top = top->getParentOp();
    auto mesh = top->getAttrOfType<MeshAttr>(kMeshAttr);
    std::optional<int64_t> size =
        mesh ? mesh.getAxisSize(shards.axis) : std::nullopt;
    if (processesPerHost <= 0 || !size || *size < 2)
      return 0;
    int64_t k = 0;
    for (int64_t rank = 0; rank < mesh.getNumRanks(); ++rank) {
      auto host = [&](int64_t c) {
        return mesh.withCoordinate(rank, shards.axis, c) / processesPerHost;
      };
      int64_t run = 1; // coordinates from 0 on the first one's host
      while (run < *size && host(run) == host(0))
        ++run;
      if (k && run != k)
        return 0;
      k = run;
      for (int64_t c = 0; c < *size; ++c)
        if (host(c) != host(c - c % k) ||
            (c % k == 0 && c > 0 && host(c) == host(c - k)))
          return 0;
    }
    return k > 1 && k < *size && *size % k == 0 ? k : 0;
  }

  /// A microbatch's gradient of a sharded parameter, reduce-scattered
  /// within the group at once and added to this rank's chunk of the
  /// gradient: the whole gradient lives only from the op that makes it to
  /// here. Flattened and padded with zeros to whole chunks first.
  static void scatterGradient(AccumulateGradOp acc, ModuleOp module) {
    ParameterOp param = lookupParameter(acc, acc.getNameAttr());
    StateShards shards = *stateShards(param);
    OpBuilder b(acc);
    Location loc = acc.getLoc();
    auto type = acc.getGrad().getType().cast<RankedTensorType>();
    Type element = type.getElementType();
    Value flat = b.create<ReshapeOp>(
        loc, RankedTensorType::get({shards.elements}, element), acc.getGrad());
    if (int64_t padding = shards.padded() - shards.elements) {
      auto zerosType = RankedTensorType::get({padding}, element);
      Value zeros = b.create<ConstantOp>(
          loc, zerosType,
          DenseElementsAttr::get(zerosType, b.getZeroAttr(element)));
      flat = b.create<ConcatOp>(
          loc, RankedTensorType::get({shards.padded()}, element),
          ValueRange{flat, zeros}, b.getI64IntegerAttr(0));
    }
    Value chunk = b.create<ReduceScatterOp>(
        loc, chunkType(param, shards), flat,
        b.getStrArrayAttr({shards.axis}), b.getI64IntegerAttr(0),
        b.getStringAttr("mean"));
    acc.getGradMutable().assign(chunk);
  }

  /// The optimizer's all-gathers of updated chunks leave out the sharded
  /// parameters (the chunk each rank updated is all it keeps), and so do
  /// its reduce-scatters (each backward scattered its gradients).
  static void dropGathers(func::FuncOp optimizer,
                          const llvm::StringSet<> &sharded) {
    SmallVector<Operation *> buckets;
    optimizer.walk([&](Operation *op) {
      if (isa<AllGatherParamsOp, ReduceScatterGradsOp>(op))
        buckets.push_back(op);
    });
    for (Operation *op : buckets) {
      auto params = op->getAttrOfType<ArrayAttr>("params");
      SmallVector<Attribute> kept;
      for (Attribute name : params)
        if (!sharded.contains(name.cast<FlatSymbolRefAttr>().getValue()))
          kept.push_back(name);
      if (kept.empty()) {
        op->erase();
        continue;
      }
      op->setAttr("params", ArrayAttr::get(op->getContext(), kept));
    }
  }
};

} // namespace
