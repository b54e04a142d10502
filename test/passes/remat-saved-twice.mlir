// A value a forward returns twice for its backward (two cleave.saved
// results, two arguments): cleave-remat reads it through one argument and
// drops the other, and recomputes a layer's interior as usual.
// RUN: cleave-opt %s "--cleave-remat=strategy=each layers=/h.0/" | FileCheck %s

cleave.parameter @w : tensor<4x4xf32>

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> (tensor<f32>, tensor<4x4xf32> {cleave.saved}, tensor<4x4xf32> {cleave.saved})
// CHECK: return %{{.*}}, %arg0, %[[Y:.*]] :
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %arg0: tensor<4x4xf32> {cleave.saved_from = 1 : i64}, %arg1: tensor<4x4xf32> {cleave.saved_from = 2 : i64}, %arg2: tensor<f32> {cleave.role = "loss_scale"})
// CHECK: %[[W:.*]] = cleave.get_param @w
// CHECK-NEXT: %[[A:.*]] = cleave.matmul %arg0, %[[W]] {cleave.recompute}
// CHECK-NEXT: %[[T:.*]] = cleave.tanh %[[A]] {cleave.recompute}
// CHECK-NEXT: cleave.mul %[[T]], %[[T]] :
// CHECK-NEXT: cleave.mul %arg1, %arg2 :
func.func @forward(%x: tensor<4x4xf32>) -> (tensor<f32>, tensor<4x4xf32> {cleave.saved}, tensor<4x4xf32> {cleave.saved}, tensor<4x4xf32> {cleave.saved}, tensor<4x4xf32> {cleave.saved}) attributes {cleave.backward = @forward_backward, cleave.kind = "forward"} {
  %w = cleave.get_param @w : tensor<4x4xf32> loc("w")
  %a = cleave.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/h.0/fc/MatMul")
  %t = cleave.tanh %a : tensor<4x4xf32> loc("/h.0/Tanh")
  %y = cleave.add %x, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("/h.0/Add")
  %s = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x4xf32> -> tensor<f32> loc("/loss")
  return %s, %t, %x, %t, %y : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @forward_backward(%t1: tensor<4x4xf32> {cleave.saved_from = 1 : i64}, %x: tensor<4x4xf32> {cleave.saved_from = 2 : i64}, %t2: tensor<4x4xf32> {cleave.saved_from = 3 : i64}, %y: tensor<4x4xf32> {cleave.saved_from = 4 : i64}, %scale: tensor<f32> {cleave.role = "loss_scale"}) attributes {cleave.forward = @forward, cleave.kind = "backward"} {
  %p = cleave.mul %t1, %t2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %q = cleave.mul %y, %scale : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  cleave.accumulate_grad @w, %p : tensor<4x4xf32>
  cleave.accumulate_grad @w, %q : tensor<4x4xf32>
  return
}
