// Tests of --cleave-autodiff: the backward function of a loss, saved
// values, the 1/microbatches seed, tied parameters, matmul rules with
// transposes, frozen parameters (autodiff-errors.mlir: what it refuses).
// RUN: cleave-opt %s --split-input-file --cleave-autodiff=microbatches=4 | FileCheck %s

cleave.parameter @wte : tensor<16x8xf32>
cleave.parameter @g : tensor<8xf32>

// A tied embedding and head: @wte is read twice, so its gradient is
// accumulated twice. The forward returns what the backward reads.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> (tensor<f32> {cleave.onnx_name = "loss"}, {{.*}} {cleave.saved}
// CHECK-SAME: attributes {cleave.backward = @forward_backward, cleave.kind = "forward"}
func.func @forward(%idx: tensor<2x4xi64>, %t: tensor<2x4xi64>)
    -> (tensor<f32> {cleave.onnx_name = "loss"}) {
  %wte = cleave.get_param @wte : tensor<16x8xf32> loc("/wte")
  %x = cleave.embedding %wte, %idx : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32> loc("/emb")
  %g = cleave.get_param @g : tensor<8xf32> loc("/g")
  %n = cleave.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32> loc("/norm")
  %head = cleave.get_param @wte : tensor<16x8xf32> loc("/head")
  %logits = cleave.matmul %n, %head {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> loc("/head/MatMul")
  %l2 = cleave.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32> loc("/flat")
  %t2 = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/flat_t")
  %loss = cleave.softmax_cross_entropy %l2, %t2 {reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: cleave.saved_from = 1 : i64
// CHECK-SAME: attributes {cleave.forward = @forward, cleave.kind = "backward"}
// The step's loss is the mean over 4 microbatches.
// CHECK: %[[SEED:.*]] = cleave.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[DL:.*]] = cleave.softmax_cross_entropy_grad %[[SEED]]
// CHECK: %[[DLOG:.*]] = cleave.reshape %[[DL]] : tensor<8x16xf32> -> tensor<2x4x16xf32>
// The head's weight is stored [16, 8] and read transposed: its gradient is
// g^T x in the stored layout, one product over all 8 rows.
// CHECK: %[[G2:.*]] = cleave.reshape %[[DLOG]] : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK: cleave.matmul %[[G2]], %{{.*}} : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[DHEAD:.*]] = cleave.matmul %[[G2]], %{{.*}} {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
// CHECK: cleave.accumulate_grad @wte, %[[DHEAD]] : tensor<16x8xf32>
// CHECK: %{{.*}}, %[[DG:.*]] = cleave.rms_norm_grad
// CHECK: cleave.accumulate_grad @g, %[[DG]] : tensor<8xf32>
// CHECK: %[[DEMB:.*]] = cleave.embedding_grad
// CHECK: cleave.accumulate_grad @wte, %[[DEMB]] : tensor<16x8xf32>
// CHECK: return

// -----

cleave.parameter @w : tensor<4x3xf32>
cleave.parameter @b : tensor<3xf32>

// Broadcast operands get their gradient summed back to their shape; a
// value used twice sums its gradients.
// CHECK-LABEL: func.func @forward(
func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4x3xf32>
  %y = cleave.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %b = cleave.get_param @b : tensor<3xf32>
  %z = cleave.add %y, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %sq = cleave.mul %z, %z : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = cleave.reduce_sum %sq {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[ONE:.*]] = cleave.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[R:.*]] = cleave.reshape %[[ONE]] : tensor<f32> -> tensor<1x1xf32>
// CHECK: %[[DS:.*]] = cleave.broadcast_to %[[R]] : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK: %[[A:.*]] = cleave.mul %[[DS]], %arg0
// CHECK: %[[B:.*]] = cleave.mul %[[DS]], %arg0
// CHECK: %[[DZ:.*]] = cleave.add %[[A]], %[[B]]
// CHECK: %[[DB0:.*]] = cleave.reduce_sum %[[DZ]] {axes = array<i64: 0>} : tensor<2x3xf32> -> tensor<1x3xf32>
// CHECK: %[[DB:.*]] = cleave.reshape %[[DB0]] : tensor<1x3xf32> -> tensor<3xf32>
// CHECK: cleave.accumulate_grad @b, %[[DB]]
// CHECK: %[[DW:.*]] = cleave.matmul %arg1, %[[DZ]] {transpose_lhs} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK: cleave.accumulate_grad @w, %[[DW]]

// -----

cleave.parameter @w : tensor<4xf32>

// Only values that depend on a parameter are differentiated: the input's
// exp needs no gradient. A function without a scalar loss is left alone.
// CHECK-LABEL: func.func @forward(
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %e = cleave.exp %x : tensor<4xf32>
  %w = cleave.get_param @w : tensor<4xf32>
  %p = cleave.mul %e, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = cleave.reduce_mean %p {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK-LABEL: func.func @forward_backward(
// CHECK-NOT: cleave.exp
// CHECK: cleave.accumulate_grad @w
// CHECK-LABEL: func.func @logits(
// CHECK-NOT: cleave.kind
func.func @logits(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = cleave.get_param @w : tensor<4xf32>
  %p = cleave.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %p : tensor<4xf32>
}


// -----

cleave.parameter @w : tensor<4xf32>
cleave.parameter @cos {cleave.frozen} : tensor<4xf32>

// A frozen parameter (a buffer the export made an initializer) is read like
// a constant: nothing is differentiated towards it, and it gets no
// accumulate_grad, so the optimizer will not update it.
// CHECK: cleave.parameter @cos {cleave.frozen} : tensor<4xf32>
// CHECK-LABEL: func.func @forward(
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4xf32>
  %c = cleave.get_param @cos : tensor<4xf32>
  %e = cleave.exp %c : tensor<4xf32>
  %p = cleave.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = cleave.mul %p, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = cleave.reduce_mean %q {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK-LABEL: func.func @forward_backward(
// CHECK-NOT: cleave.exp
// CHECK-NOT: cleave.accumulate_grad @cos
// CHECK: cleave.accumulate_grad @w
// CHECK-NOT: cleave.accumulate_grad @cos
// CHECK: return

// -----

cleave.parameter @w : tensor<4x4xf32>

// A pipeline stage without the loss: its incoming activations (argument
// marked cleave.differentiable) get their gradient returned by the
// backward, its outgoing activations (result marked cleave.differentiable)
// receive theirs as the backward's last argument.
// CHECK-LABEL: func.func @stage(
// CHECK-SAME: %arg0: tensor<2x4xf32> {cleave.differentiable}
// CHECK-SAME: -> (tensor<2x4xf32> {cleave.differentiable}, tensor<2x4xf32> {cleave.saved}, tensor<2x4xf32> {cleave.saved})
func.func @stage(%x: tensor<2x4xf32> {cleave.differentiable})
    -> (tensor<2x4xf32> {cleave.differentiable}) {
  %w = cleave.get_param @w : tensor<4x4xf32>
  %y = cleave.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = cleave.tanh %y : tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @stage_backward(
// CHECK-SAME: %arg0: tensor<2x4xf32> {cleave.saved_from = 1 : i64}, %arg1: tensor<2x4xf32> {cleave.saved_from = 2 : i64}, %arg2: tensor<2x4xf32> {cleave.grad_of_result = 0 : i64})
// CHECK-SAME: -> (tensor<2x4xf32> {cleave.grad_of_arg = 0 : i64})
// CHECK: %[[DY:.*]] = cleave.mul %arg2
// CHECK: %[[DX:.*]] = cleave.matmul %[[DY]], {{.*}} {transpose_rhs}
// CHECK: cleave.accumulate_grad @w
// CHECK: return %[[DX]] : tensor<2x4xf32>

// -----

cleave.parameter @wte : tensor<16x8xf32>

// nn.Embedding's padding_idx: the lookup's gradient carries it, so that
// row gets nothing from the lookup (the kernel leaves it zero).
// CHECK-LABEL: func.func @forward_backward(
// CHECK: cleave.embedding_grad %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> tensor<16x8xf32>
func.func @forward(%idx: tensor<2x4xi64>) -> tensor<f32> {
  %wte = cleave.get_param @wte : tensor<16x8xf32>
  %x = cleave.embedding %wte, %idx {padding_idx = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %sq = cleave.mul %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = cleave.reduce_sum %sq {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}
