//===- PlaceRanks.cpp - the device mesh from the parallel degrees ---------===//
//
// The one place rank placement is decided: the degrees of data, pipeline
// and tensor parallelism become the module's `cleave.mesh`, its axes in
// the order of the placement strategy (the first slowest in the rank
// number). Every later pass and the emitter read ranks and groups off it.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include <algorithm>

namespace mlir::cleave {
#define GEN_PASS_DEF_PLACERANKS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct PlaceRanks : mlir::cleave::impl::PlaceRanksBase<PlaceRanks> {
  using PlaceRanksBase::PlaceRanksBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string order = placement == "cluster"  ? "DPT"
                        : placement == "spread" ? "TPD"
                                                : std::string(placement);
    std::string sorted = order;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != "DPT") {
      module.emitError() << "placement must be cluster, spread or an order of "
                            "D, P and T, got '"
                         << placement << "'";
      return signalPassFailure();
    }
    if (data < 1 || pipeline < 1 || tensor < 1) {
      module.emitError() << "cleave-place-ranks: every degree must be at "
                            "least 1 (data "
                         << static_cast<int64_t>(data) << ", pipeline "
                         << static_cast<int64_t>(pipeline) << ", tensor "
                         << static_cast<int64_t>(tensor) << ")";
      return signalPassFailure();
    }
    if (shardedData < 1 || data % shardedData != 0) {
      module.emitError() << "cleave-place-ranks: sharded-data must divide "
                            "the data degree "
                         << static_cast<int64_t>(data) << ", got "
                         << static_cast<int64_t>(shardedData);
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    SmallVector<StringAttr> names;
    SmallVector<int64_t> sizes;
    for (char axis : order) {
      if (axis == 'D' && shardedData > 1 && shardedData < data) {
        // MiCS: groups of consecutive data ranks (the faster half).
        names.push_back(StringAttr::get(ctx, kDataReplicaAxis));
        sizes.push_back(data / shardedData);
        names.push_back(StringAttr::get(ctx, kShardedDataAxis));
        sizes.push_back(shardedData);
        continue;
      }
      names.push_back(StringAttr::get(
          ctx, axis == 'D' ? kDataAxis : axis == 'P' ? kPipelineAxis
                                                     : kTensorAxis));
      sizes.push_back(axis == 'D' ? data : axis == 'P' ? pipeline : tensor);
    }
    module->setAttr(kMeshAttr, MeshAttr::get(ctx, names, sizes));
  }
};

} // namespace
