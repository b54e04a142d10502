//===- ForwardBackward.cpp - a stage's forward and its backward -----------===//

#include "passes/ForwardBackward.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::cleave;

FailureOr<SmallVector<std::pair<func::FuncOp, func::FuncOp>>>
mlir::cleave::forwardBackwardPairs(ModuleOp module, llvm::StringRef pass) {
  SmallVector<func::FuncOp> forwards;
  module.walk([&](func::FuncOp func) {
    auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
    if (kind && kind.getValue() == "forward" &&
        func->hasAttr("cleave.backward"))
      forwards.push_back(func);
  });
  SmallVector<std::pair<func::FuncOp, func::FuncOp>> pairs;
  for (func::FuncOp forward : forwards) {
    auto name = forward->getAttrOfType<FlatSymbolRefAttr>("cleave.backward");
    auto backward =
        SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(forward, name);
    if (!backward || backward.isExternal())
      return forward.emitError() << pass << ": no backward function " << name;
    pairs.push_back({forward, backward});
  }
  return pairs;
}

func::FuncOp mlir::cleave::forwardOf(func::FuncOp func) {
  auto name = func->getAttrOfType<FlatSymbolRefAttr>("cleave.forward");
  if (!name)
    return {};
  auto forward = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(func, name);
  return forward && !forward.isExternal() ? forward : func::FuncOp();
}
