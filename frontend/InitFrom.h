//===- InitFrom.h - starting weights from a safetensors file ----*- C++ -*-===//
//
// cleave-compile --init-from FILE.safetensors: the initial value of every
// parameter the file names is the file's tensor (e.g. what
// `cleave-checkpoint export` or `cleave-run --save-params` wrote), so a
// compile can start from a trained model (fine-tuning).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_INITFROM_H
#define CLEAVE_FRONTEND_INITFROM_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace cleave {

/// Sets the value of each `cleave.parameter` of `module` that `path` holds
/// to the file's tensor (and drops its `init` generator). Every tensor of
/// the file must be a parameter of the same shape and dtype, else an error
/// naming the file and the tensor, with nothing changed; optimizer state
/// that `cleave-checkpoint export --optimizer` adds (`P.exp_avg`,
/// `P.exp_avg_sq`, `P.momentum_buffer` of a parameter P) is skipped.
/// Parameters the file does not hold keep their initialization.
/// `applied` is the number of parameters set.
mlir::LogicalResult initParametersFrom(mlir::ModuleOp module,
                                       llvm::StringRef path, int64_t &applied);

} // namespace cleave

#endif // CLEAVE_FRONTEND_INITFROM_H
