// Round-trip of the tensor-parallel ops (docs/tensor-parallel.md): a rank's
// coordinate on a mesh axis, Megatron's f (cleave.tp_copy) before a
// column-parallel product and g (cleave.tp_reduce) after a row-parallel one.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=2]>} {
// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<2x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>) -> (tensor<2x8xf32>, tensor<i64>) {
  // CHECK: cleave.axis_index {axis = "tensor"} : tensor<i64>
  %r = cleave.axis_index {axis = "tensor"} : tensor<i64>
  // CHECK: cleave.tp_copy %{{.*}} {axes = ["tensor"]} : tensor<2x8xf32>
  %f = cleave.tp_copy %x {axes = ["tensor"]} : tensor<2x8xf32>
  %h = cleave.matmul %f, %w1 : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %p = cleave.matmul %h, %w2 : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
  // CHECK: cleave.tp_reduce %{{.*}} {axes = ["tensor"]} : tensor<2x8xf32>
  %y = cleave.tp_reduce %p {axes = ["tensor"]} : tensor<2x8xf32>
  return %y, %r : tensor<2x8xf32>, tensor<i64>
}
}
