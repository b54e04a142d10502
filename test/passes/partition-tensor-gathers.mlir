// --cleave-partition-tensor where shardings meet without a Megatron
// region between them (docs/tensor-parallel.md, "Where propagation
// stops"): a split value an op needs whole is gathered
// (cleave.sp_all_gather with split_grad), a whole value an op reads split
// is sliced to the rank's part (a gather of the indices r * size + [0,
// size), entered through f when it is trained), and a constant split by
// its users is kept whole and sliced the same way. The shardings are
// written here as cleave-propagate-shardings leaves them.
// RUN: cleave-opt %s --split-input-file --cleave-partition-tensor | FileCheck %s

// A softmax over the width a column-parallel product split (an op that
// needs that dimension whole): its operand is gathered, it runs whole on
// every rank, and its users read the rank's part of its result.
// CHECK-LABEL: func.func @stop
// CHECK: %[[H:.*]] = cleave.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[H]] {perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[G:.*]] = cleave.sp_all_gather %[[T]] {axes = ["tensor"], dim = 0 : i64, split_grad} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[W:.*]] = cleave.transpose %[[G]] {perm = array<i64: 1, 0>} : tensor<8x2xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.softmax %[[W]] {axis = 1 : i64
// CHECK-SAME: tensor<2x8xf32>
// CHECK-NEXT: %[[F:.*]] = cleave.tp_copy %[[S]] {axes = ["tensor"]} : tensor<2x8xf32>
// CHECK-NEXT: %[[IOTA:.*]] = cleave.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK-NEXT: %[[R:.*]] = cleave.axis_index {axis = "tensor"} : tensor<i64>
// CHECK-NEXT: %[[SIZE:.*]] = cleave.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[FIRST:.*]] = cleave.mul %[[R]], %[[SIZE]]
// CHECK-NEXT: %[[I:.*]] = cleave.add %[[IOTA]], %[[FIRST]]
// CHECK-NEXT: %[[P:.*]] = cleave.gather %[[F]], %[[I]] {axis = 1 : i64} : (tensor<2x8xf32>, tensor<4xi64>) -> tensor<2x4xf32>
// CHECK-NEXT: cleave.mul %[[P]], %[[H]] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @up {cleave.sharding = #cleave.sharding<[{"tensor"}, {} ]>} : tensor<8x8xf32>
  cleave.parameter @down {cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : tensor<8x8xf32>
  func.func @stop(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %up = cleave.get_param @up : tensor<8x8xf32>
    %h = cleave.matmul %x, %up {transpose_rhs, cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %s = cleave.softmax %h {axis = 1 : i64, cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>, cleave.sharding_stop = "operand 0 is gathered"} : tensor<2x8xf32>
    %g = cleave.mul %s, %h {cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %down = cleave.get_param @down : tensor<8x8xf32>
    %y = cleave.matmul %g, %down {transpose_rhs, cleave.sharding = #cleave.sharding<[{}, {} ], partial = ["tensor"]>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %r = cleave.add %x, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}

// -----

// A whole bias (trained) and a whole constant added to a split value:
// each read as the rank's part; the bias through f, whose gradient sums
// the ranks' parts, the constant as it is. A split constant is made
// whole and sliced.
// CHECK-LABEL: func.func @slices
// CHECK: %[[B:.*]] = cleave.get_param @b : tensor<8xf32>
// CHECK-NEXT: %[[FB:.*]] = cleave.tp_copy %[[B]] {axes = ["tensor"]} : tensor<8xf32>
// CHECK: %[[PB:.*]] = cleave.gather %[[FB]], %{{.*}} {axis = 0 : i64} : (tensor<8xf32>, tensor<4xi64>) -> tensor<4xf32>
// CHECK-NEXT: cleave.add %[[PB]], %{{.*}} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[C:.*]] = cleave.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]> : tensor<8xf32>
// CHECK-NOT: cleave.tp_copy
// CHECK: %[[PC:.*]] = cleave.gather %[[C]], %{{.*}} {axis = 0 : i64} : (tensor<8xf32>, tensor<4xi64>) -> tensor<4xf32>
// CHECK-NEXT: cleave.mul %{{.*}}, %[[PC]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @up {cleave.sharding = #cleave.sharding<[{"tensor"}, {} ]>} : tensor<8x8xf32>
  cleave.parameter @b : tensor<8xf32>
  cleave.parameter @down {cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : tensor<8x8xf32>
  func.func @slices(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %up = cleave.get_param @up : tensor<8x8xf32>
    %h = cleave.matmul %x, %up {transpose_rhs, cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %b = cleave.get_param @b : tensor<8xf32>
    %hb = cleave.add %b, %h {cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %c = cleave.constant {cleave.sharding = #cleave.sharding<[{"tensor"} ]>} dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
    %g = cleave.mul %hb, %c {cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %down = cleave.get_param @down : tensor<8x8xf32>
    %y = cleave.matmul %g, %down {transpose_rhs, cleave.sharding = #cleave.sharding<[{}, {} ], partial = ["tensor"]>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// A split function result is gathered before the return.
// CHECK-LABEL: func.func @result
// CHECK: %[[H:.*]] = cleave.matmul
// CHECK: %[[G:.*]] = cleave.sp_all_gather %{{.*}} {axes = ["tensor"], dim = 0 : i64, split_grad} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[W:.*]] = cleave.transpose %[[G]]
// CHECK: return %{{.*}}, %[[W]] : tensor<2x8xf32>, tensor<2x8xf32>
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @up {cleave.sharding = #cleave.sharding<[{"tensor"}, {} ]>} : tensor<8x8xf32>
  func.func @result(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
    %up = cleave.get_param @up : tensor<8x8xf32>
    %h = cleave.matmul %x, %up {transpose_rhs, cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    return %x, %h : tensor<2x8xf32>, tensor<2x8xf32>
  }
}
