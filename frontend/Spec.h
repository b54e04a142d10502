//===- Spec.h - the parallelism spec of cleave-compile ---------*- C++ -*-===//
//
// The JSON spec of DESIGN.md ("The spec"), keys named as SMP's
// smdistributed.modelparallel parameters. Parsing checks every key, type
// and combination; keys whose feature Cleave does not implement yet are
// accepted only with their default value, any other value is an error that
// names the key.
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

struct Spec {
  int64_t pipelineParallelDegree = 1;
  int64_t tensorParallelDegree = 1;
  int64_t shardedDataParallelDegree = 1;
  int64_t microbatches = 1;
  int64_t activeMicrobatches = 0; // 0: as many as microbatches
  std::string pipeline = "interleaved";
  int64_t virtualPipelineDegree = 1;
  bool ddp = false;
  bool shardOptimizerState = false;
  std::string activationCheckpointing; // "" = none
  bool offloadActivations = false;
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
  OptimizerSpec optimizer;
  /// Glob patterns of initializers not to train (buffers an export turned
  /// into initializers, such as rotary tables).
  std::vector<std::string> frozenParameters;
  int64_t seed = 0;
  int64_t worldSize = 1;
};

/// Parses a spec from JSON text; `source` names it in errors. `overrides`
/// are `--set key=value` (the value is JSON, or else a string).
llvm::Expected<Spec> parseSpec(llvm::StringRef json, llvm::StringRef source,
                               const std::vector<std::string> &overrides);

/// Reads and parses a spec file.
llvm::Expected<Spec> readSpec(llvm::StringRef path,
                              const std::vector<std::string> &overrides);

/// The batch each rank's function runs: the global batch over data ranks
/// and microbatches. `exportedBatch` is the ONNX model's static batch, if
/// it has one. The error says which batch size and microbatch count fit.
llvm::Expected<int64_t> microbatchSize(const Spec &spec,
                                       std::optional<int64_t> exportedBatch);

} // namespace cleave

#endif // CLEAVE_FRONTEND_SPEC_H
