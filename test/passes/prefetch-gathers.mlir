// Tests of --cleave-prefetch-gathers (ZeRO-3 prefetch) after
// --cleave-shard-parameters on 2 data ranks: three sharded weights read by
// three matmuls in a row. Each gather starts where the one before it was
// (depth 1): @w2's before the matmul that reads @w1, so that its transfer
// overlaps that matmul and the tanh; a wait_param goes just before each
// reader. The backward's first gather starts at its top, overlapping the
// loss gradient. The memory plan counts the earlier starts: more gathered
// bytes live at once (384 against 256 without the pass). With max-live =
// 64 elements (@w2's padded size) only @w1 fits ahead in the forward (@w2
// beside @w1 would be 96), the others stay synchronous. Errors: a negative
// depth or bound.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=0 --cleave-prefetch-gathers --cleave-memory-plan | FileCheck %s
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=0 --cleave-memory-plan | FileCheck %s --check-prefix=SYNC
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=0 --cleave-prefetch-gathers=max-live=64 | FileCheck %s --check-prefix=BOUND
// RUN: not cleave-opt %s --cleave-prefetch-gathers=depth=-1 2>&1 | FileCheck %s --check-prefix=DEPTH
// RUN: not cleave-opt %s --cleave-prefetch-gathers=max-live=-5 2>&1 | FileCheck %s --check-prefix=LIVE

cleave.parameter @w1 {init = "normal:0.02"} : tensor<4x8xf32>
cleave.parameter @w2 {init = "normal:0.02"} : tensor<8x8xf32>
cleave.parameter @w3 {init = "normal:0.02"} : tensor<8x4xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %f = cleave.cast %x : tensor<2x4xi64> -> tensor<2x4xf32>
  %w1 = cleave.get_param @w1 : tensor<4x8xf32>
  %h1 = cleave.matmul %f, %w1 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %a1 = cleave.tanh %h1 : tensor<2x8xf32>
  %w2 = cleave.get_param @w2 : tensor<8x8xf32>
  %h2 = cleave.matmul %a1, %w2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %a2 = cleave.tanh %h2 : tensor<2x8xf32>
  %w3 = cleave.get_param @w3 : tensor<8x4xf32>
  %h3 = cleave.matmul %a2, %w3 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %s = cleave.reduce_mean %h3 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK: module attributes {cleave.memory = {{{.*}}gathered_parameters = 384 : i64
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT: %[[W1:.*]] = cleave.gather_param @w1 event 1 {{.*}}: tensor<4x8xf32>
// CHECK-NEXT: %[[X:.*]] = cleave.cast
// CHECK-NEXT: cleave.wait_param %[[W1]] : tensor<4x8xf32>
// CHECK-NEXT: %[[W2:.*]] = cleave.gather_param @w2 event 2 {{.*}}: tensor<8x8xf32>
// CHECK-NEXT: %[[H1:.*]] = cleave.matmul %[[X]], %[[W1]]
// CHECK-NEXT: %[[A1:.*]] = cleave.tanh %[[H1]]
// CHECK-NEXT: cleave.wait_param %[[W2]] : tensor<8x8xf32>
// CHECK-NEXT: %[[W3:.*]] = cleave.gather_param @w3 event 3 {{.*}}: tensor<8x4xf32>
// CHECK-NEXT: %[[H2:.*]] = cleave.matmul %[[A1]], %[[W2]]
// CHECK-NEXT: %[[A2:.*]] = cleave.tanh %[[H2]]
// CHECK-NEXT: cleave.wait_param %[[W3]] : tensor<8x4xf32>
// CHECK-NEXT: cleave.matmul %[[A2]], %[[W3]]
// CHECK-LABEL: func.func @forward_backward(
// CHECK-NEXT: %[[B3:.*]] = cleave.gather_param @w3 event 4
// CHECK-NEXT: cleave.constant
// CHECK: cleave.wait_param %[[B3]] : tensor<8x4xf32>
// CHECK-NEXT: %[[B2:.*]] = cleave.gather_param @w2 event 5
// CHECK-NEXT: cleave.matmul %{{.*}}, %[[B3]]
// CHECK: cleave.wait_param %[[B2]] : tensor<8x8xf32>
// CHECK-NEXT: cleave.matmul %{{.*}}, %[[B2]]
// CHECK-LABEL: func.func @optimizer(
// CHECK-NOT: gather_param

// SYNC: module attributes {cleave.memory = {{{.*}}gathered_parameters = 256 : i64
// SYNC-NOT: wait_param

// BOUND-LABEL: func.func @forward(
// BOUND-NEXT: %[[W1:.*]] = cleave.gather_param @w1 event 1 : tensor<4x8xf32>
// BOUND-NEXT: cleave.cast
// BOUND-NEXT: cleave.wait_param %[[W1]]
// BOUND-NEXT: cleave.matmul
// BOUND-NEXT: cleave.tanh
// BOUND-NEXT: cleave.gather_param @w2 : tensor<8x8xf32>
// BOUND-NEXT: cleave.matmul
// BOUND-NEXT: cleave.tanh
// BOUND-NEXT: cleave.gather_param @w3 : tensor<8x4xf32>
// BOUND-NEXT: cleave.matmul

// DEPTH: cleave-prefetch-gathers: depth must not be negative, got -1
// LIVE: cleave-prefetch-gathers: max-live must not be negative, got -5
