//===- Pipeline.cpp - the pass pipeline of cleave-compile -----------------===//
//
// Every pass cleave-compile runs, in order, each with why it is where it
// is. The same pipeline is registered for cleave-opt.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::cleave;

void mlir::cleave::buildProgramPipeline(OpPassManager &pm,
                                        const ProgramPipelineOptions &options) {
  // Training needs a scalar loss; without one every later pass would
  // quietly leave the model forward only.
  VerifyImportedOptions verify;
  verify.requireLoss = options.train;
  pm.addPass(createVerifyImported(verify));
  // The token ids and targets named once: the partition carries the names
  // to the stages that read them, and the emitter binds by them.
  pm.addPass(createInputRoles());
  // The mesh first: placement is decided once, and every later pass
  // (the partition's stage count, the data-parallel and tied-parameter
  // groups, the transfers' peers) reads ranks and groups off it.
  PlaceRanksOptions place;
  place.data = options.dataDegree;
  place.pipeline = options.pipelineDegree;
  place.tensor = options.tensorDegree;
  place.placement = options.placement;
  // MiCS: sharding groups smaller than the data-parallel ranks split the
  // data axis in two.
  bool mics =
      options.shardedDegree > 1 && options.shardedDegree < options.dataDegree;
  if (mics)
    place.shardedData = options.shardedDegree;
  pm.addPass(createPlaceRanks(place));
  // Fused ops (attention, rotary, norms) before anything counts costs or
  // derives gradients: their rules and kernels are the fast ones.
  pm.addPass(createFuse());
  if (options.tensorDegree > 1) {
    // Tensor parallelism after the fused ops (their rules split attention
    // by heads) and before autocast, the partition and autodiff: the
    // split is decided, then each rank's program is the local one with
    // Megatron's f and g, which autodiff differentiates
    // (docs/tensor-parallel.md), the vocabulary split too (embedding,
    // head and cross-entropy).
    // A vocabulary the degree does not divide is padded first, so that it
    // is split like any other (Megatron-LM's padding).
    PadVocabularyOptions padVocabulary;
    padVocabulary.tensor = options.tensorDegree;
    pm.addPass(createPadVocabulary(padVocabulary));
    PropagateShardingsOptions propagate;
    propagate.tensor = options.tensorDegree;
    propagate.heads = true;
    pm.addPass(createPropagateShardings(propagate));
    pm.addPass(createPartitionTensor());
    // On the local program, before autocast and autodiff: the residual
    // stream split on the sequence, f and g become its all-gather and
    // reduce-scatter, which autodiff differentiates (their conjugates).
    if (options.sequenceParallel)
      pm.addPass(createSequenceParallel());
    // SMP's prescaled_batch false: each rank reads its part of the
    // group's samples and the group gathers the token ids.
    if (options.splitTokenReads)
      pm.addPass(createSplitTokenReads());
  }
  // Autocast before partitioning, so the cost model and the memory plan
  // see the low-precision compute.
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
    // Cut the forward into stages before autodiff, so each stage derives
    // its own backward and optimizer as a model of its own.
    PipelinePartitionOptions partition;
    partition.stages = stages;
    partition.splitPoints = options.splitPoints;
    partition.optimize = options.optimize;
    partition.memoryWeight = options.memoryWeight;
    partition.backend = options.backend;
    partition.ratesFile = options.ratesFile;
    partition.recompute = options.train && !options.remat.empty() &&
                          options.remat != "none" &&
                          options.remat != "selective";
    partition.recomputeAttention =
        options.train && options.remat == "selective";
    // Offload moves one checkpoint a segment: a layer under `each`, k under
    // `group_<k>`. Under `contiguous` a stage's one checkpoint costs every
    // stage alike, and `selective` keeps no layer inputs to move: neither
    // changes where to cut.
    int64_t group = 0;
    if (options.remat == "each")
      group = 1;
    else if (StringRef(options.remat).startswith("group_") &&
             StringRef(options.remat).drop_front(6).getAsInteger(10, group))
      group = 0;
    partition.offloadEvery = options.train && options.offload ? group : 0;
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
    // The optimizer step, with the tied-parameter sums over the pipeline
    // ranks holding them and the clipping norm summed over the pipeline.
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
    // Gradients averaged over data-parallel replicas, in buckets, before
    // the optimizer reads them; with ZeRO-1 reduce-scattered instead, each
    // rank updating its chunk of every parameter.
    // Sharded data parallelism (ZeRO-3) is ZeRO-1 whose parameters keep
    // only their chunk too, gathered where functions read them.
    if (options.dataDegree > 1 &&
        (options.shardOptimizerState || options.shardedDegree > 1)) {
      ShardOptimizerStateOptions zero;
      if (mics) {
        // Reduce-scattered within a group, then averaged over the groups
        // (MiCS's 2-hop gradient synchronization).
        zero.axis = "sharded_data";
        zero.replicaAxis = "data_replica";
      }
      // Under bf16 / fp16 ZeRO-1 splits the fp32 masters as well (with
      // sharded parameters the parameters themselves are the split masters).
      zero.masterCopies =
          !options.mixedPrecision.empty() && options.shardedDegree <= 1;
      stage.addPass(createShardOptimizerState(zero));
      if (options.shardedDegree > 1) {
        ShardParametersOptions shard;
        shard.threshold = options.paramPersistenceThreshold;
        shard.processesPerHost = options.processesPerHost;
        stage.addPass(createShardParameters(shard));
      }
    } else if (options.dataDegree > 1) {
      DataParallelOptions dp;
      dp.degree = options.dataDegree;
      stage.addPass(createDataParallel(dp));
    }
  }
  if (options.train && options.sequenceParallel &&
      (options.remat.empty() || options.remat == "none")) {
    // Sequence parallelism without checkpointing: the all-gathers before
    // the column-parallel products are gathered again in the backward, so
    // the forward saves the rank's part (Megatron; docs/tensor-parallel.md).
    RematOptions remat;
    remat.strategy = "none";
    pm.addPass(createRemat(remat));
  }
  if (options.train && !options.remat.empty() && options.remat != "none") {
    // Activation checkpointing once the backward exists and before the
    // memory plan, which then sees the recomputed segments' short lives.
    // On the whole module, not per stage: a layer prefix is checked
    // against every stage's nodes.
    RematOptions remat;
    remat.strategy = options.remat;
    remat.layers = options.rematLayers;
    pm.addPass(createRemat(remat));
    if (options.offload) {
      // The checkpoints remat left to the forward go to host memory and
      // come back ahead of their backward; before the memory plan, which
      // gives the host values their arena.
      OffloadActivationsOptions offload;
      offload.horizon = options.offloadHorizon;
      pm.addPass(createOffloadActivations(offload));
    }
  }
  if (stages > 1) {
    // One optimizer per pipeline rank over its virtual stages, so that
    // clipping uses the whole model's norm; before the memory plan, which
    // then places the merged updates' state.
    pm.addPass(createMergeChunkOptimizers());
  }
  // Each pipeline rank's order of (stage, forward/backward, microbatch)
  // work, and the activation slots each stage needs for it. A module that
  // is not split gets the one-stage order, so that the emitter translates
  // one kind of schedule.
  PipelineScheduleOptions schedule;
  schedule.kind = options.schedule;
  schedule.ranks = options.pipelineDegree;
  schedule.microbatches = options.microbatches;
  schedule.activeMicrobatches = options.activeMicrobatches;
  schedule.backend = options.backend;
  schedule.ratesFile = options.ratesFile;
  pm.addPass(createPipelineSchedule(schedule));
  if (options.train && options.shardedDegree > 1) {
    // Each sharded parameter's gather starts a gather ahead, overlapping
    // the compute before its reader; once the functions' order is final
    // (after remat) and before the memory plan, which then counts the
    // earlier starts.
    PrefetchGathersOptions prefetch;
    prefetch.maxLive = options.maxLiveParameters;
    prefetch.depth = options.prefetchDepth;
    pm.addPass(createPrefetchGathers(prefetch));
    // The gradients' reduce-scatters joined into buckets, each started
    // once its last gradient is made; before the memory plan, which keeps
    // each bucket's input until its wait.
    BucketScattersOptions buckets;
    buckets.bucketElements = options.reduceBucketSize;
    pm.addPass(createBucketScatters(buckets));
  }
  if (stages > 1) {
    // Offsets last: every value that will exist is known, the slots too.
    pm.nest<ModuleOp>().addPass(createMemoryPlan());
    // Each crossing between stages becomes a send and a receive with its
    // peer and tag, after the memory plan gave the received values their
    // slots.
    pm.addPass(createStageTransfers());
  } else {
    pm.addPass(createMemoryPlan());
  }
  // Each bucket's all-reduce starts in the last microbatch's backward once
  // its gradients are complete, instead of at the optimizer. After the
  // memory plan (the last-microbatch copy of a backward runs in the
  // storage planned for the original) and the stage transfers (the copy
  // sends and receives as the original does). On the top-level module: a
  // pipeline rank's stages share their events.
  if (options.train && options.dataDegree > 1)
    pm.addPass(createOverlapGradients());
  // The phase contract of the per-rank form: local shapes, every crossing
  // an op, every send with its receive; a broken one fails here, naming
  // the stages, instead of hanging a job.
  pm.addPass(createVerifyPerRank());
  // The plan analysis reads what the IR does not say yet from these.
  auto setLayout = [&](auto &pass) {
    pass.globalBatch = options.globalBatch;
    pass.microbatches = options.microbatches;
    pass.dataDegree = options.dataDegree;
    pass.placement = options.placement;
    pass.backend = options.backend;
    pass.ratesFile = options.ratesFile;
  };
  // device_memory_gib: a plan that does not fit fails here, naming the worst
  // rank, before the emitter writes any file.
  CheckMemoryFitOptions fit;
  fit.deviceMemoryGib = options.deviceMemoryGib;
  fit.bucketElements = options.reduceBucketSize;
  setLayout(fit);
  pm.addPass(createCheckMemoryFit(fit));
  // Translation only: the IR has every decision by now.
  EmitProgramOptions emit;
  emit.outputDir = options.outputDir;
  emit.seed = options.seed;
  emit.device = options.device;
  emit.report = options.report;
  setLayout(emit);
  pm.addPass(createEmitProgram(emit));
}

void mlir::cleave::registerProgramPipeline() {
  PassPipelineRegistration<ProgramPipelineOptions>(
      "cleave-program-pipeline",
      "cleave-compile's passes, from an imported module to rank-<r>.pb "
      "(options as cleave-compile's spec keys)",
      buildProgramPipeline);
}
