//===- Optimizer.cpp - the optimizer step as a function -------------------===//
//
// Adds `@optimizer(%step)`: for every parameter that receives a gradient
// (has a `cleave.accumulate_grad`), one `cleave.adamw` or `cleave.sgd` on
// its accumulated gradient; with gradient clipping, first the global sum of
// squares of all of them. Weight decay is given only to parameters of two
// or more dimensions (DESIGN.md, "Training semantics").
//
// In a pipeline stage (a module with `cleave.stage`), a parameter that
// other stages also hold (`cleave.tied_stages`) first sums its gradient
// with theirs, and the clipping norm is summed over the stages (counting a
// tied parameter once, in its first stage) so every stage clips by the
// norm of the whole model's gradient.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct Optimizer : mlir::cleave::impl::OptimizerBase<Optimizer> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (type != "adamw" && type != "sgd") {
      module.emitError() << "cleave-optimizer: type must be adamw or sgd, got '"
                         << type << "'";
      return signalPassFailure();
    }
    if (lr < 0 || weightDecay < 0 || gradClip < 0 || momentum < 0 ||
        warmupSteps < 0 || decaySteps < 0 || minLr < 0) {
      module.emitError() << "cleave-optimizer: lr, weight-decay, grad-clip, "
                            "momentum, warmup-steps, decay-steps and min-lr "
                            "must be non-negative";
      return signalPassFailure();
    }
    // Parameters with gradients, in the order they are declared.
    llvm::SetVector<StringRef> trained;
    module.walk([&](AccumulateGradOp op) { trained.insert(op.getName()); });
    auto stageAttr = module->getAttrOfType<IntegerAttr>("cleave.stage");
    auto stagesAttr = module->getAttrOfType<IntegerAttr>("cleave.stages");
    bool pipelined = stageAttr && stagesAttr && stagesAttr.getInt() > 1;
    // A stage without trained parameters still takes part in the norm's sum.
    if (trained.empty() && !(pipelined && gradClip > 0))
      return; // nothing to train
    MLIRContext *ctx = module.getContext();
    SymbolTable symbols(module);
    SmallVector<ParameterOp> params;
    for (auto param : module.getOps<ParameterOp>())
      if (trained.contains(param.getSymName()))
        params.push_back(param);

    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    auto stepType = RankedTensorType::get({}, b.getI64Type());
    auto func = b.create<func::FuncOp>(
        loc, "optimizer", FunctionType::get(ctx, {stepType}, {}));
    symbols.insert(func);
    func->setAttr("cleave.kind", b.getStringAttr("optimizer"));
    func.setArgAttr(0, "cleave.role", b.getStringAttr("step"));
    Block *body = func.addEntryBlock();
    b.setInsertionPointToEnd(body);
    Value step = body->getArgument(0);

    SmallVector<Value> grads;
    for (ParameterOp param : params)
      grads.push_back(b.create<GetGradOp>(param.getLoc(), param.getType(),
                                          param.getSymName()));
    // Tied parameters: one sum per set of stages that share parameters.
    llvm::MapVector<Attribute, SmallVector<Attribute>> tiedSets;
    auto firstStage = [&](ParameterOp param) -> int64_t {
      auto tied = param->getAttrOfType<ArrayAttr>("cleave.tied_stages");
      return tied && !tied.empty() ? tied[0].cast<IntegerAttr>().getInt()
                                   : (stageAttr ? stageAttr.getInt() : 0);
    };
    for (ParameterOp param : params)
      if (auto tied = param->getAttrOfType<ArrayAttr>("cleave.tied_stages"))
        if (pipelined && tied.size() > 1)
          tiedSets[tied].push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    // The group of a tied set: the pipeline ranks holding its stages, as
    // coordinates of the mesh's pipeline axis (stage k runs on pipeline
    // rank k mod the axis' size; without a mesh, one stage per rank).
    MeshAttr mesh = lookupMesh(module);
    std::optional<int64_t> pipelineRanks =
        mesh ? mesh.getAxisSize("pipeline") : std::nullopt;
    int64_t ranks = pipelineRanks ? *pipelineRanks
                                  : (stagesAttr ? stagesAttr.getInt() : 1);
    for (auto &[stages, names] : tiedSets) {
      SmallVector<int64_t> members;
      DenseMap<int64_t, int64_t> stageOnRank;
      for (Attribute s : stages.cast<ArrayAttr>()) {
        int64_t stage = s.cast<IntegerAttr>().getInt();
        int64_t rank = stage % ranks;
        if (auto [it, fresh] = stageOnRank.try_emplace(rank, stage); !fresh) {
          module.emitError()
              << "parameter " << names.front() << " is held by stages "
              << it->second << " and " << stage << ", which run on the same "
              << "pipeline rank " << rank << "; choose other partition "
              << "points or another virtual_pipeline_degree";
          return signalPassFailure();
        }
        members.push_back(rank);
      }
      b.create<AllReduceGradsOp>(loc, b.getArrayAttr(names),
                                 b.getStringAttr("pipeline"),
                                 b.getStringAttr("sum"),
                                 b.getDenseI64ArrayAttr(members));
    }

    Value sumSquares;
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    if (gradClip > 0) {
      SmallVector<Value> counted, split;
      // Tensor parallelism: a split parameter's slices are summed over
      // the tensor ranks; a replicated one, the same on every tensor
      // rank, is counted once. A slice held by several ranks (a key/value
      // head replicated over a sub-axis, more tensor ranks than key/value
      // heads) is summed once per holder: scaled by 1/holders first.
      int64_t tensorRanks =
          mesh ? mesh.getAxisSize(kTensorAxis).value_or(1) : 1;
      bool tensor = tensorRanks > 1;
      llvm::MapVector<int64_t, SmallVector<Value>> replicatedSlices;
      for (auto [param, grad] : llvm::zip(params, grads)) {
        if (pipelined && firstStage(param) != stageAttr.getInt())
          continue;
        if (!tensor || !param->hasAttr(kFullTypeAttr)) {
          counted.push_back(grad);
          continue;
        }
        auto full = param->getAttrOfType<TypeAttr>(kFullTypeAttr)
                        .getValue()
                        .cast<RankedTensorType>();
        int64_t pieces = full.getNumElements() /
                         param.getType().cast<RankedTensorType>()
                             .getNumElements();
        if (pieces >= tensorRanks)
          split.push_back(grad);
        else
          replicatedSlices[tensorRanks / pieces].push_back(grad);
      }
      sumSquares =
          counted.empty()
              ? b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                              scalar, b.getF32FloatAttr(0)))
                    .getResult()
              : b.create<SumSquaresOp>(loc, scalar, counted).getResult();
      if (!split.empty() || !replicatedSlices.empty()) {
        Value slices =
            split.empty()
                ? b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                                scalar, b.getF32FloatAttr(0)))
                      .getResult()
                : b.create<SumSquaresOp>(loc, scalar, split).getResult();
        for (auto &[holders, grads] : replicatedSlices) {
          Value once = b.create<MulOp>(
              loc, b.create<SumSquaresOp>(loc, scalar, grads),
              b.create<ConstantOp>(
                  loc, DenseElementsAttr::get(
                           scalar, b.getF32FloatAttr(1.0f / float(holders)))));
          slices = b.create<AddOp>(loc, slices, once);
        }
        slices = b.create<AllReduceOp>(loc, slices,
                                       b.getStringAttr(kTensorAxis),
                                       b.getStringAttr("sum"));
        sumSquares = b.create<AddOp>(loc, sumSquares, slices);
      }
      if (pipelined)
        sumSquares = b.create<AllReduceOp>(loc, sumSquares,
                                           b.getStringAttr("pipeline"),
                                           b.getStringAttr("sum"));
    }

    for (auto [param, grad] : llvm::zip(params, grads)) {
      auto ptype = param.getType().cast<RankedTensorType>();
      double decay = ptype.getRank() >= 2 ? double(weightDecay) : 0.0;
      auto name = FlatSymbolRefAttr::get(param.getSymNameAttr());
      auto f = [&](double v) { return b.getF64FloatAttr(v); };
      auto i = [&](int64_t v) { return b.getI64IntegerAttr(v); };
      if (type == "adamw")
        b.create<AdamWOp>(param.getLoc(), name, grad, step, sumSquares, f(lr),
                          f(decay), f(gradClip), i(warmupSteps),
                          i(decaySteps), f(minLr), f(beta1), f(beta2),
                          f(eps));
      else
        b.create<SgdOp>(param.getLoc(), name, grad, step, sumSquares, f(lr),
                        f(decay), f(gradClip), i(warmupSteps), i(decaySteps),
                        f(minLr), f(momentum));
    }
    b.create<func::ReturnOp>(loc);
  }
};

} // namespace
