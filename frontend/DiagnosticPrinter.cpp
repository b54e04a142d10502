//===- DiagnosticPrinter.cpp - user-facing diagnostics of the tools -------===//
//
// The importer locates every op at NameLoc(node name, FileLineColLoc(model,
// node index + 1, 0)) and the whole model at FileLineColLoc(model, 0, 0).
// MLIR's default printing shows these as loc(...) and drops notes; this
// prints them as a compiler user expects.
//
//===----------------------------------------------------------------------===//

#include "frontend/DiagnosticPrinter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

void cleave::printLocation(llvm::raw_ostream &os, Location loc) {
  if (auto file = loc.dyn_cast<FileLineColLoc>()) {
    os << file.getFilename().getValue();
    if (file.getLine() != 0)
      os << ":" << file.getLine();
    return;
  }
  if (auto name = loc.dyn_cast<NameLoc>()) {
    if (auto file = name.getChildLoc().dyn_cast<FileLineColLoc>()) {
      // Nodes are at line index + 1; graph inputs and initializers at 0.
      os << file.getFilename().getValue() << ": "
         << (file.getLine() ? "node '" : "'") << name.getName().getValue()
         << "'";
      return;
    }
    os << "'" << name.getName().getValue() << "'";
    return;
  }
  if (auto fused = loc.dyn_cast<FusedLoc>()) {
    if (!fused.getLocations().empty())
      return printLocation(os, fused.getLocations().front());
  }
  if (loc.isa<UnknownLoc>()) {
    os << "cleave";
    return;
  }
  os << loc;
}

static llvm::StringRef severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error: return "error";
  case DiagnosticSeverity::Warning: return "warning";
  case DiagnosticSeverity::Note: return "note";
  case DiagnosticSeverity::Remark: return "remark";
  }
  return "error";
}

void cleave::installDiagnosticPrinter(MLIRContext &context) {
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    llvm::raw_ostream &os = llvm::errs();
    printLocation(os, diag.getLocation());
    os << ": " << severityName(diag.getSeverity()) << ": " << diag << "\n";
    for (const Diagnostic &note : diag.getNotes())
      os << "  note: " << note << "\n";
    os.flush();
    return success();
  });
}
