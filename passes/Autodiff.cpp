//===- Autodiff.cpp - reverse-mode differentiation of the loss ------------===//
//
// For each forward function that returns a scalar loss, builds its backward
// function: the gradients of every op, in reverse order, by the rules of
// GradientRules.cpp, ending in one `cleave.accumulate_grad` per parameter
// read. The forward function then also returns the values the backward
// reads ("saved" results), and the backward function takes them as
// arguments, so each is a function a pipeline stage can run on its own.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The index of the function's scalar float result (the loss), if any.
std::optional<unsigned> lossResult(func::FuncOp func) {
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = type.dyn_cast<RankedTensorType>();
    if (tensor && tensor.getRank() == 0 &&
        tensor.getElementType().isa<FloatType>())
      return i;
  }
  return std::nullopt;
}

struct Autodiff : mlir::cleave::impl::AutodiffBase<Autodiff> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (microbatches < 1) {
      module.emitError() << "cleave-autodiff: microbatches must be at least 1";
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func->hasAttr("cleave.kind") || func.isExternal())
        continue;
      std::optional<unsigned> loss = lossResult(func);
      if (!loss)
        continue; // a model without a loss only runs forward
      if (failed(differentiate(func, *loss)))
        return signalPassFailure();
    }
  }

  /// Appends the backward ops to `func` before its return, then moves them
  /// into a function of their own.
  LogicalResult differentiate(func::FuncOp func, unsigned lossIndex) {
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    Value loss = ret->getOperand(lossIndex);

    // Values that depend on a parameter: only they need gradients.
    llvm::DenseSet<Value> varied;
    for (Operation &op : body) {
      bool fromParam = isa<GetParamOp>(op);
      bool fromVaried = llvm::any_of(op.getOperands(), [&](Value v) {
        return varied.contains(v);
      });
      if (fromParam || fromVaried)
        for (Value r : op.getResults())
          if (isDifferentiable(r.getType()))
            varied.insert(r);
    }

    Operation *lastForward = ret->getPrevNode();
    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> grads;
    // The step's loss is the mean over microbatches of each microbatch's
    // loss, so each backward starts from d(step loss)/d(loss) = 1/M.
    auto lossType = loss.getType().cast<RankedTensorType>();
    Value seed = b.create<ConstantOp>(
        loss.getLoc(),
        DenseElementsAttr::get(
            lossType, FloatAttr::get(lossType.getElementType(),
                                     1.0 / double(microbatches))));
    // With dynamic loss scaling the seed is also multiplied by the current
    // scale, an argument of the backward function (added by split()).
    Value scale;
    if (func->getParentOfType<ModuleOp>()->hasAttr("cleave.loss_scaling")) {
      scale = body.addArgument(lossType, loss.getLoc());
      seed = b.create<MulOp>(loss.getLoc(), seed, scale);
    }
    grads[loss] = seed;

    if (lastForward) {
      for (Operation *op = lastForward; op; op = op->getPrevNode()) {
        if (auto get = dyn_cast<GetParamOp>(op)) {
          if (Value g = grads.lookup(get.getResult()))
            b.create<AccumulateGradOp>(get.getLoc(), get.getNameAttr(), g);
          continue;
        }
        SmallVector<Value> resultGrads;
        bool any = false;
        for (Value r : op->getResults()) {
          resultGrads.push_back(grads.lookup(r));
          any |= bool(resultGrads.back());
        }
        if (!any)
          continue;
        SmallVector<bool> wanted;
        bool anyWanted = false;
        for (Value v : op->getOperands()) {
          wanted.push_back(varied.contains(v));
          anyWanted |= wanted.back();
        }
        if (!anyWanted)
          continue;
        // Results without a gradient contribute zero.
        for (auto [r, g] : llvm::zip(op->getResults(), resultGrads))
          if (!g && isDifferentiable(r.getType())) {
            auto type = r.getType().cast<RankedTensorType>();
            g = b.create<ConstantOp>(
                op->getLoc(),
                DenseElementsAttr::get(
                    type, FloatAttr::get(type.getElementType(), 0.0)));
          }
        SmallVector<Value> operandGrads;
        if (failed(buildOperandGradients(b, op, resultGrads, wanted,
                                         operandGrads)))
          return failure();
        for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads)) {
          if (!g)
            continue;
          if (g.getType() != v.getType())
            return op->emitOpError()
                   << "gradient rule built " << g.getType()
                   << " for an operand of type " << v.getType();
          Value &slot = grads[v];
          slot = slot ? b.create<AddOp>(op->getLoc(), slot, g).getResult() : g;
        }
      }
    }
    return split(func, lastForward, scale);
  }

  /// Moves the ops after `lastForward` (up to the return) into a new
  /// function `<name>_backward` whose arguments are the forward values they
  /// read; the forward function returns those values too.
  LogicalResult split(func::FuncOp func, Operation *lastForward,
                      Value scale) {
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    MLIRContext *ctx = func.getContext();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(func);
    std::string name = (func.getName() + "_backward").str();
    auto backward = b.create<func::FuncOp>(func.getLoc(), name,
                                           FunctionType::get(ctx, {}, {}));
    SymbolTable(func->getParentOfType<ModuleOp>()).insert(backward);
    Block *target = backward.addEntryBlock();

    Operation *first = lastForward ? lastForward->getNextNode() : &body.front();
    SmallVector<Operation *> moved;
    for (Operation *op = first; op != ret; op = op->getNextNode())
      moved.push_back(op);
    for (Operation *op : moved)
      op->moveBefore(target, target->end());

    // Forward values the backward reads become arguments; parameters are
    // read again where they are needed.
    llvm::DenseMap<Value, Value> replacement;
    SmallVector<Value> saved;
    OpBuilder head = OpBuilder::atBlockBegin(target);
    for (Operation *op : moved) {
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (v.getParentBlock() == target)
          continue;
        Value &r = replacement[v];
        if (!r) {
          if (auto get = v.getDefiningOp<GetParamOp>()) {
            r = head.create<GetParamOp>(get.getLoc(), get.getType(),
                                        get.getNameAttr());
          } else {
            r = target->addArgument(v.getType(), v.getLoc());
            saved.push_back(v);
          }
        }
        use.set(r);
      }
    }
    b.setInsertionPointToEnd(target);
    b.create<func::ReturnOp>(func.getLoc());
    // The loss scale is the backward's last argument; it was a temporary
    // argument of the forward block.
    if (scale) {
      Value last = target->addArgument(scale.getType(), scale.getLoc());
      for (Operation *op : moved)
        op->replaceUsesOfWith(replacement.lookup(scale), last);
      auto it = llvm::find(saved, scale);
      target->eraseArgument(
          replacement.lookup(scale).cast<BlockArgument>().getArgNumber());
      saved.erase(it);
      body.eraseArgument(scale.cast<BlockArgument>().getArgNumber());
    }

    unsigned firstSaved = ret->getNumOperands();
    SmallVector<Value> results(ret->getOperands());
    llvm::append_range(results, saved);
    ret->setOperands(results);
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    backward.setType(FunctionType::get(ctx, target->getArgumentTypes(), {}));
    SmallVector<DictionaryAttr> resultAttrs, argAttrs;
    for (unsigned i = 0; i < firstSaved; ++i)
      resultAttrs.push_back(func.getResultAttrDict(i)
                                ? func.getResultAttrDict(i)
                                : DictionaryAttr::get(ctx));
    for (unsigned i = 0; i < saved.size(); ++i) {
      resultAttrs.push_back(DictionaryAttr::get(
          ctx, {b.getNamedAttr("cleave.saved", UnitAttr::get(ctx))}));
      argAttrs.push_back(DictionaryAttr::get(
          ctx, {b.getNamedAttr("cleave.saved_from",
                               b.getI64IntegerAttr(firstSaved + i))}));
    }
    if (scale)
      argAttrs.push_back(DictionaryAttr::get(
          ctx, {b.getNamedAttr("cleave.role", b.getStringAttr("loss_scale"))}));
    func.setAllResultAttrs(resultAttrs);
    backward.setAllArgAttrs(argAttrs);
    func->setAttr("cleave.kind", b.getStringAttr("forward"));
    func->setAttr("cleave.backward", FlatSymbolRefAttr::get(backward));
    backward->setAttr("cleave.kind", b.getStringAttr("backward"));
    backward->setAttr("cleave.forward", FlatSymbolRefAttr::get(func));
    return success();
  }
};

} // namespace
