//===- Pipeline.cpp - the pass pipeline of cleave-compile -----------------===//

#include "passes/Pipeline.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::cleave;

void mlir::cleave::buildProgramPipeline(OpPassManager &pm,
                                        const ProgramPipelineOptions &options) {
  // Training needs a scalar loss; without one every later pass would
  // quietly leave the model forward only.
  VerifyImportedOptions verify;
  verify.requireLoss = options.train;
  pm.addPass(createVerifyImported(verify));
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
  int64_t stages = options.pipelineDegree * options.virtualStages;
  if (stages > 1) {
    PipelinePartitionOptions partition;
    partition.stages = stages;
    partition.splitPoints = options.splitPoints;
    partition.optimize = options.optimize;
    partition.memoryWeight = options.memoryWeight;
    partition.backend = options.backend;
    partition.ratesFile = options.ratesFile;
    pm.addPass(createPipelinePartition(partition));
    // The phase contract: every op in one stage, every crossing value
    // through a stage's boundary; autodiff, the schedule and the emitter
    // rely on it, and a broken partition fails here, naming the stage,
    // instead of as a wrong program.
    pm.addPass(createVerifyPartitioned());
  }
  // Each stage is trained as a model of its own; without a pipeline the
  // module is the one stage.
  OpPassManager &stage = stages > 1 ? pm.nest<ModuleOp>() : pm;
  if (options.train) {
    AutodiffOptions autodiff;
    autodiff.microbatches = options.microbatches;
    stage.addPass(createAutodiff(autodiff));
    // The loss's gradient in the forward, saved instead of the logits: the
    // [tokens, vocab] logits die at the loss and are read once.
    stage.addPass(createFuseLossGrad());
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
    stage.addPass(createOptimizer(optimizer));
    if (options.dataDegree > 1) {
      DataParallelOptions dp;
      dp.degree = options.dataDegree;
      stage.addPass(createDataParallel(dp));
    }
  }
  if (stages > 1) {
    PipelineScheduleOptions schedule;
    schedule.kind = options.schedule;
    schedule.ranks = options.pipelineDegree;
    schedule.microbatches = options.microbatches;
    schedule.activeMicrobatches = options.activeMicrobatches;
    schedule.backend = options.backend;
    schedule.ratesFile = options.ratesFile;
    pm.addPass(createPipelineSchedule(schedule));
    pm.nest<ModuleOp>().addPass(createMemoryPlan());
  } else {
    pm.addPass(createMemoryPlan());
  }
  // Each bucket's all-reduce starts in the last microbatch's backward once
  // its gradients are complete, instead of at the optimizer. After the
  // memory plan: the last-microbatch copy of a backward runs in the
  // storage planned for the original. (A new nest: `stage` runs before the
  // schedule.)
  if (options.train && options.dataDegree > 1)
    (stages > 1 ? pm.nest<ModuleOp>() : pm)
        .addPass(createOverlapGradients());
  EmitProgramOptions emit;
  emit.outputDir = options.outputDir;
  emit.globalBatch = options.globalBatch;
  emit.microbatches = options.microbatches;
  emit.dataDegree = options.dataDegree;
  emit.seed = options.seed;
  emit.placement = options.placement;
  emit.device = options.device;
  pm.addPass(createEmitProgram(emit));
}
