// Tests of --cleave-shard-parameters (sharded data parallelism, ZeRO-3 /
// MiCS) after --cleave-shard-optimizer-state, on 4 data ranks in 2 groups
// of 2 (the mesh's data axis split into data_replica x sharded_data): @w
// (32 elements, at least the threshold of 16) keeps one chunk of itself and
// of its gradient and is gathered just before the matmul that reads it;
// its gradient is flattened, reduce-scattered in the group and accumulated
// into the chunk in the backward; the optimizer averages the chunks over
// the groups (the second hop) and all-gathers only @b (8 elements, kept
// whole). The memory plan gives @w chunk-sized parameter and gradient
// buffers and counts the gathered bytes. Errors: a negative threshold.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks="data=4 sharded-data=2" --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=axis=sharded_data replica-axis=data_replica" --cleave-shard-parameters=threshold=16 --cleave-memory-plan | FileCheck %s
// RUN: not cleave-opt %s --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE

cleave.parameter @w {init = "normal:0.02"} : tensor<4x8xf32>
cleave.parameter @b {init = "zeros"} : tensor<8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4x8xf32>
  %f = cleave.cast %x : tensor<2x4xi64> -> tensor<2x4xf32>
  %y = cleave.matmul %f, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %b = cleave.get_param @b : tensor<8xf32>
  %z = cleave.add %y, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s = cleave.reduce_mean %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK: module attributes {cleave.memory = {{{.*}}gathered_parameters = 128 : i64, gradients = 192 : i64{{.*}}parameters = 192 : i64{{.*}}}, cleave.mesh = #cleave.mesh<["data_replica"=2, "sharded_data"=2, "pipeline"=1, "tensor"=1]>}
// CHECK: cleave.parameter @w {cleave.grad_offset = 192 : i64, cleave.offset = 0 : i64, cleave.param_axis = "sharded_data", cleave.state_axis = "sharded_data"
// CHECK: cleave.parameter @b {cleave.grad_offset = 256 : i64, cleave.offset = 64 : i64, cleave.state_axis = "sharded_data"
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT: %[[X:.*]] = cleave.cast
// CHECK-NEXT: %[[W:.*]] = cleave.gather_param @w {cleave.offsets = {{.*}}} : tensor<4x8xf32>
// CHECK-NEXT: cleave.matmul %[[X]], %[[W]]
// CHECK-NEXT: cleave.get_param @b
// CHECK-LABEL: func.func @forward_backward(
// CHECK: cleave.accumulate_grad @b, %{{.*}} : tensor<8xf32>
// CHECK: %[[DW:.*]] = cleave.matmul
// CHECK-NEXT: %[[FLAT:.*]] = cleave.reshape %[[DW]] {{.*}} : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[CHUNK:.*]] = cleave.reduce_scatter %[[FLAT]] {axes = ["sharded_data"], {{.*}}dim = 0 : i64, reduce = "mean"} : tensor<32xf32> -> tensor<16xf32>
// CHECK-NEXT: cleave.accumulate_grad @w, %[[CHUNK]] : tensor<16xf32>
// CHECK-LABEL: func.func @optimizer(
// CHECK-NEXT: cleave.reduce_scatter_grads [@b] {group = "sharded_data"}
// CHECK-NEXT: %[[GW:.*]] = cleave.get_grad_shard @w : tensor<16xf32>
// CHECK-NEXT: %[[MW:.*]] = cleave.all_reduce %[[GW]] {{{.*}}group = "data_replica", reduce = "mean"} : tensor<16xf32>
// CHECK-NEXT: %[[GB:.*]] = cleave.get_grad_shard @b : tensor<16xf32>
// CHECK-NEXT: %[[MB:.*]] = cleave.all_reduce %[[GB]] {{{.*}}group = "data_replica", reduce = "mean"} : tensor<16xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.sum_squares %[[MW]], %[[MB]]
// CHECK-NEXT: %[[N:.*]] = cleave.all_reduce %[[S]] {{{.*}}group = "sharded_data"} : tensor<f32>
// CHECK-NEXT: cleave.adamw @w, %[[MW]]
// CHECK-NEXT: cleave.adamw @b, %[[MB]]
// CHECK-NEXT: cleave.all_gather_params [@b] {group = "sharded_data"}
// CHECK-NEXT: return

// NEGATIVE: cleave-shard-parameters: threshold must not be negative, got -1
