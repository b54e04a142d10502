//===- cleave-opt.cpp - mlir-opt for the cleave dialect ------------------===//
//
// Registers the cleave dialect and every Cleave pass, plus the upstream
// generic passes (canonicalize, cse, ...), so any pass can run on its own,
// and cleave-compile's whole pipeline as `cleave-program-pipeline`.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::cleave::registerCleaveDialects(registry);
  mlir::registerTransformsPasses();
  mlir::cleave::registerCleavePasses();
  mlir::cleave::registerProgramPipeline();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
