// Tests of --cleave-memory-plan: parameters first, then inputs and constants
// (live all step), then activations reusing space freed after last use.
// RUN: cleave-opt %s --cleave-memory-plan | FileCheck %s
// RUN: cleave-opt %s --cleave-memory-plan=alignment=256 | FileCheck %s --check-prefix=ALIGN
// RUN: not cleave-opt %s --cleave-memory-plan=alignment=48 2>&1 | FileCheck %s --check-prefix=BADALIGN

// The plan's totals are on the module (one arena for all its functions).
// CHECK: module attributes {cleave.memory = {activations = 1280 : i64, alignment = 64 : i64, arena_bytes = 2176 : i64, constants = 64 : i64, device_activations = 1280 : i64, gradients = 0 : i64, host_activations = 0 : i64, host_arena_bytes = 0 : i64, io = 256 : i64, optimizer_state = 0 : i64, parameters = 576 : i64, peak_bytes = 2176 : i64, workspace = 0 : i64}}
// 16x8 f32 = 512 bytes; 8 f32 = 32 bytes, padded to 64.
// CHECK: cleave.parameter @w {cleave.offset = 0 : i64} : tensor<16x8xf32>
// CHECK: cleave.parameter @b {cleave.offset = 512 : i64} : tensor<8xf32>
cleave.parameter @w : tensor<16x8xf32>
cleave.parameter @b : tensor<8xf32>

// The input after the parameters (576), the constant after it (576 + 256).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: {cleave.offset = 576 : i64}
func.func @forward(%x: tensor<4x16xf32>) -> tensor<f32> {
  // CHECK: cleave.constant {cleave.offsets = array<i64: 832>}
  %c = cleave.constant dense<2.0> : tensor<f32> loc("/c")
  // get_param reads the parameter's storage: no offsets.
  // CHECK: cleave.get_param @w :
  %w = cleave.get_param @w : tensor<16x8xf32> loc("/w")
  // Activations start at 896. %0: 128 bytes at 896.
  // CHECK: cleave.matmul {{.*}} {cleave.offsets = array<i64: 896>}
  %0 = cleave.matmul %x, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32> loc("/mm")
  %b = cleave.get_param @b : tensor<8xf32> loc("/b")
  // %1 while %0 is live: 1024.
  // CHECK: cleave.add {{.*}} {cleave.offsets = array<i64: 1024>}
  %1 = cleave.add %0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("/add")
  // %0 is dead after the add; %2 (512 bytes) does not fit its 128-byte hole,
  // so it goes on top: 1152.
  // CHECK: cleave.broadcast_to {{.*}} {cleave.offsets = array<i64: 1152>}
  %2 = cleave.broadcast_to %1 : tensor<4x8xf32> -> tensor<4x4x8xf32> loc("/bc")
  // %1 is dead now, its space merged with %0's: a 256-byte hole at 896,
  // too small for %3 (512 bytes), which goes on top at 1664.
  // CHECK: cleave.mul {{.*}} {cleave.offsets = array<i64: 1664>}
  %3 = cleave.mul %2, %c : (tensor<4x4x8xf32>, tensor<f32>) -> tensor<4x4x8xf32> loc("/mul")
  // The scalar fits the hole: 896. Peak of activations: 1664 + 512 - 896.
  // CHECK: cleave.reduce_sum {{.*}} {axes = array<i64: 0, 1, 2>, cleave.offsets = array<i64: 896>, keepdims = false}
  %4 = cleave.reduce_sum %3 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<4x4x8xf32> -> tensor<f32> loc("/sum")
  return %4 : tensor<f32>
}

// ALIGN: alignment = 256 : i64
// ALIGN: cleave.parameter @b {cleave.offset = 512 : i64}
// BADALIGN: cleave-memory-plan: alignment must be a power of two, got 48
