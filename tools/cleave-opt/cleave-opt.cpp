//===- cleave-opt.cpp - mlir-opt for the cleave dialect ------------------===//
//
// Registers the cleave dialect and every Cleave pass, plus the upstream
// generic passes (canonicalize, cse, ...), so any pass can run on its own.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::cleave::registerCleaveDialects(registry);
  mlir::registerTransformsPasses();
  mlir::cleave::registerCleavePasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
