// --cleave-prefetch-gathers on hierarchical gathers (SMP's
// sdp_hierarchical_allgather): 4 data ranks in one sharding group, 2 a host,
// three sharded weights read by three matmuls in a row (as in
// prefetch-gathers.mlir; each 64 padded elements). Each gather's second hop
// (across hosts) starts where a flat gather would (one gather ahead), and
// its first hop (within the host) one gather earlier still: @w2's first hop
// at the function's top, before the cast; the cleave.gather_next_hop that
// waits for it and starts the second just before the matmul that reads
// @w1; @w3's first hop there too, its second before the matmul that reads
// @w2. @w1, whose start is already the top, starts both hops there. The
// memory plan counts each gather's space from its first hop: three
// gathered weights live at once (768 bytes) where the flat prefetch has
// two. With max-live = 128 elements (two padded weights) @w3's first hop
// does not fit beside @w1 and @w2, and both its hops start where a flat
// gather's would.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=4 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0 processes-per-host=2" --cleave-prefetch-gathers --cleave-memory-plan | FileCheck %s
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=4 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0 processes-per-host=2" --cleave-prefetch-gathers=max-live=128 | FileCheck %s --check-prefix=BOUND

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

// CHECK: module attributes {cleave.memory = {{{.*}}gathered_parameters = 768 : i64
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT: %[[W1:.*]] = cleave.gather_param @w1 event 1 {{.*}}gather_per_host = 2
// CHECK-NEXT: %[[W2:.*]] = cleave.gather_param @w2 event 2 {{.*}}gather_per_host = 2
// CHECK-NEXT: %[[X:.*]] = cleave.cast
// CHECK-NEXT: cleave.wait_param %[[W1]] : tensor<4x8xf32>
// CHECK-NEXT: cleave.gather_next_hop %[[W2]] : tensor<8x8xf32>
// CHECK-NEXT: %[[W3:.*]] = cleave.gather_param @w3 event 3 {{.*}}gather_per_host = 2
// CHECK-NEXT: %[[H1:.*]] = cleave.matmul %[[X]], %[[W1]]
// CHECK-NEXT: %[[A1:.*]] = cleave.tanh %[[H1]]
// CHECK-NEXT: cleave.wait_param %[[W2]] : tensor<8x8xf32>
// CHECK-NEXT: cleave.gather_next_hop %[[W3]] : tensor<8x4xf32>
// CHECK-NEXT: %[[H2:.*]] = cleave.matmul %[[A1]], %[[W2]]
// CHECK-NEXT: %[[A2:.*]] = cleave.tanh %[[H2]]
// CHECK-NEXT: cleave.wait_param %[[W3]] : tensor<8x4xf32>
// CHECK-NEXT: cleave.matmul %[[A2]], %[[W3]]
// CHECK-LABEL: func.func @forward_backward(
// CHECK: cleave.gather_next_hop

// BOUND-LABEL: func.func @forward(
// BOUND-NEXT: %[[W1:.*]] = cleave.gather_param @w1 event 1
// BOUND-NEXT: %[[W2:.*]] = cleave.gather_param @w2 event 2
// BOUND-NEXT: %[[X:.*]] = cleave.cast
// BOUND-NEXT: cleave.wait_param %[[W1]]
// BOUND-NEXT: cleave.gather_next_hop %[[W2]]
// BOUND-NEXT: cleave.matmul
// BOUND-NEXT: cleave.tanh
// BOUND-NEXT: cleave.wait_param %[[W2]]
// BOUND-NEXT: cleave.gather_param @w3 event 3
// BOUND-NOT: gather_next_hop %
// BOUND: cleave.wait_param
