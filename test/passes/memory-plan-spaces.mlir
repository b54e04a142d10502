// The memory plan sizes one arena per memory space: a value whose op
// carries cleave.memory_space<host> (activation offload) takes space in the
// host arena, from offset 0, and leaves the device arena; the module's
// cleave.memory has each space's activations, which plan.json shows as
// predicted_activations_by_space. The emitter writes a host arena, but
// refuses a kernel that writes host memory: only cleave.offload does
// (offload-activations.mlir, the pass that makes them).
// RUN: cleave-opt %s --cleave-memory-plan | FileCheck %s
// RUN: cleave-opt %s --cleave-memory-plan | cleave-opt --cleave-memory-plan | FileCheck %s
// RUN: not cleave-opt %s --cleave-memory-plan --cleave-pipeline-schedule "--cleave-emit-program=output-dir=%t" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMIT

// Device: input 128 at 0; activations from 128: %0 (128) and %2 (128) are
// live together (256). Host: %1 (128) alone.
// CHECK: cleave.memory = {activations = 256 : i64, {{.*}}arena_bytes = 384 : i64, {{.*}}device_activations = 256 : i64, {{.*}}host_activations = 128 : i64, host_arena_bytes = 128 : i64, {{.*}}peak_bytes = 384 : i64
// EMIT: error: loc("/offloaded"): only cleave.offload writes host memory; the runtime's kernels read and write the device's

// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: cleave.exp {{.*}}cleave.offsets = array<i64: 128>
  %0 = cleave.exp %x : tensor<4x8xf32> loc("/exp")
  // CHECK: cleave.exp {{.*}}cleave.offsets = array<i64: 0>
  %1 = cleave.exp %0 {cleave.memory_space = #cleave.memory_space<host>} : tensor<4x8xf32> loc("/offloaded")
  // CHECK: cleave.add {{.*}}cleave.offsets = array<i64: 256>
  %2 = cleave.add %0, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/add")
  return %2 : tensor<4x8xf32>
}
