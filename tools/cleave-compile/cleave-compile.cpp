//===- cleave-compile.cpp - ONNX model + spec to per-rank programs -------===//
//
// Thin: parses flags, imports the model, runs the pass pipeline and writes
// the result. Today it stops after import (`--emit=mlir`); program emission
// comes with the runtime.
//
//===----------------------------------------------------------------------===//

#include "frontend/DiagnosticPrinter.h"
#include "frontend/OnnxImporter.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace llvm;

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required);
static cl::opt<std::string> emit("emit",
                                 cl::desc("what to produce: mlir (the IR "
                                          "right after import)"),
                                 cl::value_desc("mlir"), cl::init(""));
static cl::opt<std::string> outputPath("o", cl::desc("output file ('-' for "
                                                     "stdout)"),
                                       cl::value_desc("path"), cl::init("-"));
static cl::opt<int64_t> batch("batch",
                              cl::desc("binds a symbolic batch dimension"),
                              cl::init(0));
static cl::list<std::string>
    bindDims("bind-dim", cl::desc("binds a symbolic dimension: NAME=N"),
             cl::value_desc("NAME=N"));
static cl::opt<bool>
    elideWeights("elide-weights",
                 cl::desc("print parameters without their data, each marked "
                          "cleave.elided_data (the IR of a real model is "
                          "otherwise as large as its weights)"),
                 cl::init(false));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Cleave compiler\n");

  if (emit != "mlir") {
    errs() << "cleave-compile: only --emit=mlir is available in this "
              "version (program emission is not built yet)\n";
    return 2;
  }
  if (batch < 0) {
    errs() << "cleave-compile: --batch must be positive, got " << batch
           << "\n";
    return 2;
  }

  cleave::ImportOptions options;
  if (batch > 0)
    options.batchSize = batch;
  for (const std::string &binding : bindDims) {
    auto [name, value] = StringRef(binding).split('=');
    int64_t n;
    if (name.empty() || value.getAsInteger(10, n) || n <= 0) {
      errs() << "cleave-compile: --bind-dim expects NAME=N with N > 0, got '"
             << binding << "'\n";
      return 2;
    }
    options.dims[name.str()] = n;
  }

  mlir::MLIRContext context;
  mlir::DialectRegistry registry;
  mlir::cleave::registerCleaveDialects(registry);
  context.appendDialectRegistry(registry);
  cleave::installDiagnosticPrinter(context);
  auto module = cleave::importOnnxFile(modelPath, context, options);
  if (failed(module))
    return 1;

  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output) {
    errs() << "cleave-compile: " << error << "\n";
    return 1;
  }
  // Locations carry the ONNX node names, so diagnostics of any later
  // cleave-opt run on this output still name the node.
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  if (elideWeights) {
    // MLIR 16 cannot elide resource blobs when printing, so the data is
    // dropped from the printed module instead, each parameter marked.
    (*module)->walk([&](mlir::cleave::ParameterOp param) {
      if (param.removeValueAttr())
        param->setAttr("cleave.elided_data", mlir::UnitAttr::get(&context));
    });
    flags.elideLargeElementsAttrs(16);
  }
  (*module)->print(output->os(), flags);
  output->os() << "\n";
  output->keep();
  return 0;
}
