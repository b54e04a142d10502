//===- Spec.h - the parallelism spec of cleave-compile ---------*- C++ -*-===//
//
// The JSON spec of DESIGN.md ("The spec"), keys named as SMP's
// smdistributed.modelparallel parameters. An SMP configuration is taken as
// written: the SMP v1 parameters, the SMP v2 dictionary, or the SageMaker
// estimator's whole `distribution` dictionary around either. Parsing checks
// every key, type and combination; keys whose feature Cleave does not
// implement yet are accepted only with their default value (any other value
// is an error that names the key), and keys that mean nothing to an
// ahead-of-time compiler are accepted with a note the plan carries.
// docs/spec-keys.md lists the three classes.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_FRONTEND_SPEC_H
#define CLEAVE_FRONTEND_SPEC_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave {

struct OptimizerSpec {
  std::string type = "adamw"; // "adamw" or "sgd"
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  double gradClip = 0.0; // 0: off
  double momentum = 0.0; // sgd
  // The learning rate of step i (from 0): lr * (i + 1) / warmupSteps while
  // i < warmupSteps; then, if decaySteps > 0, a cosine from lr down to minLr
  // reached at step decaySteps; else lr.
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0; // spec key lr_decay_steps; 0: no decay
  double minLr = 0.0;
};

/// A key that was accepted but changes nothing in the compiled plan (e.g.
/// SMP's `skip_tracing`); plan.json lists these under "notes".
struct SpecNote {
  std::string key;   // as the user wrote it ("mpi.custom_mpi_options")
  std::string value; // its JSON text
  std::string why;   // why it changes nothing
};

struct Spec {
  int64_t pipelineParallelDegree = 1;
  int64_t tensorParallelDegree = 1;
  int64_t shardedDataParallelDegree = 1;
  /// Sharded data parallelism: parameters with fewer elements stay whole.
  int64_t sdpParamPersistenceThreshold = 1000000;
  /// Sharded data parallelism: gather within a host first, then across
  /// hosts, when a sharding group spans hosts (needs processes_per_host).
  bool sdpHierarchicalAllgather = true;
  /// Sharded data parallelism: padded elements of gathered parameters live
  /// at once, gathers started ahead within it (SMP's default; 0: none).
  int64_t sdpMaxLiveParameters = 1000000000;
  /// Sharded data parallelism: each gather starts this many gathers ahead
  /// of its reader, within sdpMaxLiveParameters (Cleave's key; 0: none).
  int64_t sdpPrefetchDepth = 1;
  /// Sharded data parallelism: padded gradient elements per started
  /// reduce-scatter bucket (SMP's default; 0: one per parameter, at once).
  int64_t sdpReduceBucketSize = 500000000;
  int64_t microbatches = 1;
  int64_t activeMicrobatches = 0; // 0: as many as microbatches
  std::string pipeline = "interleaved";
  int64_t virtualPipelineDegree = 1;
  bool ddp = false;
  bool shardOptimizerState = false;
  std::string activationCheckpointing; // "" = none
  /// ONNX node-name prefixes, one a layer (activation_checkpointing_layers).
  std::vector<std::string> activationCheckpointingLayers;
  bool offloadActivations = false;
  /// Segments ahead of its backward that a checkpoint is fetched back
  /// (activation_loading_horizon); with offloadActivations.
  int64_t activationLoadingHorizon = 4;
  bool bf16 = false, fp16 = false;
  /// fp16 dynamic loss scaling (SMP's DistributedOptimizer arguments).
  bool dynamicLossScale = false;
  double initScale = 4294967296.0; // 2^32
  int64_t scaleWindow = 1000;
  double minScale = 1;
  int64_t delayedShift = 1;
  bool delayedParameterInitialization = false;
  std::string placementStrategy = "cluster";
  /// Pipeline partition: by the cost model (`optimize` "speed" balances
  /// time, "memory" balances memory, `memory_weight` mixes the two), or at
  /// `partition_points`: the ONNX node names where stages 1..p-1 begin.
  bool autoPartition = true;
  std::string optimize = "speed";
  double memoryWeight = 0.8;
  std::vector<std::string> partitionPoints;
  int64_t defaultPartition = 0;
  int64_t processesPerHost = 0; // 0: unknown
  std::string device = "cpu";
  double deviceMemoryGib = 0; // 0: no limit checked
  std::optional<int64_t> batchSize; // the global batch
  bool prescaledBatch = false;
  /// Megatron's sequence parallelism (docs/tensor-parallel.md); false
  /// whenever tensorParallelDegree is 1 (a note says it was ignored).
  bool sequenceParallel = false;
  OptimizerSpec optimizer;
  /// Glob patterns of initializers not to train (buffers an export turned
  /// into initializers, such as rotary tables).
  std::vector<std::string> frozenParameters;
  int64_t seed = 0;
  /// tensor_parallel_seed with tensor_parallel_degree > 1: the seed of the
  /// generated initialization of the tensor-split parameters (dropout is
  /// keyed by 'seed' in every layout, docs/dropout.md); absent: 'seed'.
  std::optional<int64_t> tensorParallelSeed;
  int64_t worldSize = 1;
  std::vector<SpecNote> notes;
};

/// Parses a spec from JSON text; `source` names it in errors. `overrides`
/// are `--set key=value` (the value is JSON, or else a string).
llvm::Expected<Spec> parseSpec(llvm::StringRef json, llvm::StringRef source,
                               const std::vector<std::string> &overrides);

/// Reads and parses a spec file.
llvm::Expected<Spec> readSpec(llvm::StringRef path,
                              const std::vector<std::string> &overrides);

/// What the machine that compiles (and, alike, each that runs a program)
/// has room for, and what one schedule entry costs in its memory.
struct HostLimits {
  uint64_t freeDiskBytes = 0; // at the output folder
  uint64_t memoryBytes = 0;   // physical memory
  uint64_t scheduleEntryBytes = 0; // one program.proto Step, as held in memory
};

/// Lower bounds of the programs' size that need no model: every rank's
/// program lists the ranks of its data-parallel group and has a forward
/// and a backward schedule entry per microbatch and virtual stage.
uint64_t scheduleEntriesPerProgram(const Spec &spec);
uint64_t programBytesLowerBound(const Spec &spec); // all ranks, encoded

/// Refuses, before anything is read or written, programs that cannot fit the
/// output folder's free space or one program that cannot fit the memory of
/// the machine that builds it (cleave-run holds the same): world_size 10^6
/// would write terabytes, 10^9 microbatches a schedule of billions of steps.
/// The error names the key that makes them large.
llvm::Error checkProgramsFit(const Spec &spec, const HostLimits &limits,
                             llvm::StringRef folder);

/// The batch each rank's function runs: the global batch over data ranks
/// and microbatches. `exportedBatch` is the ONNX model's static batch, if
/// it has one. The error says which batch size and microbatch count fit.
llvm::Expected<int64_t> microbatchSize(const Spec &spec,
                                       std::optional<int64_t> exportedBatch);

} // namespace cleave

#endif // CLEAVE_FRONTEND_SPEC_H
