//===- VerifyPartitioned.cpp - the contract after pipeline partitioning ---===//
//
// The phase boundary between partitioning and the per-stage passes (as
// IREE's Stream verify passes): checks that every op is in exactly one
// stage module and that values cross stages only through the stages'
// `cleave.boundary` arguments and results, so autodiff, the optimizer and
// the emitter can rely on the shape of a partitioned module.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_VERIFYPARTITIONED
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct Stage {
  ModuleOp module;
  func::FuncOp forward;
};

/// The values a stage function sends or receives through the stage
/// interface, in boundary order; failure (reported) when the indices are
/// not 0, 1, ... in order.
template <typename GetAttr>
FailureOr<SmallVector<Type>> boundaryTypes(func::FuncOp func, TypeRange types,
                                           GetAttr attrOf, StringRef what) {
  SmallVector<Type> boundary;
  for (auto [i, type] : llvm::enumerate(types)) {
    auto index = attrOf(i);
    if (!index)
      continue;
    if (index.getInt() != int64_t(boundary.size())) {
      func.emitError() << "cleave-verify-partitioned: " << what << " " << i
                       << " is boundary value " << index.getInt()
                       << ", expected " << boundary.size()
                       << " (boundary values are numbered in order)";
      return failure();
    }
    boundary.push_back(type);
  }
  return boundary;
}

std::string stageList(ArrayRef<int64_t> stages) {
  return llvm::join(llvm::map_range(stages,
                                    [](int64_t s) { return std::to_string(s); }),
                    ", ");
}

struct VerifyPartitioned
    : mlir::cleave::impl::VerifyPartitionedBase<VerifyPartitioned> {
  void runOnOperation() override {
    if (failed(verify(getOperation())))
      signalPassFailure();
  }

  LogicalResult verify(ModuleOp top) {
    SmallVector<Stage> stages;
    bool partitioned = llvm::any_of(top.getOps<ModuleOp>(), [](ModuleOp m) {
      return m->hasAttr(kStageAttr);
    });
    if (!partitioned)
      return success();

    // Every op belongs to a stage: nothing else is left at the top.
    for (Operation &op : top.getBody()->getOperations()) {
      auto module = dyn_cast<ModuleOp>(op);
      auto stage =
          module ? module->getAttrOfType<IntegerAttr>(kStageAttr) : nullptr;
      if (!stage)
        return op.emitError()
               << "cleave-verify-partitioned: '" << op.getName()
               << "' is outside every stage module; after partitioning the "
                  "top-level module holds only module @stage<k>";
      stages.push_back({module, {}});
    }
    int64_t n = stages.size();
    for (auto [k, stage] : llvm::enumerate(stages)) {
      ModuleOp module = stage.module;
      int64_t index = module->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
      if (index != int64_t(k))
        return module.emitError()
               << "cleave-verify-partitioned: stage module " << k
               << " in order has cleave.stage = " << index
               << "; stages are 0.." << n - 1 << " once each, in order";
      auto count = module->getAttrOfType<IntegerAttr>(kStagesAttr);
      if (!count || count.getInt() != n)
        return module.emitError()
               << "cleave-verify-partitioned: stage " << k
               << " needs cleave.stages = " << n << ", the number of stage "
               << "modules";
      for (auto func : module.getOps<func::FuncOp>()) {
        auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
        if (kind && kind.getValue() != "forward")
          continue;
        if (stage.forward)
          return func.emitError()
                 << "cleave-verify-partitioned: stage " << k
                 << " has two forward functions, @"
                 << stage.forward.getName() << " and @" << func.getName();
        stage.forward = func;
      }
      if (!stage.forward)
        return module.emitError() << "cleave-verify-partitioned: stage " << k
                                  << " has no forward function";
    }
    if (failed(verifyBoundaries(stages)) || failed(verifyTied(stages)))
      return failure();
    if (auto mesh = top->getAttrOfType<MeshAttr>(kMeshAttr))
      if (std::optional<int64_t> ranks = mesh.getAxisSize(kPipelineAxis))
        if (n % *ranks != 0)
          return top.emitError()
                 << "cleave-verify-partitioned: " << n
                 << " stages do not place evenly on the " << *ranks
                 << " ranks of mesh axis \"pipeline\"";
    return success();
  }

  /// Stage k's boundary results are stage k+1's boundary arguments.
  LogicalResult verifyBoundaries(ArrayRef<Stage> stages) {
    SmallVector<Type> sent;
    for (auto [k, stage] : llvm::enumerate(stages)) {
      func::FuncOp f = stage.forward;
      auto received = boundaryTypes(
          f, f.getArgumentTypes(),
          [&](unsigned i) { return f.getArgAttrOfType<IntegerAttr>(i, kBoundaryAttr); },
          "argument");
      if (failed(received))
        return failure();
      if (k == 0 && !received->empty())
        return f.emitError() << "cleave-verify-partitioned: the first stage "
                                "receives nothing from another stage, it has "
                             << received->size() << " boundary arguments";
      if (k > 0) {
        if (received->size() != sent.size())
          return f.emitError()
                 << "cleave-verify-partitioned: stage " << k << " receives "
                 << received->size() << " boundary values, stage " << k - 1
                 << " sends " << sent.size();
        for (auto [i, types] : llvm::enumerate(llvm::zip(*received, sent)))
          if (std::get<0>(types) != std::get<1>(types))
            return f.emitError()
                   << "cleave-verify-partitioned: stage " << k << " receives "
                   << std::get<0>(types) << " as boundary value " << i
                   << ", but stage " << k - 1 << " sends "
                   << std::get<1>(types);
      }
      auto sends = boundaryTypes(
          f, f.getResultTypes(),
          [&](unsigned i) { return f.getResultAttrOfType<IntegerAttr>(i, kBoundaryAttr); },
          "result");
      if (failed(sends))
        return failure();
      if (k + 1 == stages.size() && !sends->empty())
        return f.emitError() << "cleave-verify-partitioned: the last stage "
                                "sends nothing on, it has "
                             << sends->size() << " boundary results";
      sent = std::move(*sends);
    }
    return success();
  }

  /// A parameter held by several stages is marked as tied by each, with
  /// exactly the stages holding it.
  LogicalResult verifyTied(ArrayRef<Stage> stages) {
    llvm::StringMap<SmallVector<int64_t>> holders;
    for (auto [k, stage] : llvm::enumerate(stages))
      for (auto param : ModuleOp(stage.module).getOps<ParameterOp>())
        holders[param.getSymName()].push_back(k);
    for (auto [k, stage] : llvm::enumerate(stages))
      for (auto param : ModuleOp(stage.module).getOps<ParameterOp>()) {
        ArrayRef<int64_t> held = holders[param.getSymName()];
        auto tied = param->getAttrOfType<ArrayAttr>(kTiedStagesAttr);
        SmallVector<int64_t> marked;
        if (tied)
          for (Attribute a : tied)
            marked.push_back(a.cast<IntegerAttr>().getInt());
        bool ok = held.size() == 1 ? !tied : ArrayRef<int64_t>(marked) == held;
        if (!ok)
          return param.emitError()
                 << "cleave-verify-partitioned: parameter @"
                 << param.getSymName() << " is held by stages ["
                 << stageList(held) << "] but its cleave.tied_stages in stage "
                 << k << " is [" << stageList(marked)
                 << "]; a tied parameter lists every stage holding it, an "
                    "untied one has none";
      }
    return success();
  }
};

} // namespace
