//===- Autodiff.cpp - reverse-mode differentiation of the loss ------------===//
//
// For each forward function that returns a scalar loss, builds its backward
// function: the gradients of every op, in reverse order, by the rules of
// GradientRules.cpp, ending in one `cleave.accumulate_grad` per parameter
// read (none for a parameter marked `cleave.frozen`, which is read like a
// constant). The forward function then also returns the values the backward
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
#include "llvm/ADT/StringSet.h"

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
      bool boundary = false;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        boundary |= bool(func.getResultAttr(i, "cleave.differentiable"));
      if (!loss && !boundary)
        continue; // a model without a loss only runs forward
      if (failed(differentiate(func, loss)))
        return signalPassFailure();
    }
  }

  /// Appends the backward ops to `func` before its return, then moves them
  /// into a function of their own.
  LogicalResult differentiate(func::FuncOp func,
                              std::optional<unsigned> lossIndex) {
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    MLIRContext *ctx = func.getContext();
    auto attrs = [&](StringRef name, Attribute value) {
      return DictionaryAttr::get(ctx, {NamedAttribute(
                                          StringAttr::get(ctx, name), value)});
    };

    // Values that depend on a parameter, or on an argument marked
    // cleave.differentiable (a pipeline stage's incoming activations):
    // only they need gradients. A frozen parameter (a buffer the export
    // made an initializer) is read like a constant: no gradient reaches it,
    // so it gets no accumulate_grad and the optimizer leaves it alone.
    llvm::StringSet<> frozen;
    for (auto param : func->getParentOfType<ModuleOp>().getOps<ParameterOp>())
      if (param->hasAttr("cleave.frozen"))
        frozen.insert(param.getSymName());
    llvm::DenseSet<Value> varied;
    for (BlockArgument arg : body.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), "cleave.differentiable") &&
          isDifferentiable(arg.getType()))
        varied.insert(arg);
    for (Operation &op : body) {
      auto get = dyn_cast<GetParamOp>(op);
      bool fromParam = get && !frozen.contains(get.getName());
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
    // Inputs of the backward function that are not forward values: they
    // are temporary arguments of the forward block until split() moves them.
    SmallVector<std::pair<Value, DictionaryAttr>> inputs;
    if (lossIndex) {
      // The step's loss is the mean over microbatches of each microbatch's
      // loss, so each backward starts from d(step loss)/d(loss) = 1/M.
      Value loss = ret->getOperand(*lossIndex);
      auto lossType = loss.getType().cast<RankedTensorType>();
      Value seed = b.create<ConstantOp>(
          loss.getLoc(),
          DenseElementsAttr::get(
              lossType, FloatAttr::get(lossType.getElementType(),
                                       1.0 / double(microbatches))));
      // With dynamic loss scaling the seed is also multiplied by the
      // current scale, which the runtime passes in.
      if (func->getParentOfType<ModuleOp>()->hasAttr("cleave.loss_scaling")) {
        Value scale = body.addArgument(lossType, loss.getLoc());
        inputs.push_back({scale, attrs("cleave.role",
                                       StringAttr::get(ctx, "loss_scale"))});
        seed = b.create<MulOp>(loss.getLoc(), seed, scale);
      }
      grads[loss] = seed;
    }
    // A result marked cleave.differentiable (a stage's outgoing
    // activations) receives its gradient as an argument of the backward.
    for (unsigned i = 0; i < ret->getNumOperands(); ++i) {
      if (!func.getResultAttr(i, "cleave.differentiable"))
        continue;
      Value result = ret->getOperand(i);
      if (!isDifferentiable(result.getType()))
        return func.emitError() << "result " << i
                                << " is marked cleave.differentiable but is "
                                   "not a float tensor";
      Value incoming = body.addArgument(result.getType(), result.getLoc());
      inputs.push_back(
          {incoming, attrs("cleave.grad_of_result", b.getI64IntegerAttr(i))});
      Value &slot = grads[result];
      slot = slot ? b.create<AddOp>(result.getLoc(), slot, incoming).getResult()
                  : incoming;
    }

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
    // The gradients of the differentiable arguments leave the backward
    // function as its results (zero where nothing depended on them).
    SmallVector<std::pair<Value, DictionaryAttr>> outputs;
    for (BlockArgument arg : body.getArguments()) {
      if (arg.getArgNumber() >= func.getNumArguments() ||
          !func.getArgAttr(arg.getArgNumber(), "cleave.differentiable"))
        continue;
      Value g = grads.lookup(arg);
      if (!g) {
        auto type = arg.getType().cast<RankedTensorType>();
        g = b.create<ConstantOp>(
            arg.getLoc(), DenseElementsAttr::get(
                              type, FloatAttr::get(type.getElementType(), 0.0)));
      }
      outputs.push_back({g, attrs("cleave.grad_of_arg",
                                  b.getI64IntegerAttr(arg.getArgNumber()))});
    }
    return split(func, lastForward, inputs, outputs);
  }

  /// Moves the ops after `lastForward` (up to the return) into a new
  /// function `<name>_backward` whose arguments are the forward values they
  /// read; the forward function returns those values too.
  LogicalResult
  split(func::FuncOp func, Operation *lastForward,
        ArrayRef<std::pair<Value, DictionaryAttr>> inputs,
        ArrayRef<std::pair<Value, DictionaryAttr>> outputs) {
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
    // The backward's own inputs come last; the forward's temporary
    // arguments for them go away.
    llvm::DenseMap<Value, Value> replacement;
    SmallVector<Value> saved;
    OpBuilder head = OpBuilder::atBlockBegin(target);
    auto remap = [&](Value v) -> Value {
      if (v.getParentBlock() == target)
        return v;
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
      return r;
    };
    for (Operation *op : moved)
      for (OpOperand &use : op->getOpOperands())
        if (!llvm::any_of(inputs, [&](auto &in) { return in.first == use.get(); }))
          use.set(remap(use.get()));
    SmallVector<Value> returned;
    for (auto &[v, attr] : outputs)
      returned.push_back(
          llvm::any_of(inputs, [&](auto &in) { return in.first == v; })
              ? v
              : remap(v));
    for (auto &[temp, attr] : inputs) {
      Value arg = target->addArgument(temp.getType(), temp.getLoc());
      temp.replaceAllUsesWith(arg); // uses are all in moved ops or `returned`
      for (Value &r : returned)
        if (r == temp)
          r = arg;
    }
    b.setInsertionPointToEnd(target);
    b.create<func::ReturnOp>(func.getLoc(), returned);
    for (auto &[temp, attr] : llvm::reverse(inputs))
      body.eraseArgument(temp.cast<BlockArgument>().getArgNumber());

    unsigned firstSaved = ret->getNumOperands();
    SmallVector<Value> results(ret->getOperands());
    llvm::append_range(results, saved);
    ret->setOperands(results);
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    backward.setType(FunctionType::get(ctx, target->getArgumentTypes(),
                                       ValueRange(returned).getTypes()));
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
    for (auto &[temp, attr] : inputs)
      argAttrs.push_back(attr);
    SmallVector<DictionaryAttr> gradAttrs;
    for (auto &[v, attr] : outputs)
      gradAttrs.push_back(attr);
    func.setAllResultAttrs(resultAttrs);
    backward.setAllArgAttrs(argAttrs);
    backward.setAllResultAttrs(gradAttrs);
    func->setAttr("cleave.kind", b.getStringAttr("forward"));
    func->setAttr("cleave.backward", FlatSymbolRefAttr::get(backward));
    backward->setAttr("cleave.kind", b.getStringAttr("backward"));
    backward->setAttr("cleave.forward", FlatSymbolRefAttr::get(func));
    return success();
  }
};

} // namespace
