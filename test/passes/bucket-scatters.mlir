// Tests of --cleave-bucket-scatters (sharded data parallelism's gradient
// buckets, SMP's sdp_reduce_bucket_size) after --cleave-shard-parameters
// on 2 data ranks: the backward makes @w3's gradient (32 padded elements),
// then @w2's (64), then @w1's (32). With buckets of 96 elements @w3 and @w2
// share one: each padded gradient viewed as [2, chunk], joined along the
// chunks and flattened, reduce-scattered once, started (cleave.event) right
// after @w2's gradient is made and waited for where the next bucket (@w1
// alone) starts; the chunks are sliced apart for their accumulations. The
// memory plan keeps a bucket's input and result from its start to its wait.
// With bucket-elements=0 nothing changes. Errors: a negative size.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=0 --cleave-bucket-scatters=bucket-elements=96 --cleave-memory-plan | FileCheck %s
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=0 --cleave-bucket-scatters=bucket-elements=0 | FileCheck %s --check-prefix=OFF
// RUN: not cleave-opt %s --cleave-bucket-scatters=bucket-elements=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE

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

// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[F3:.*]] = cleave.reshape %{{.*}} : tensor<8x4xf32> -> tensor<32xf32>
// CHECK: %[[F2:.*]] = cleave.reshape %{{.*}} : tensor<8x8xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[R3:.*]] = cleave.reshape %[[F3]] {{.*}}: tensor<32xf32> -> tensor<2x16xf32>
// CHECK-NEXT: %[[R2:.*]] = cleave.reshape %[[F2]] {{.*}}: tensor<64xf32> -> tensor<2x32xf32>
// CHECK-NEXT: %[[J:.*]] = cleave.concat %[[R3]], %[[R2]] {axis = 1 : i64, {{.*}}} : (tensor<2x16xf32>, tensor<2x32xf32>) -> tensor<2x48xf32>
// CHECK-NEXT: %[[IN:.*]] = cleave.reshape %[[J]] {{.*}}: tensor<2x48xf32> -> tensor<96xf32>
// CHECK-NEXT: %[[C:.*]] = cleave.reduce_scatter %[[IN]] {axes = ["data"], cleave.event = 1 : i64, {{.*}}reduce = "mean"} : tensor<96xf32> -> tensor<48xf32>
// CHECK-NEXT: cleave.mul
// CHECK: %[[F1:.*]] = cleave.reshape %{{.*}} : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: cleave.wait_scatter %[[C]], %[[IN]] : tensor<48xf32>, tensor<96xf32>
// CHECK-NEXT: %[[S3:.*]] = cleave.slice %[[C]] {{{.*}}limit = array<i64: 16>, start = array<i64: 0>, step = array<i64: 1>} : tensor<48xf32> -> tensor<16xf32>
// CHECK-NEXT: cleave.accumulate_grad @w3, %[[S3]] : tensor<16xf32>
// CHECK-NEXT: %[[S2:.*]] = cleave.slice %[[C]] {{{.*}}limit = array<i64: 48>, start = array<i64: 16>, step = array<i64: 1>} : tensor<48xf32> -> tensor<32xf32>
// CHECK-NEXT: cleave.accumulate_grad @w2, %[[S2]] : tensor<32xf32>
// CHECK-NEXT: %[[C1:.*]] = cleave.reduce_scatter %[[F1]] {axes = ["data"], cleave.event = 2 : i64, {{.*}}} : tensor<32xf32> -> tensor<16xf32>
// CHECK-NEXT: cleave.wait_scatter %[[C1]], %[[F1]] : tensor<16xf32>, tensor<32xf32>
// CHECK-NEXT: cleave.accumulate_grad @w1, %[[C1]] : tensor<16xf32>
// CHECK-NEXT: return

// OFF-LABEL: func.func @forward_backward(
// OFF-NOT: wait_scatter
// OFF: cleave.reduce_scatter %{{.*}} {axes = ["data"], dim = 0 : i64, reduce = "mean"} : tensor<32xf32> -> tensor<16xf32>
// OFF-NEXT: cleave.accumulate_grad @w3
// OFF-NOT: wait_scatter

// NEGATIVE: cleave-bucket-scatters: bucket-elements must not be negative, got -1
