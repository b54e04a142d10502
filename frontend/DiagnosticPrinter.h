//===- DiagnosticPrinter.h - user-facing diagnostics of the tools -*- C++ -*-===//
//
// Prints MLIR diagnostics the way a user of cleave-compile reads them: the
// file and the ONNX node first, then the message, then each note.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_FRONTEND_DIAGNOSTICPRINTER_H
#define CLEAVE_FRONTEND_DIAGNOSTICPRINTER_H

namespace llvm {
class raw_ostream;
}
namespace mlir {
class Location;
class MLIRContext;
} // namespace mlir

namespace cleave {

/// "model.onnx: node '/h.0/MatMul'" for a node's location, "model.onnx" for
/// the file's, "'name'" for a bare name.
void printLocation(llvm::raw_ostream &os, mlir::Location loc);

/// Registers a handler on `context` that prints every diagnostic and its
/// notes to stderr as "LOCATION: error: MESSAGE".
void installDiagnosticPrinter(mlir::MLIRContext &context);

} // namespace cleave

#endif // CLEAVE_FRONTEND_DIAGNOSTICPRINTER_H
