// The gradient rules of Megatron's f and g under --cleave-autodiff: f
// (cleave.tp_copy) is the identity forward and its gradient is summed over
// the tensor axis (a cleave.tp_reduce in the backward); g (cleave.tp_reduce)
// all-reduces forward and passes its gradient through, so the backward of
// an MLP block has exactly one all-reduce, at f.
// RUN: cleave-opt %s --split-input-file --cleave-autodiff | FileCheck %s

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

// -----

// The vocab-parallel softmax's shift: a maximum over the group is not
// differentiated (the loss does not depend on it), so the backward has no
// gradient for it and no collective of its own but the g's identity.
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
cleave.parameter @w : tensor<8x4xf32>

// CHECK-LABEL: func.func @shift(
func.func @shift(%x: tensor<2x8xf32>) -> (tensor<f32> {cleave.onnx_name = "loss"}) {
  %w = cleave.get_param @w : tensor<8x4xf32>
  %l = cleave.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %m0 = cleave.reduce_max %l {axes = array<i64: 1>, keepdims = true} : tensor<2x4xf32> -> tensor<2x1xf32>
  %m = cleave.all_reduce %m0 {group = "tensor", reduce = "max"} : tensor<2x1xf32>
  %z = cleave.sub %l, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %e = cleave.exp %z : tensor<2x4xf32>
  %s0 = cleave.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : tensor<2x4xf32> -> tensor<2x1xf32>
  %s = cleave.tp_reduce %s0 {axes = ["tensor"]} : tensor<2x1xf32>
  %ls = cleave.log %s : tensor<2x1xf32>
  %loss = cleave.reduce_sum %ls {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x1xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
// CHECK-LABEL: func.func @shift_backward(
// CHECK-NOT: cleave.all_reduce
// CHECK-NOT: cleave.tp_reduce
// CHECK-NOT: cleave.reduce_max
// CHECK: cleave.accumulate_grad @w
// CHECK: return
}
