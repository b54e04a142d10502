//===- OnnxImporter.h - ONNX model to cleave IR ----------------*- C++ -*-===//
//
// The frontend's one entry point. It reads an ONNX file (inline or external
// weights), binds symbolic dimensions, folds the shape arithmetic of traced
// exports, and builds a module with one `cleave.parameter` per trainable
// initializer and a `func.func @forward` over static shapes. Errors are
// reported as MLIR diagnostics located at the ONNX node (or file) at fault.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_ONNXIMPORTER_H
#define CLEAVE_FRONTEND_ONNXIMPORTER_H

#include "frontend/HostTensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

struct ImportOptions {
  /// Binds dimension 0 of every graph input whose first dimension is
  /// symbolic (the batch axis of `dynamic_axes`).
  std::optional<int64_t> batchSize;
  /// Chooses the batch size from the model's own: called with dimension 0
  /// of the first graph input (nullopt when symbolic) before any input is
  /// read; its result becomes `batchSize`, its error the import's. This is
  /// how cleave-compile applies the spec's batch rule.
  std::function<llvm::Expected<int64_t>(std::optional<int64_t>)> resolveBatch;
  /// Binds symbolic dimensions by their `dim_param` name.
  std::map<std::string, int64_t> dims;
  /// Graph inputs whose values are fixed at compile time (e.g. the shape
  /// operand of a Reshape that a test feeds as an input).
  std::map<std::string, HostTensor> constantInputs;
  /// Name of the function the graph becomes.
  std::string functionName = "forward";
  /// Glob patterns (`*`, `?`, `[...]`) of parameters that are not trained,
  /// such as the buffers an export turned into initializers: they stay
  /// `cleave.parameter`s (saved with the others) marked `cleave.frozen`,
  /// which autodiff does not differentiate. A pattern that matches no
  /// parameter is an error.
  std::vector<std::string> frozen;
  /// Bytes that one value computed while importing (a folded constant, a
  /// mask) may take with the importer's working copies (32 per element);
  /// 0: the machine's physical memory. The fuzzer keeps it below its own
  /// memory limit.
  int64_t foldLimitBytes = 0;
};

/// The ONNX element type of an MLIR element type (Undefined if none).
DType dtypeOf(mlir::Type type);

/// The ONNX ops the importer maps into the dialect (not counting those it
/// only evaluates at compile time), sorted, for messages and tests.
const std::vector<std::string> &supportedOnnxOps();

/// Imports the ONNX model at `path`. On failure the diagnostics were emitted
/// to `context`'s handler.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxFile(llvm::StringRef path, mlir::MLIRContext &context,
               const ImportOptions &options = {});

} // namespace cleave

#endif // CLEAVE_FRONTEND_ONNXIMPORTER_H
