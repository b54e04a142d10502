//===- InputRoles.cpp - which arguments are the token ids and targets -----===//
//
// The forward's first two integer [batch, seq] arguments are the step's
// token ids and targets (DESIGN.md). Marked here once as cleave.role, they
// are carried by the partition to the stages that read them and bound by
// the emitter, which no longer guesses.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_INPUTROLES
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// An integer [batch, seq] tensor with elements: what token ids look like.
bool tokenLike(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.getRank() == 2 && tensor.hasStaticShape() &&
         tensor.getNumElements() > 0 &&
         tensor.getElementType().isa<IntegerType>() &&
         !tensor.getElementType().isInteger(1);
}

struct InputRoles : mlir::cleave::impl::InputRolesBase<InputRoles> {
  using InputRolesBase::InputRolesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    Type shape; // of the first of the two found
    bool tokens = false, targets = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
      if (func.isExternal() || (kind && kind.getValue() != "forward"))
        continue;
      for (unsigned i = 0; i < func.getNumArguments() && !(tokens && targets);
           ++i) {
        Type type = func.getArgumentTypes()[i];
        auto role = func.getArgAttrOfType<StringAttr>(i, kRoleAttr);
        if (role && role.getValue() != "tokens" && role.getValue() != "targets")
          continue;
        if (!role && !tokenLike(type))
          continue;
        if (shape && type != shape) {
          auto name = func.getArgAttrOfType<StringAttr>(i, "cleave.onnx_name");
          std::string what =
              name ? name.str() : "argument " + std::to_string(i);
          func.emitError() << "the " << (tokens ? "targets" : "token ids")
                           << " '" << what << "' have shape " << type
                           << ", but the " << (tokens ? "token ids" : "targets")
                           << " are " << shape;
          return signalPassFailure();
        }
        shape = type;
        bool isTokens = role ? role.getValue() == "tokens" : !tokens;
        if (!role)
          func.setArgAttr(i, kRoleAttr,
                          b.getStringAttr(isTokens ? "tokens" : "targets"));
        (isTokens ? tokens : targets) = true;
      }
    }
  }
};

} // namespace
