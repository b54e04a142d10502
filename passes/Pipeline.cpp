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
  if (!options.mixedPrecision.empty()) {
    MixedPrecisionOptions mp;
    mp.dtype = options.mixedPrecision;
    mp.dynamicLossScale = options.dynamicLossScale;
    mp.initialScale = options.initScale;
    mp.scaleWindow = options.scaleWindow;
    mp.minScale = options.minScale;
    mp.delayedShift = options.delayedShift;
    pm.addPass(createMixedPrecision(mp));
  }
  if (options.train) {
    AutodiffOptions autodiff;
    autodiff.microbatches = options.microbatches;
    pm.addPass(createAutodiff(autodiff));
    OptimizerOptions optimizer;
    optimizer.type = options.optimizer;
    optimizer.lr = options.lr;
    optimizer.beta1 = options.beta1;
    optimizer.beta2 = options.beta2;
    optimizer.eps = options.eps;
    optimizer.weightDecay = options.weightDecay;
    optimizer.gradClip = options.gradClip;
    optimizer.momentum = options.momentum;
    optimizer.warmupSteps = options.warmupSteps;
    optimizer.decaySteps = options.decaySteps;
    optimizer.minLr = options.minLr;
    pm.addPass(createOptimizer(optimizer));
    if (options.dataDegree > 1) {
      DataParallelOptions dp;
      dp.degree = options.dataDegree;
      pm.addPass(createDataParallel(dp));
    }
  }
  pm.addPass(createMemoryPlan());
  EmitProgramOptions emit;
  emit.outputDir = options.outputDir;
  emit.globalBatch = options.globalBatch;
  emit.microbatches = options.microbatches;
  emit.dataDegree = options.dataDegree;
  emit.seed = options.seed;
  pm.addPass(createEmitProgram(emit));
}
