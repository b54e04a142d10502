//===- ForwardBackward.h - a stage's forward and its backward --*- C++ -*-===//
//
// The passes after autodiff that rewrite a forward together with its
// backward (cleave-remat, cleave-offload-activations) find the pairs the
// same way: every forward function (of every stage module) that names its
// backward with `cleave.backward`. Those that read a backward's saved
// arguments (the memory plan, the live peak, the emitter) go the other way,
// through the backward's `cleave.forward`.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_FORWARDBACKWARD_H
#define CLEAVE_PASSES_FORWARDBACKWARD_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <utility>

namespace mlir::cleave {

/// Every forward function under `module` that has a backward, with it, in
/// walk order. A forward whose `cleave.backward` names no function with a
/// body is an error on the forward, naming `pass` and the backward.
FailureOr<SmallVector<std::pair<func::FuncOp, func::FuncOp>>>
forwardBackwardPairs(ModuleOp module, llvm::StringRef pass);

/// The forward function a backward names with `cleave.forward`, or a null
/// FuncOp when `func` is no backward or its forward has no body.
func::FuncOp forwardOf(func::FuncOp func);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_FORWARDBACKWARD_H
