// Tests of ZeRO-1 (--cleave-shard-optimizer-state) and ZeRO-3
// (--cleave-shard-parameters) after the tensor-parallel partition (issue 14:
// "combines with tensor parallelism"): the chunks are chunks of each
// tensor rank's local slice (fc.weight [32, 8] is [16, 8] per rank: 128
// elements, chunks of 64 over 2 data ranks), the clipping norm sums the
// tensor-replicated parameters' chunks over data only and the split ones'
// over data and then tensor (a replicated parameter counted once), the
// persistence threshold compares with the local slice (fc.weight's 256
// elements whole, 128 per rank: sharded under 100, whole under 200), and a
// gather gives the rank's slice, not the whole parameter.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks="data=2 tensor=2" --cleave-propagate-shardings="tensor=2 vocab=false" --cleave-partition-tensor --cleave-autodiff --cleave-optimizer=grad-clip=1.0 --cleave-shard-optimizer-state | FileCheck %s --check-prefix=ZERO1
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks="data=4 tensor=2 sharded-data=2" --cleave-propagate-shardings="tensor=2 vocab=false" --cleave-partition-tensor --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=axis=sharded_data replica-axis=data_replica" --cleave-shard-parameters=threshold=100 | FileCheck %s --check-prefix=ZERO3
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks="data=4 tensor=2 sharded-data=2" --cleave-propagate-shardings="tensor=2 vocab=false" --cleave-partition-tensor --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=axis=sharded_data replica-axis=data_replica" --cleave-shard-parameters=threshold=200 | FileCheck %s --check-prefix=WHOLE

cleave.parameter @wte.weight {init = "normal:0.02"} : tensor<16x8xf32>
cleave.parameter @ln.weight {init = "ones"} : tensor<8xf32>
cleave.parameter @ln.bias {init = "zeros"} : tensor<8xf32>
cleave.parameter @fc.weight {init = "normal:0.02"} : tensor<32x8xf32>
cleave.parameter @proj.weight {init = "normal:0.02"} : tensor<8x32xf32>

func.func @forward(%idx: tensor<2x4xi64>, %targets: tensor<2x4xi64>) -> tensor<f32> {
  %wte = cleave.get_param @wte.weight : tensor<16x8xf32>
  %x = cleave.embedding %wte, %idx : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %g = cleave.get_param @ln.weight : tensor<8xf32>
  %b = cleave.get_param @ln.bias : tensor<8xf32>
  %h = cleave.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %wfc = cleave.get_param @fc.weight : tensor<32x8xf32>
  %f0 = cleave.matmul %h, %wfc {transpose_rhs} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %f1 = cleave.gelu %f0 {approximate = "tanh"} : tensor<2x4x32xf32>
  %wp = cleave.get_param @proj.weight : tensor<8x32xf32>
  %m = cleave.matmul %f1, %wp {transpose_rhs} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  %y = cleave.add %x, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = cleave.reduce_mean %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// ZeRO-1 x tensor 2: every trained parameter's state over "data", the
// split ones' chunks cut from their local slice.
// ZERO1: cleave.parameter @fc.weight {cleave.full_type = tensor<32x8xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>, cleave.state_axis = "data"{{.*}}} : tensor<16x8xf32>
// ZERO1-LABEL: func.func @optimizer
// ZERO1: cleave.reduce_scatter_grads [@proj.weight, @fc.weight, @ln.bias, @ln.weight, @wte.weight] {group = "data"}
// ZERO1: %[[FC:.*]] = cleave.get_grad_shard @fc.weight : tensor<64xf32>
// ZERO1: %[[REPL:.*]] = cleave.sum_squares %{{.*}}, %{{.*}}, %{{.*}} : (tensor<64xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<f32>
// ZERO1-NEXT: %[[REPLD:.*]] = cleave.all_reduce %[[REPL]] {group = "data"}
// ZERO1-NEXT: %[[SPLIT:.*]] = cleave.sum_squares %[[FC]], %{{.*}} : (tensor<64xf32>, tensor<64xf32>) -> tensor<f32>
// ZERO1-NEXT: %[[SPLITD:.*]] = cleave.all_reduce %[[SPLIT]] {group = "data"}
// ZERO1-NEXT: %[[SPLITT:.*]] = cleave.all_reduce %[[SPLITD]] {group = "tensor"}
// ZERO1-NEXT: %[[NORM:.*]] = cleave.add %[[REPLD]], %[[SPLITT]]
// ZERO1: cleave.adamw @fc.weight, %[[FC]], %{{.*}} norm %[[NORM]] {{.*}} : tensor<64xf32>, tensor<i64>
// ZERO1: cleave.all_gather_params [@proj.weight, @fc.weight, @ln.bias, @ln.weight, @wte.weight] {group = "data"}

// Sharded 2 (MiCS: 2 groups) x tensor 2: the gathers give the local slice,
// the scatters cut it into chunks, the chunks are averaged over the groups
// and the norm crosses "tensor" once, after the group.
// ZERO3: cleave.parameter @ln.weight {cleave.state_axis = "sharded_data"{{.*}}} : tensor<8xf32>
// ZERO3: cleave.parameter @fc.weight {cleave.full_type = tensor<32x8xf32>, cleave.param_axis = "sharded_data", cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>, cleave.state_axis = "sharded_data"{{.*}}} : tensor<16x8xf32>
// ZERO3-LABEL: func.func @forward(
// ZERO3: cleave.gather_param @fc.weight : tensor<16x8xf32>
// ZERO3-LABEL: func.func @forward_backward(
// ZERO3: cleave.gather_param @fc.weight : tensor<16x8xf32>
// ZERO3: %[[C:.*]] = cleave.reduce_scatter %{{.*}} {axes = ["sharded_data"], dim = 0 : i64, reduce = "mean"} : tensor<128xf32> -> tensor<64xf32>
// ZERO3-NEXT: cleave.accumulate_grad @fc.weight, %[[C]] : tensor<64xf32>
// ZERO3-LABEL: func.func @optimizer
// ZERO3: cleave.reduce_scatter_grads [@ln.bias, @ln.weight] {group = "sharded_data"}
// ZERO3: cleave.get_grad_shard @fc.weight : tensor<64xf32>
// ZERO3-NEXT: cleave.all_reduce %{{.*}} {group = "data_replica", reduce = "mean"} : tensor<64xf32>
// ZERO3: %[[S:.*]] = cleave.sum_squares %{{.*}}, %{{.*}} : (tensor<64xf32>, tensor<64xf32>) -> tensor<f32>
// ZERO3-NEXT: %[[SD:.*]] = cleave.all_reduce %[[S]] {group = "sharded_data"}
// ZERO3-NEXT: cleave.all_reduce %[[SD]] {group = "tensor"}
// ZERO3: cleave.all_gather_params [@ln.bias, @ln.weight] {group = "sharded_data"}

// Threshold 200: the local slices (128) are below it, so nothing is
// sharded although fc.weight is 256 elements whole.
// WHOLE-NOT: cleave.param_axis
// WHOLE-NOT: cleave.gather_param
// WHOLE: cleave.all_gather_params [@proj.weight, @fc.weight, @ln.bias, @ln.weight, @wte.weight] {group = "sharded_data"}
