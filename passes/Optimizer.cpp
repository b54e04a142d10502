//===- Optimizer.cpp - the optimizer step as a function -------------------===//
//
// Adds `@optimizer(%step)`: for every parameter that receives a gradient
// (has a `cleave.accumulate_grad`), one `cleave.adamw` or `cleave.sgd` on
// its accumulated gradient; with gradient clipping, first the global sum of
// squares of all of them. Weight decay is given only to parameters of two
// or more dimensions (DESIGN.md, "Training semantics").
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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
    if (trained.empty())
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
    Value sumSquares;
    if (gradClip > 0)
      sumSquares = b.create<SumSquaresOp>(
          loc, RankedTensorType::get({}, b.getF32Type()), grads);

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
