//===- MixedPrecision.cpp - bf16 / fp16 compute with fp32 master weights --===//
//
// What PyTorch's autocast does at run time, done once in the IR: matrix
// products and attention read their operands in the low precision (bf16 or
// fp16) and produce it; losses, norms, softmaxes and sum/mean reductions
// compute in fp32; every other op computes in the widest float type of its
// operands (fp32 wins over the low type, as PyTorch's type promotion).
// Parameters stay fp32 (the master weights the optimizer updates); a
// product reads a cast of them, so the backward pass (run after this pass)
// casts their gradients back to fp32 before accumulating.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

enum class Policy { Low, Fp32, Promote, Keep };

Policy policyOf(Operation *op) {
  if (isa<MatmulOp, AttentionOp>(op))
    return Policy::Low;
  if (isa<SoftmaxCrossEntropyOp, NllLossOp, LayerNormOp, RmsNormOp, SoftmaxOp,
          LogSoftmaxOp, ReduceSumOp, ReduceMeanOp>(op))
    return Policy::Fp32;
  if (isa<ConstantOp, GetParamOp, CastOp, func::ReturnOp>(op))
    return Policy::Keep;
  return Policy::Promote;
}

FloatType floatElement(Value v) {
  auto tensor = v.getType().dyn_cast<RankedTensorType>();
  return tensor ? tensor.getElementType().dyn_cast<FloatType>() : FloatType();
}

struct MixedPrecision
    : mlir::cleave::impl::MixedPrecisionBase<MixedPrecision> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    FloatType low;
    if (dtype == "bf16")
      low = b.getBF16Type();
    else if (dtype == "fp16")
      low = b.getF16Type();
    else {
      module.emitError() << "cleave-mixed-precision: dtype must be bf16 or "
                            "fp16, got '"
                         << dtype << "'";
      return signalPassFailure();
    }
    if (dynamicLossScale) {
      if (!(initialScale > 0) || !(minScale > 0) || scaleWindow < 1 ||
          delayedShift < 1) {
        module.emitError() << "cleave-mixed-precision: initial-scale and "
                              "min-scale must be positive, scale-window and "
                              "delayed-shift at least 1";
        return signalPassFailure();
      }
      NamedAttrList scaling;
      scaling.append("initial_scale", b.getF64FloatAttr(initialScale));
      scaling.append("scale_window", b.getI64IntegerAttr(scaleWindow));
      scaling.append("min_scale", b.getF64FloatAttr(minScale));
      scaling.append("delayed_shift", b.getI64IntegerAttr(delayedShift));
      module->setAttr("cleave.loss_scaling",
                      scaling.getDictionary(module.getContext()));
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func->hasAttr("cleave.kind"))
        continue; // already differentiated: autocast applies to forward only
      for (Operation &op : func.getBody().front())
        convert(&op, low);
      Operation *ret = func.getBody().front().getTerminator();
      func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                     ret->getOperandTypes()));
    }
  }

  /// Casts `op`'s float operands to `to` where they differ.
  void castOperands(Operation *op, FloatType to, unsigned limit) {
    OpBuilder b(op);
    for (OpOperand &use : op->getOpOperands()) {
      if (use.getOperandNumber() >= limit)
        break;
      FloatType from = floatElement(use.get());
      if (!from || from == to)
        continue;
      auto type = use.get().getType().cast<RankedTensorType>();
      use.set(b.create<CastOp>(op->getLoc(), type.clone(to), use.get()));
    }
  }

  void setFloatResults(Operation *op, FloatType to) {
    for (Value r : op->getResults())
      if (floatElement(r))
        r.setType(r.getType().cast<RankedTensorType>().clone(to));
  }

  void convert(Operation *op, FloatType low) {
    Builder b(op->getContext());
    switch (policyOf(op)) {
    case Policy::Keep:
      return;
    case Policy::Low:
      // q, k, v (not an attention mask) or the two factors.
      castOperands(op, low, isa<AttentionOp>(op) ? 3 : 2);
      setFloatResults(op, low);
      return;
    case Policy::Fp32:
      castOperands(op, b.getF32Type(), op->getNumOperands());
      setFloatResults(op, b.getF32Type());
      return;
    case Policy::Promote: {
      FloatType widest;
      for (Value v : op->getOperands())
        if (FloatType f = floatElement(v))
          if (!widest || f.getWidth() > widest.getWidth())
            widest = f;
      if (!widest)
        return;
      castOperands(op, widest, op->getNumOperands());
      setFloatResults(op, widest);
      return;
    }
    }
  }
};

} // namespace
