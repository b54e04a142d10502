// Round-trip of sequence parallelism's collectives (docs/tensor-parallel.md,
// "Sequence parallelism"): the all-gather that enters a column-parallel
// region from the rank's part of the sequence (and, with split_grad, one
// read by replicated ops), and the reduce-scatter that leaves a
// row-parallel region into it.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=2]>} {
// CHECK-LABEL: func.func @block
func.func @block(%x: tensor<2x4x8xf32>, %p: tensor<8x4x8xf32>) -> (tensor<8x4x8xf32>, tensor<8x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: cleave.sp_all_gather %{{.*}} {axes = ["tensor"], dim = 0 : i64} : tensor<2x4x8xf32> -> tensor<4x4x8xf32>
  %g = cleave.sp_all_gather %x {axes = ["tensor"], dim = 0 : i64} : tensor<2x4x8xf32> -> tensor<4x4x8xf32>
  // CHECK: cleave.sp_all_gather %{{.*}} {axes = ["data", "tensor"], dim = 0 : i64} : tensor<2x4x8xf32> -> tensor<8x4x8xf32>
  %w = cleave.sp_all_gather %x {axes = ["data", "tensor"], dim = 0 : i64} : tensor<2x4x8xf32> -> tensor<8x4x8xf32>
  // CHECK: cleave.sp_all_gather %{{.*}} {axes = ["tensor"], dim = 1 : i64, split_grad} : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %r = cleave.sp_all_gather %x {axes = ["tensor"], dim = 1 : i64, split_grad} : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  // CHECK: cleave.sp_reduce_scatter %{{.*}} {axes = ["tensor"], dim = 0 : i64} : tensor<8x4x8xf32> -> tensor<4x4x8xf32>
  %s = cleave.sp_reduce_scatter %p {axes = ["tensor"], dim = 0 : i64} : tensor<8x4x8xf32> -> tensor<4x4x8xf32>
  // CHECK: cleave.sp_reduce_scatter %{{.*}} {axes = ["tensor"], dim = 1 : i64} : tensor<8x4x8xf32> -> tensor<8x2x8xf32>
  %t = cleave.sp_reduce_scatter %p {axes = ["tensor"], dim = 1 : i64} : tensor<8x4x8xf32> -> tensor<8x2x8xf32>
  return %w, %p, %x : tensor<8x4x8xf32>, tensor<8x4x8xf32>, tensor<2x4x8xf32>
}
}
