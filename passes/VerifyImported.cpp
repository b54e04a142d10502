//===- VerifyImported.cpp - the import phase's contract ------------------===//
//
// Checks what every later pass assumes of an imported module: static shapes,
// only cleave and func ops, and (optionally) ONNX node names on every op.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_VERIFYIMPORTED
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

bool isStaticTensor(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.hasStaticShape();
}

/// Bytes of a static tensor, or std::nullopt where they overflow 64 bits
/// (ShapedType::getNumElements does not check).
std::optional<int64_t> checkedBytes(RankedTensorType tensor) {
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  int64_t bytes = bits == 1 ? 1 : (bits + 7) / 8;
  for (int64_t d : tensor.getShape())
    if (llvm::MulOverflow(bytes, d, bytes))
      return std::nullopt;
  return bytes;
}

struct VerifyImported : cleave::impl::VerifyImportedBase<VerifyImported> {
  using VerifyImportedBase::VerifyImportedBase;

  /// A function to train returns a scalar float loss; otherwise autodiff
  /// finds nothing to differentiate and the program runs forward only.
  LogicalResult verifyLoss(func::FuncOp func) {
    if (func.isExternal() || func->hasAttr("cleave.kind"))
      return success();
    std::string outputs;
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      auto tensor = type.dyn_cast<RankedTensorType>();
      if (tensor && tensor.getRank() == 0 &&
          tensor.getElementType().isa<FloatType>())
        return success();
      auto name = func.getResultAttrOfType<StringAttr>(i, "cleave.onnx_name");
      std::string shown;
      llvm::raw_string_ostream os(shown);
      os << (outputs.empty() ? "" : ", ") << "'"
         << (name ? name.str() : "#" + std::to_string(i)) << "' of ";
      if (tensor) {
        os << "shape [";
        llvm::interleaveComma(tensor.getShape(), os);
        os << "] (" << tensor.getElementType() << ")";
      } else {
        os << "type " << type;
      }
      outputs += os.str();
    }
    return emitError(func.getLoc())
           << "the model has no scalar loss to train: its output"
           << (func.getNumResults() == 1 ? " is " : "s are ")
           << (outputs.empty() ? std::string("none") : outputs)
           << "; export a module that returns its loss (a float of shape "
              "[]), or compile with --forward-only to run it without "
              "training";
  }

  void runOnOperation() override {
    bool ok = true;
    int64_t totalBytes = 0;
    getOperation().walk([&](Operation *op) -> WalkResult {
      if (isa<ModuleOp>(op))
        return WalkResult::advance();
      Dialect *dialect = op->getDialect();
      if (!dialect || (!isa<CleaveDialect>(dialect) &&
                       !isa<func::FuncDialect>(dialect))) {
        op->emitError() << "op '" << op->getName()
                        << "' is not part of an imported cleave module";
        ok = false;
        return WalkResult::advance();
      }
      for (Type type : op->getResultTypes()) {
        if (!isStaticTensor(type)) {
          op->emitError() << "result of type " << type
                          << " is not a statically shaped tensor";
          ok = false;
          continue;
        }
        // Every later size (the memory plan's offsets, the program's
        // buffers) is a 64-bit byte count: one that overflows would be
        // planned as a few bytes.
        auto tensor = type.cast<RankedTensorType>();
        std::optional<int64_t> bytes = checkedBytes(tensor);
        if (!bytes || llvm::AddOverflow(totalBytes, *bytes, totalBytes)) {
          op->emitError() << "result of type " << type << " makes "
                          << (bytes ? "the model's tensors together"
                                    : "a tensor")
                          << " larger than a 64-bit count of bytes, so no "
                             "memory plan can hold it; export the model with "
                             "smaller dimensions (batch, sequence)";
          ok = false;
          return WalkResult::interrupt();
        }
      }
      if (requireNames && isa<CleaveDialect>(dialect) &&
          !isa<ParameterOp>(op) && !op->getLoc().isa<NameLoc>()) {
        op->emitError() << "op has no ONNX node name as its location";
        ok = false;
      }
      return WalkResult::advance();
    });
    if (requireLoss)
      for (auto func : getOperation().getOps<func::FuncOp>())
        ok &= succeeded(verifyLoss(func));
    for (auto func : getOperation().getOps<func::FuncOp>())
      for (Type type : func.getFunctionType().getInputs())
        if (!isStaticTensor(type)) {
          func.emitError() << "argument of type " << type
                           << " is not a statically shaped tensor";
          ok = false;
        }
    if (!ok)
      return signalPassFailure();
  }
};

} // namespace
