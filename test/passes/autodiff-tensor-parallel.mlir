// The gradient rules of Megatron's f and g under --cleave-autodiff: f
// (cleave.tp_copy) is the identity forward and its gradient is summed over
// the tensor axis (a cleave.tp_reduce in the backward); g (cleave.tp_reduce)
// all-reduces forward and passes its gradient through, so the backward of
// an MLP block has exactly one all-reduce, at f.
// RUN: cleave-opt %s --cleave-autodiff | FileCheck %s

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
cleave.parameter @w1 : tensor<8x8xf32>
cleave.parameter @w2 : tensor<8x8xf32>

// CHECK-LABEL: func.func @forward(
// CHECK: cleave.tp_copy
// CHECK: cleave.tp_reduce
func.func @forward(%x: tensor<2x8xf32>) -> (tensor<f32> {cleave.onnx_name = "loss"}) {
  %w1 = cleave.get_param @w1 : tensor<8x8xf32>
  %w2 = cleave.get_param @w2 : tensor<8x8xf32>
  %f = cleave.tp_copy %x {axes = ["tensor"]} : tensor<2x8xf32>
  %h = cleave.matmul %f, %w1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %p = cleave.matmul %h, %w2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %y = cleave.tp_reduce %p {axes = ["tensor"]} : tensor<2x8xf32>
  %f2 = cleave.tp_copy %y {axes = ["tensor"]} : tensor<2x8xf32>
  %h2 = cleave.matmul %f2, %w1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %loss = cleave.reduce_sum %h2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
// The backward: f's gradient all-reduced once per f on the path to a
// parameter (the second f, whose gradient flows to @w2 and @w1); g's
// gradient passed through, with no collective of its own. The first f's
// input is not a parameter's, so its gradient is not built.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: cleave.tp_reduce %{{.*}} {axes = ["tensor"]} : tensor<2x8xf32>
// CHECK-NOT: cleave.tp_reduce
// CHECK-NOT: cleave.tp_copy
// CHECK: return
}
