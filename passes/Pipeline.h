//===- Pipeline.h - the pass pipeline of cleave-compile --------*- C++ -*-===//
//
// The order of passes from an imported module to the per-rank programs, in
// one place, with its options declared once: cleave-compile fills them from
// the spec, and `cleave-opt --cleave-program-pipeline='...'` runs the same
// pipeline on a module (registered in registerProgramPipeline).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_PIPELINE_H
#define CLEAVE_PASSES_PIPELINE_H

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class OpPassManager;
}

namespace mlir::cleave {

struct ProgramPipelineOptions
    : public PassPipelineOptions<ProgramPipelineOptions> {
  Option<std::string> outputDir{*this, "output-dir",
                                llvm::cl::desc("folder the programs go to")};
  Option<int64_t> globalBatch{
      *this, "global-batch",
      llvm::cl::desc("samples per step (0: the batch of the inputs)"),
      llvm::cl::init(0)};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("microbatches per step"),
                               llvm::cl::init(1)};
  Option<int64_t> dataDegree{*this, "data-degree",
                             llvm::cl::desc("data-parallel ranks (ddp)"),
                             llvm::cl::init(1)};
  Option<bool> shardOptimizerState{
      *this, "shard-optimizer-state",
      llvm::cl::desc("ZeRO-1: split optimizer state over the data-parallel "
                     "ranks instead of averaging whole gradients"),
      llvm::cl::init(false)};
  Option<int64_t> shardedDegree{
      *this, "sharded-degree",
      llvm::cl::desc("sharded data parallelism (ZeRO-3): ranks each "
                     "parameter, gradient and optimizer state is split over "
                     "(1: off; today the whole data-parallel degree)"),
      llvm::cl::init(1)};
  Option<int64_t> paramPersistenceThreshold{
      *this, "param-persistence-threshold",
      llvm::cl::desc("sharded data parallelism: parameters with fewer "
                     "elements stay whole on every rank"),
      llvm::cl::init(1000000)};
  Option<int64_t> processesPerHost{
      *this, "processes-per-host",
      llvm::cl::desc("sharded data parallelism: ranks per host, for "
                     "hierarchical gathers (SMP's "
                     "sdp_hierarchical_allgather); 0 gathers flat"),
      llvm::cl::init(0)};
  Option<int64_t> maxLiveParameters{
      *this, "max-live-parameters",
      llvm::cl::desc("ZeRO-3: padded elements of gathered parameters live at "
                     "once, gathers started ahead within it (SMP's "
                     "sdp_max_live_parameters; 0: no prefetch)"),
      llvm::cl::init(1000000000)};
  Option<int64_t> prefetchDepth{
      *this, "prefetch-depth",
      llvm::cl::desc("ZeRO-3: each gather starts this many gathers ahead of "
                     "its reader, within max-live-parameters (spec key "
                     "sdp_prefetch_depth; 0: none)"),
      llvm::cl::init(1)};
  Option<int64_t> reduceBucketSize{
      *this, "reduce-bucket-size",
      llvm::cl::desc("ZeRO-3: padded gradient elements per started "
                     "reduce-scatter bucket (SMP's sdp_reduce_bucket_size; "
                     "0: one per parameter, synchronous)"),
      llvm::cl::init(500000000)};
  Option<int64_t> seed{*this, "seed",
                       llvm::cl::desc("seed of generated initial values"),
                       llvm::cl::init(0)};
  Option<bool> train{
      *this, "train",
      llvm::cl::desc("derive backward and add the optimizer (a model with a "
                     "loss trains)"),
      llvm::cl::init(true)};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("peak learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.0)};
  Option<double> gradClip{*this, "grad-clip",
                          llvm::cl::desc("max global gradient norm (0: none)"),
                          llvm::cl::init(0.0)};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.0)};
  Option<double> minLr{*this, "min-lr", llvm::cl::init(0.0)};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::init(0)};
  Option<int64_t> decaySteps{*this, "decay-steps", llvm::cl::init(0)};
  Option<std::string> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("\"\" (fp32), \"bf16\" or \"fp16\"")};
  Option<bool> dynamicLossScale{*this, "dynamic-loss-scale",
                                llvm::cl::init(false)};
  Option<double> initScale{*this, "initial-scale",
                           llvm::cl::init(4294967296.0)};
  Option<double> minScale{*this, "min-scale", llvm::cl::init(1.0)};
  Option<int64_t> scaleWindow{*this, "scale-window", llvm::cl::init(1000)};
  Option<int64_t> delayedShift{*this, "delayed-shift", llvm::cl::init(1)};
  Option<int64_t> pipelineDegree{
      *this, "pipeline-degree",
      llvm::cl::desc("pipeline ranks; stages = this x virtual-stages"),
      llvm::cl::init(1)};
  Option<int64_t> virtualStages{*this, "virtual-stages", llvm::cl::init(1)};
  Option<int64_t> tensorDegree{
      *this, "tensor-degree",
      llvm::cl::desc("tensor-parallel ranks (Megatron-LM's split, found by "
                     "sharding propagation)"),
      llvm::cl::init(1)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Megatron's sequence parallelism between the "
                     "tensor-parallel regions (tensor-degree > 1)"),
      llvm::cl::init(false)};
  Option<bool> splitTokenReads{
      *this, "split-token-reads",
      llvm::cl::desc("tensor-parallel ranks read their part of each "
                     "microbatch and all-gather the token ids "
                     "(prescaled_batch false; tensor-degree > 1)"),
      llvm::cl::init(false)};
  Option<int64_t> activeMicrobatches{*this, "active-microbatches",
                                     llvm::cl::init(0)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("simple, interleaved or "
                                              "interleaved_virtual"),
                               llvm::cl::init("interleaved")};
  ListOption<std::string> splitPoints{
      *this, "split-points",
      llvm::cl::desc("ONNX nodes that start stages 1.. (manual partition)")};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("spec activation_checkpointing: each, group_<k>, "
                     "contiguous, selective (empty: none)")};
  ListOption<std::string> rematLayers{
      *this, "remat-layers",
      llvm::cl::desc("spec activation_checkpointing_layers: ONNX node-name "
                     "prefixes, one a layer")};
  Option<bool> offload{
      *this, "offload",
      llvm::cl::desc("spec offload_activations: the checkpoints to host "
                     "memory (needs remat)"),
      llvm::cl::init(false)};
  Option<int64_t> offloadHorizon{
      *this, "offload-horizon",
      llvm::cl::desc("spec activation_loading_horizon"), llvm::cl::init(4)};
  Option<std::string> optimize{*this, "optimize",
                               llvm::cl::desc("speed or memory"),
                               llvm::cl::init("speed")};
  Option<double> memoryWeight{*this, "memory-weight", llvm::cl::init(0.8)};
  Option<std::string> backend{
      *this, "backend",
      llvm::cl::desc("whose checked-in rates the cost model uses (cpu, h100)"),
      llvm::cl::init("cpu")};
  Option<std::string> ratesFile{*this, "rates",
                                llvm::cl::desc("rates from cleave-calibrate")};
  Option<std::string> placement{
      *this, "placement",
      llvm::cl::desc("cluster, spread or an order of D, P, T"),
      llvm::cl::init("cluster")};
  Option<std::string> device{
      *this, "device",
      llvm::cl::desc("the backend the programs are for (cpu or cuda)"),
      llvm::cl::init("cpu")};
  Option<double> deviceMemoryGib{
      *this, "device-memory-gib",
      llvm::cl::desc("spec device_memory_gib: every rank's peak must fit (0: "
                     "no limit)"),
      llvm::cl::init(0.0)};
  Option<bool> report{*this, "report",
                      llvm::cl::desc("also write report.html"),
                      llvm::cl::init(false)};
};

/// import contract check -> mesh -> fusion -> mixed precision -> partition
/// -> autodiff -> optimizer -> data parallelism -> schedule -> memory plan
/// -> stage transfers -> per-rank contract -> memory fit -> program emission.
void buildProgramPipeline(OpPassManager &pm,
                          const ProgramPipelineOptions &options);

/// Registers `cleave-program-pipeline` for cleave-opt.
void registerProgramPipeline();

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PIPELINE_H
