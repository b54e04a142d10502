//===- FuseLossGrad.cpp - the loss and its logits' gradient in one pass ---===//
//
// After cleave-autodiff the forward saves the logits of each
// softmax_cross_entropy for the backward's softmax_cross_entropy_grad. That
// grad op's dloss is the backward's seed (a constant, times the runtime's
// loss scale under fp16), which the forward can compute as well: so the
// forward computes loss and gradient together (softmax_cross_entropy_fused,
// llm.c's fused classifier) and saves the gradient in the logits' result
// slot. The logits ([tokens, vocab], a language model's largest activation)
// then die at the loss, and the backward reads the gradient where it read
// the grad op's result.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_FUSELOSSGRAD
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr StringLiteral kSavedFrom = "cleave.saved_from";

/// The index of the forward result that `v`, an argument of `backward`,
/// was saved from.
std::optional<unsigned> savedIndex(func::FuncOp forward,
                                   func::FuncOp backward, Value v) {
  auto arg = v.dyn_cast<BlockArgument>();
  if (!arg || arg.getOwner() != &backward.getBody().front())
    return std::nullopt;
  auto from = backward.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     kSavedFrom);
  if (!from || from.getInt() < 0 ||
      from.getInt() >= forward.getNumResults())
    return std::nullopt;
  return unsigned(from.getInt());
}

/// Whether `v` is an argument of `func` the runtime fills with the loss
/// scale.
bool isLossScale(func::FuncOp func, Value v) {
  auto arg = v.dyn_cast<BlockArgument>();
  if (!arg || arg.getOwner() != &func.getBody().front())
    return false;
  auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                "cleave.role");
  return role && role.getValue() == "loss_scale";
}

/// The backward's seed as the forward can compute it: a constant, or a
/// constant times the loss scale (as cleave-autodiff builds it).
struct Seed {
  ConstantOp constant;
  bool scaled = false;
};

std::optional<Seed> seedOf(func::FuncOp backward, Value dloss) {
  if (auto constant = dloss.getDefiningOp<ConstantOp>())
    return Seed{constant, false};
  auto mul = dloss.getDefiningOp<MulOp>();
  if (!mul || mul.getLhs().getType() != mul.getType() ||
      mul.getRhs().getType() != mul.getType())
    return std::nullopt;
  auto constant = mul.getLhs().getDefiningOp<ConstantOp>();
  if (constant && isLossScale(backward, mul.getRhs()))
    return Seed{constant, true};
  return std::nullopt;
}

struct FuseLossGrad : mlir::cleave::impl::FuseLossGradBase<FuseLossGrad> {
  using FuseLossGradBase::FuseLossGradBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto forward : llvm::to_vector(module.getOps<func::FuncOp>())) {
      auto kind = forward->getAttrOfType<StringAttr>("cleave.kind");
      auto name = forward->getAttrOfType<FlatSymbolRefAttr>("cleave.backward");
      if (!kind || kind.getValue() != "forward" || !name ||
          forward.isExternal())
        continue;
      auto backward = module.lookupSymbol<func::FuncOp>(name.getAttr());
      if (!backward || backward.isExternal())
        continue;
      SmallVector<SoftmaxCrossEntropyGradOp> grads;
      backward.walk([&](SoftmaxCrossEntropyGradOp g) { grads.push_back(g); });
      for (SoftmaxCrossEntropyGradOp grad : grads)
        fuse(forward, backward, grad);
    }
  }

  /// Rewrites one loss and its grad op if the pattern is there; else
  /// changes nothing.
  void fuse(func::FuncOp forward, func::FuncOp backward,
            SoftmaxCrossEntropyGradOp grad) {
    Operation *ret = forward.getBody().front().getTerminator();
    std::optional<unsigned> logitsIndex =
        savedIndex(forward, backward, grad.getInput());
    std::optional<unsigned> targetIndex =
        savedIndex(forward, backward, grad.getTarget());
    // Logits the backward reads for something else stay saved: fusing
    // would save the gradient next to them, a tensor more.
    if (!logitsIndex || !targetIndex || !grad.getInput().hasOneUse())
      return;
    Value logits = ret->getOperand(*logitsIndex);
    Value target = ret->getOperand(*targetIndex);
    SoftmaxCrossEntropyOp loss;
    for (Operation *user : logits.getUsers()) {
      auto l = dyn_cast<SoftmaxCrossEntropyOp>(user);
      if (l && l.getInput() == logits && l.getTarget() == target &&
          l.getReduction() == grad.getReduction() &&
          l.getIgnoreIndexAttr() == grad.getIgnoreIndexAttr() &&
          l.getType() == grad.getDloss().getType()) {
        loss = l;
        break;
      }
    }
    if (!loss)
      return;
    std::optional<Seed> seed = seedOf(backward, grad.getDloss());
    if (!seed || (seed->scaled && !withLossScale))
      return;

    // The forward: the seed, the fused op, and the gradient saved in the
    // logits' slot (it has their type).
    OpBuilder b(loss);
    Value dloss = b.clone(*seed->constant)->getResult(0);
    if (seed->scaled)
      dloss = b.create<MulOp>(loss.getLoc(), dloss,
                              lossScaleArgument(forward, dloss.getType(),
                                                loss.getLoc()));
    auto fused = b.create<SoftmaxCrossEntropyFusedOp>(
        loss.getLoc(), TypeRange{loss.getType(), logits.getType()},
        loss.getInput(), loss.getTarget(), dloss, loss.getReductionAttr(),
        loss.getIgnoreIndexAttr());
    loss.getResult().replaceAllUsesWith(fused.getLoss());
    loss.erase();
    ret->setOperand(*logitsIndex, fused.getDinput());

    // The backward: the saved gradient replaces the grad op; its seed and
    // the saved targets go if nothing else reads them.
    Value dlossInBackward = grad.getDloss();
    auto targetArg = grad.getTarget().cast<BlockArgument>();
    grad.getResult().replaceAllUsesWith(grad.getInput());
    grad.erase();
    if (Operation *def = dlossInBackward.getDefiningOp();
        def && def->use_empty()) {
      SmallVector<Value> operands(def->getOperands());
      def->erase();
      for (Value v : operands)
        if (Operation *c = v.getDefiningOp(); c && c->use_empty())
          c->erase();
    }
    if (targetArg.use_empty())
      dropSaved(forward, backward, targetArg, *targetIndex);
  }

  /// The forward's loss-scale argument, added if it has none.
  Value lossScaleArgument(func::FuncOp forward, Type type, Location loc) {
    Block &body = forward.getBody().front();
    for (BlockArgument arg : body.getArguments())
      if (arg.getType() == type && isLossScale(forward, arg))
        return arg;
    MLIRContext *ctx = forward.getContext();
    unsigned index = forward.getNumArguments();
    forward.insertArgument(
        index, type,
        DictionaryAttr::get(ctx, {NamedAttribute(
                                     StringAttr::get(ctx, "cleave.role"),
                                     StringAttr::get(ctx, "loss_scale"))}),
        loc);
    return body.getArgument(index);
  }

  /// Removes the backward argument `arg` and, if no other argument reads
  /// it, the forward's saved result `index` it came from; renumbers the
  /// saved results after it.
  void dropSaved(func::FuncOp forward, func::FuncOp backward,
                 BlockArgument arg, unsigned index) {
    backward.eraseArgument(arg.getArgNumber());
    for (unsigned i = 0; i < backward.getNumArguments(); ++i) {
      auto from = backward.getArgAttrOfType<IntegerAttr>(i, kSavedFrom);
      if (from && from.getInt() == index)
        return; // still read: keep the result
    }
    if (!forward.getResultAttr(index, "cleave.saved"))
      return; // also a result of the model's own
    Operation *ret = forward.getBody().front().getTerminator();
    ret->eraseOperand(index);
    forward.eraseResult(index);
    Builder b(forward.getContext());
    for (unsigned i = 0; i < backward.getNumArguments(); ++i)
      for (StringRef attr : {StringRef(kSavedFrom), StringRef("cleave.grad_of_result")}) {
        auto from = backward.getArgAttrOfType<IntegerAttr>(i, attr);
        if (from && from.getInt() > int64_t(index))
          backward.setArgAttr(i, attr, b.getI64IntegerAttr(from.getInt() - 1));
      }
  }
};

} // namespace
