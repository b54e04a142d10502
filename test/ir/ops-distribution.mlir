// Round-trip of the distribution words: the mesh, shardings, memory spaces,
// collectives over mesh axes, point-to-point transfers, and the start/wait
// forms. (Beside ops.mlir rather than in it, so that the two grow apart.)
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// CHECK: module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2, "tensor"=2, "sharded_data"=1]>}
module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2, "tensor"=2, "sharded_data"=1]>} {

// A fused QKV weight split by heads: 3 blocks, each split over tensor; a
// key/value projection over a sub-axis of tensor (as with more ranks than
// key/value heads).
// CHECK: cleave.parameter @qkv {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<24x8xf32>
// CHECK: cleave.parameter @wk {cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<4x8xf32>

// A column-parallel weight, a row-parallel one, a replicated bias in host
// memory.
// CHECK: cleave.parameter @w_up {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<8x32xf32>
// CHECK: cleave.parameter @w_down {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x8xf32>
// CHECK: cleave.parameter @b {cleave.memory_space = #cleave.memory_space<host>} : tensor<8xf32>
cleave.parameter @qkv {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<24x8xf32>
cleave.parameter @wk {cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<4x8xf32>
cleave.parameter @w_up {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<8x32xf32>
cleave.parameter @w_down {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x8xf32>
cleave.parameter @b {cleave.memory_space = #cleave.memory_space<host>} : tensor<8xf32>

// Shardings on arguments, results and op results; a dimension split over
// two axes (major to minor); a partial sum over the tensor axis.
// CHECK-LABEL: func.func @shardings
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32> {cleave.sharding = #cleave.sharding<[{"data", "sharded_data"}, {}]>})
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.sharding = #cleave.sharding<[{}, {}], partial = ["tensor"]>})
func.func @shardings(%x: tensor<4x8xf32> {cleave.sharding = #cleave.sharding<[{"data", "sharded_data"}, {}]>})
    -> (tensor<4x8xf32> {cleave.sharding = #cleave.sharding<[{}, {}], partial = ["tensor"]>}) {
  // CHECK: cleave.exp %{{.*}} {cleave.memory_space = #cleave.memory_space<device>, cleave.sharding = #cleave.sharding<[{"data"}, {}]>} : tensor<4x8xf32>
  %0 = cleave.exp %x {cleave.sharding = #cleave.sharding<[{"data"}, {}]>, cleave.memory_space = #cleave.memory_space<device>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<2x8xf32>, tensor<8x8xf32>) {
  // CHECK: cleave.all_gather %{{.*}} {axes = ["tensor"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x16xf32>
  %0 = cleave.all_gather %x {axes = ["tensor"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x16xf32>
  // CHECK: cleave.reduce_scatter %{{.*}} {axes = ["data"], dim = 0 : i64, reduce = "mean"} : tensor<4x8xf32> -> tensor<2x8xf32>
  %1 = cleave.reduce_scatter %x {axes = ["data"], dim = 0 : i64, reduce = "mean"} : tensor<4x8xf32> -> tensor<2x8xf32>
  // A group over two axes gathers over their product.
  // CHECK: cleave.all_gather %{{.*}} {axes = ["data", "tensor"], dim = 0 : i64} : tensor<2x8xf32> -> tensor<8x8xf32>
  %2 = cleave.all_gather %1 {axes = ["data", "tensor"], dim = 0 : i64} : tensor<2x8xf32> -> tensor<8x8xf32>
  // The one-axis all-reduce of today names its axis as a group.
  // CHECK: cleave.all_reduce %{{.*}} {group = "pipeline"} : tensor<f32>
  %n = cleave.constant dense<1.0> : tensor<f32>
  %3 = cleave.all_reduce %n {group = "pipeline", reduce = "sum"} : tensor<f32>
  return %0, %1, %2 : tensor<4x16xf32>, tensor<2x8xf32>, tensor<8x8xf32>
}

// Started collectives overlap the compute between start and wait.
// CHECK-LABEL: func.func @start_wait
func.func @start_wait(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>) {
  // CHECK: %[[T:.*]] = cleave.all_reduce_start %{{.*}} {axes = ["data"], reduce = "mean"} : tensor<4x8xf32> -> !cleave.async_token<tensor<4x8xf32>>
  %t = cleave.all_reduce_start %g {axes = ["data"], reduce = "mean"} : tensor<4x8xf32> -> !cleave.async_token<tensor<4x8xf32>>
  // CHECK: cleave.all_gather_start %{{.*}} {axes = ["pipeline"], dim = 0 : i64} : tensor<4x8xf32> -> !cleave.async_token<tensor<8x8xf32>>
  %u = cleave.all_gather_start %x {axes = ["pipeline"], dim = 0 : i64} : tensor<4x8xf32> -> !cleave.async_token<tensor<8x8xf32>>
  // CHECK: cleave.reduce_scatter_start %{{.*}} {axes = ["tensor"], dim = 0 : i64} : tensor<4x8xf32> -> !cleave.async_token<tensor<2x8xf32>>
  %v = cleave.reduce_scatter_start %x {axes = ["tensor"], dim = 0 : i64} : tensor<4x8xf32> -> !cleave.async_token<tensor<2x8xf32>>
  // CHECK: cleave.exp
  %y = cleave.exp %x : tensor<4x8xf32>
  // CHECK: cleave.wait %[[T]] : !cleave.async_token<tensor<4x8xf32>>
  %0 = cleave.wait %t : !cleave.async_token<tensor<4x8xf32>>
  %1 = cleave.wait %u : !cleave.async_token<tensor<8x8xf32>>
  %2 = cleave.wait %v : !cleave.async_token<tensor<2x8xf32>>
  return %0, %y, %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>
}

// Stage 0 sends its activations to stage 1 and receives their gradient.
// CHECK-LABEL: func.func @send_recv
func.func @send_recv(%h: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: cleave.send %{{.*}} {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4x8xf32>
  cleave.send %h {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4x8xf32>
  // CHECK: cleave.recv {axis = "pipeline", peer = 1 : i64, tag = 1 : i64} : tensor<2x4x8xf32>
  %dh = cleave.recv {axis = "pipeline", peer = 1 : i64, tag = 1 : i64} : tensor<2x4x8xf32>
  // CHECK: %[[S:.*]] = cleave.send_start %{{.*}} {axis = "pipeline", peer = 1 : i64, tag = 2 : i64} : tensor<2x4x8xf32> -> !cleave.async_token
  %s = cleave.send_start %h {axis = "pipeline", peer = 1 : i64, tag = 2 : i64} : tensor<2x4x8xf32> -> !cleave.async_token
  // CHECK: %[[R:.*]] = cleave.recv_start {axis = "pipeline", peer = 1 : i64, tag = 3 : i64} : !cleave.async_token<tensor<2x4x8xf32>>
  %r = cleave.recv_start {axis = "pipeline", peer = 1 : i64, tag = 3 : i64} : !cleave.async_token<tensor<2x4x8xf32>>
  // CHECK: cleave.wait %[[S]] : !cleave.async_token{{$}}
  cleave.wait %s : !cleave.async_token
  // CHECK: cleave.wait %[[R]] : !cleave.async_token<tensor<2x4x8xf32>>
  %dh2 = cleave.wait %r : !cleave.async_token<tensor<2x4x8xf32>>
  %sum = cleave.add %dh, %dh2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %sum : tensor<2x4x8xf32>
}

}
