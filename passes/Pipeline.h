//===- Pipeline.h - the pass pipeline of cleave-compile --------*- C++ -*-===//
//
// The order of passes from an imported module to the per-rank program, in
// one place, so cleave-compile stays a thin tool and tests can build the
// same pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_PIPELINE_H
#define CLEAVE_PASSES_PIPELINE_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
}

namespace mlir::cleave {

struct ProgramPipelineOptions {
  std::string outputDir;
  int64_t globalBatch = 0;
  int64_t microbatches = 1;
  int64_t dataDegree = 1; // data-parallel ranks (ddp)
  int64_t seed = 0;
  /// Derive backward and add the optimizer (a model with a loss trains).
  bool train = true;
  std::string optimizer = "adamw"; // or "sgd"
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0, gradClip = 0, momentum = 0, minLr = 0;
  int64_t warmupSteps = 0, decaySteps = 0;
  /// "" (fp32), "bf16" or "fp16"; fp16 may scale its loss dynamically.
  std::string mixedPrecision;
  bool dynamicLossScale = false;
  double initScale = 4294967296.0, minScale = 1;
  int64_t scaleWindow = 1000, delayedShift = 1;
  /// Pipeline parallelism: stages = pipelineDegree x virtualStages.
  int64_t pipelineDegree = 1, virtualStages = 1, activeMicrobatches = 0;
  std::string schedule = "interleaved";
  std::vector<std::string> splitPoints; // manual partition
  std::string optimize = "speed";
  double memoryWeight = 0.8;
  std::string backend = "cpu"; // whose checked-in rates the cost model uses
  std::string ratesFile;       // or rates from cleave-calibrate
  std::string placement = "cluster";
  std::string device = "cpu"; // the backend the programs are for (spec `device`)
  double deviceMemoryGib = 0; // spec `device_memory_gib`; 0: no limit
  bool report = false;        // also write report.html
};

/// import contract check -> fusion -> mixed precision -> autodiff -> optimizer -> memory plan
/// -> memory-fit check -> program emission.
void buildProgramPipeline(OpPassManager &pm,
                          const ProgramPipelineOptions &options);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PIPELINE_H
