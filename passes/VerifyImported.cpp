//===- VerifyImported.cpp - the import phase's contract ------------------===//
//
// Checks what every later pass assumes of an imported module: static shapes,
// only cleave and func ops, and (optionally) ONNX node names on every op.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

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

struct VerifyImported : cleave::impl::VerifyImportedBase<VerifyImported> {
  using VerifyImportedBase::VerifyImportedBase;

  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](Operation *op) {
      if (isa<ModuleOp>(op))
        return;
      Dialect *dialect = op->getDialect();
      if (!dialect || (!isa<CleaveDialect>(dialect) &&
                       !isa<func::FuncDialect>(dialect))) {
        op->emitError() << "op '" << op->getName()
                        << "' is not part of an imported cleave module";
        ok = false;
        return;
      }
      for (Type type : op->getResultTypes())
        if (!isStaticTensor(type)) {
          op->emitError() << "result of type " << type
                          << " is not a statically shaped tensor";
          ok = false;
        }
      if (requireNames && isa<CleaveDialect>(dialect) &&
          !isa<ParameterOp>(op) && !op->getLoc().isa<NameLoc>()) {
        op->emitError() << "op has no ONNX node name as its location";
        ok = false;
      }
    });
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
