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

namespace mlir {
class OpPassManager;
}

namespace mlir::cleave {

struct ProgramPipelineOptions {
  std::string outputDir;
  int64_t globalBatch = 0;
  int64_t microbatches = 1;
  int64_t seed = 0;
};

/// import contract check -> fusion -> memory plan -> program emission.
void buildProgramPipeline(OpPassManager &pm,
                          const ProgramPipelineOptions &options);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PIPELINE_H
