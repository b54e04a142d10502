//===- Pipeline.cpp - the pass pipeline of cleave-compile -----------------===//

#include "passes/Pipeline.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::cleave;

void mlir::cleave::buildProgramPipeline(OpPassManager &pm,
                                        const ProgramPipelineOptions &options) {
  pm.addPass(createVerifyImported());
  pm.addPass(createFuse());
  pm.addPass(createMemoryPlan());
  EmitProgramOptions emit;
  emit.outputDir = options.outputDir;
  emit.globalBatch = options.globalBatch;
  emit.microbatches = options.microbatches;
  emit.seed = options.seed;
  pm.addPass(createEmitProgram(emit));
}
