// Tests of --cleave-check-memory-fit: a plan whose ranks exceed the device
// is refused naming the worst rank (the largest predicted peak), not the
// first one over, with its largest category and the spec key that shrinks
// it. Two stages on a 2 x 2 data x pipeline mesh; stage 1 is the larger.
// cluster (DPT): rank = 2d + p, so stage 1 is on ranks 1 and 3;
// spread (TPD): rank = 2p + d, so stage 1 is on ranks 2 and 3.
// RUN: not cleave-opt %s -split-input-file "--cleave-check-memory-fit=device-memory-gib=0.001 data-degree=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not cleave-opt %s -split-input-file "--cleave-check-memory-fit=device-memory-gib=0.001 data-degree=2 microbatches=2 placement=spread" 2>&1 | FileCheck %s --check-prefix=SPREAD
// RUN: cleave-opt %s -split-input-file "--cleave-check-memory-fit=device-memory-gib=1 data-degree=2 microbatches=2" | FileCheck %s --check-prefix=FITS
// RUN: cleave-opt %s -split-input-file --cleave-check-memory-fit | FileCheck %s --check-prefix=FITS
// Not planned yet (emit-program.mlir's input): the plan cannot be read.
// RUN: not cleave-opt %S/emit-program.mlir --cleave-check-memory-fit=device-memory-gib=1 2>&1 | FileCheck %s --check-prefix=UNPLANNED
// UNPLANNED: error: the module has no memory plan; run cleave-memory-plan first

// CLUSTER: error: spec key 'device_memory_gib': rank 1 needs 3.00 MiB (its plan), more than the 0.001 GiB of the device; its largest part is parameters (2.00 MiB): raise 'pipeline_parallel_degree'
// CLUSTER: note: 4 of the 4 ranks exceed it; rank 1 needs the most
// SPREAD: error: spec key 'device_memory_gib': rank 2 needs 3.00 MiB

// FITS: module @stage0
// FITS: module @stage1
module attributes {
    cleave.pipeline = {kind = "simple", ranks = 2 : i64, microbatches = 2 : i64,
                       active_microbatches = 0 : i64, virtual_stages = 1 : i64,
                       theoretical_bubble = 0.33333333333333331 : f64,
                       link_bytes_per_second = 1.0e+09 : f64,
                       link_latency_seconds = 1.0e-06 : f64},
    cleave.schedule = [array<i64: 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1>,
                       array<i64: 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1>]} {
  module @stage0 attributes {
      cleave.stage = 0 : i64, cleave.stages = 2 : i64,
      cleave.forward_seconds = 1.0e-03 : f64, cleave.backward_seconds = 2.0e-03 : f64,
      cleave.memory = {peak_bytes = 2097152 : i64, arena_bytes = 2097152 : i64,
                       parameters = 524288 : i64, gradients = 524288 : i64,
                       optimizer_state = 0 : i64, activations = 1048576 : i64,
                       workspace = 0 : i64, constants = 0 : i64, io = 0 : i64,
                       slots = 2 : i64}} {
  }
  module @stage1 attributes {
      cleave.stage = 1 : i64, cleave.stages = 2 : i64,
      cleave.forward_seconds = 1.0e-03 : f64, cleave.backward_seconds = 2.0e-03 : f64,
      cleave.memory = {peak_bytes = 3145728 : i64, arena_bytes = 3145728 : i64,
                       parameters = 2097152 : i64, gradients = 524288 : i64,
                       optimizer_state = 0 : i64, activations = 524288 : i64,
                       workspace = 0 : i64, constants = 0 : i64, io = 0 : i64,
                       slots = 2 : i64}} {
  }
}

// -----

// A module with a mesh places its ranks by the mesh (first axis slowest),
// whatever the placement option says: pipeline x data puts stage 1 on
// ranks 2 and 3. One stage: a module without stage modules is rank 0's.
// CLUSTER: error: spec key 'device_memory_gib': rank 2 needs 3.00 MiB
// SPREAD: error: spec key 'device_memory_gib': rank 2 needs 3.00 MiB
module attributes {
    cleave.mesh = #cleave.mesh<["pipeline"=2, "data"=2, "tensor"=1]>,
    cleave.pipeline = {kind = "simple", ranks = 2 : i64, microbatches = 2 : i64,
                       active_microbatches = 0 : i64, virtual_stages = 1 : i64,
                       theoretical_bubble = 0.33333333333333331 : f64,
                       link_bytes_per_second = 1.0e+09 : f64,
                       link_latency_seconds = 1.0e-06 : f64},
    cleave.schedule = [array<i64: 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1>,
                       array<i64: 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1>]} {
  module @stage0 attributes {
      cleave.stage = 0 : i64, cleave.stages = 2 : i64,
      cleave.memory = {peak_bytes = 2097152 : i64, activations = 1048576 : i64,
                       parameters = 524288 : i64}} {
  }
  module @stage1 attributes {
      cleave.stage = 1 : i64, cleave.stages = 2 : i64,
      cleave.memory = {peak_bytes = 3145728 : i64, activations = 2097152 : i64,
                       parameters = 524288 : i64}} {
  }
}

// -----

// One stage, the activations largest: the advice is the batch's.
// CLUSTER: error: spec key 'device_memory_gib': rank 0 needs 2.00 MiB (its plan), more than the 0.001 GiB of the device; its largest part is activations (1.50 MiB): lower 'batch_size' or raise 'microbatches' (or 'pipeline_parallel_degree')
// CLUSTER: note: 2 of the 2 ranks exceed it; rank 0 needs the most
module attributes {
    cleave.memory = {peak_bytes = 2097152 : i64, activations = 1572864 : i64,
                     parameters = 524288 : i64}} {
}
