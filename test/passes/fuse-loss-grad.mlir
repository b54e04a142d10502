// Tests of --cleave-fuse-loss-grad: after autodiff, the forward computes the
// loss and its logits' gradient in one softmax_cross_entropy_fused and saves
// the gradient in the logits' slot; where the pattern is not there, nothing
// changes.
// RUN: cleave-opt %s --split-input-file --cleave-autodiff=microbatches=2 --cleave-fuse-loss-grad | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-autodiff=microbatches=2 --cleave-fuse-loss-grad=with-loss-scale=false | FileCheck %s --check-prefix=NOSCALE
// RUN: cleave-opt %s --split-input-file --cleave-fuse-loss-grad | FileCheck %s --check-prefix=FORWARD
// RUN: cleave-opt %s --split-input-file --cleave-autodiff=microbatches=2 --cleave-fuse-loss-grad --cleave-memory-plan | FileCheck %s --check-prefix=PLAN

cleave.parameter @w : tensor<8x16xf32>

// The seed 1/2 moves into the forward; the targets are no longer saved, so
// the saved input %x moves up a slot.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[T:[^:]*]]: tensor<4xi64>)
// CHECK-SAME: -> (tensor<f32> {cleave.onnx_name = "loss"}, tensor<4x16xf32> {cleave.saved}, tensor<4x8xf32> {cleave.saved})
// CHECK: %[[LOGITS:.*]] = cleave.matmul
// CHECK: %[[SEED:.*]] = cleave.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[LOSS:.*]], %[[DL:.*]] = cleave.softmax_cross_entropy_fused %[[LOGITS]], %[[T]], %[[SEED]] {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x16xf32>)
// CHECK-NOT: cleave.softmax_cross_entropy
// CHECK: return %[[LOSS]], %[[DL]], %[[X]]
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[SDL:[^:]*]]: tensor<4x16xf32> {cleave.saved_from = 1 : i64}, %[[SX:[^:]*]]: tensor<4x8xf32> {cleave.saved_from = 2 : i64})
// CHECK-NOT: cleave.softmax_cross_entropy_grad
// CHECK-NOT: cleave.constant
// CHECK: cleave.matmul %[[SX]], %[[SDL]] {transpose_lhs}
// NOSCALE-LABEL: func.func @forward(
// NOSCALE: cleave.softmax_cross_entropy_fused
// The memory plan writes the gradient over the logits, which die there.
// PLAN-LABEL: func.func @forward(
// PLAN: cleave.matmul %{{.*}} {cleave.offsets = array<i64: [[LOGITS:[0-9]+]]>}
// PLAN: cleave.softmax_cross_entropy_fused {{.*}} {cleave.offsets = array<i64: {{[0-9]+}}, [[LOGITS]]>
// FORWARD-LABEL: func.func @forward(
// FORWARD-SAME: -> (tensor<f32> {cleave.onnx_name = "loss"}) {
// FORWARD: cleave.softmax_cross_entropy %
// FORWARD-NOT: cleave.softmax_cross_entropy_fused
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>)
    -> (tensor<f32> {cleave.onnx_name = "loss"}) {
  %w = cleave.get_param @w : tensor<8x16xf32> loc("/w")
  %logits = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("/head")
  %loss = cleave.softmax_cross_entropy %logits, %t {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}

// -----

// fp16 loss scaling: the seed is 1/2 times the runtime's loss scale, so the
// forward gets a loss_scale argument of its own and multiplies there; with
// with-loss-scale=false nothing changes.
module attributes {cleave.loss_scaling = {initial_scale = 65536.0 : f64}} {
  cleave.parameter @w : tensor<8x16xf32>
  // CHECK-LABEL: func.func @forward(
  // CHECK-SAME: %[[SCALE:[^:]*]]: tensor<f32> {cleave.role = "loss_scale"})
  // CHECK-SAME: -> (tensor<f32>, tensor<4x16xf32> {cleave.saved}, tensor<4x8xf32> {cleave.saved})
  // CHECK: %[[C:.*]] = cleave.constant dense<5.000000e-01> : tensor<f32>
  // CHECK: %[[SEED:.*]] = cleave.mul %[[C]], %[[SCALE]]
  // CHECK: cleave.softmax_cross_entropy_fused %{{.*}}, %{{.*}}, %[[SEED]] {reduction = #cleave.reduction<sum>}
  // CHECK-LABEL: func.func @forward_backward(
  // CHECK-NOT: cleave.mul
  // CHECK: return
  // NOSCALE-LABEL: func.func @forward(
  // NOSCALE-SAME: -> (tensor<f32>, tensor<4x16xf32> {cleave.saved}, tensor<4xi64> {cleave.saved}, tensor<4x8xf32> {cleave.saved})
  // NOSCALE: cleave.softmax_cross_entropy %
  // NOSCALE-LABEL: func.func @forward_backward(
  // NOSCALE: cleave.softmax_cross_entropy_grad
  func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
    %w = cleave.get_param @w : tensor<8x16xf32>
    %logits = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<sum>} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The backward reads the logits for something else too (a penalty on
// their squares): they stay saved, and nothing changes.
cleave.parameter @w : tensor<8x16xf32>
// CHECK-LABEL: func.func @forward(
// CHECK: cleave.softmax_cross_entropy %
// CHECK-NOT: cleave.softmax_cross_entropy_fused
// CHECK-LABEL: func.func @forward_backward(
// CHECK: cleave.softmax_cross_entropy_grad
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<8x16xf32>
  %logits = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %loss = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  %sq = cleave.mul %logits, %logits : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %pen = cleave.reduce_sum %sq {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x16xf32> -> tensor<f32>
  %total = cleave.add %loss, %pen : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %total : tensor<f32>
}

// -----

// A per-position loss reduced afterwards: the grad op's dloss comes from
// the reduction's gradient, not from the seed, so nothing changes.
cleave.parameter @w : tensor<8x16xf32>
// CHECK-LABEL: func.func @forward(
// CHECK: cleave.softmax_cross_entropy %{{.*}} {reduction = #cleave.reduction<none>}
// CHECK-LABEL: func.func @forward_backward(
// CHECK: cleave.softmax_cross_entropy_grad
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<8x16xf32>
  %logits = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %losses = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<none>} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<4xf32>
  %loss = cleave.reduce_mean %losses {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The logits are also a result of the model: fused, but the gradient gets
// space of its own (the logits live on).
cleave.parameter @w : tensor<8x16xf32>
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> (tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32> {cleave.saved}, tensor<4x8xf32> {cleave.saved})
// CHECK: %[[LOGITS:.*]] = cleave.matmul
// CHECK: %[[LOSS:.*]], %[[DL:.*]] = cleave.softmax_cross_entropy_fused %[[LOGITS]]
// CHECK: return %[[LOSS]], %[[LOGITS]], %[[DL]]
// PLAN-LABEL: func.func @forward(
// PLAN: cleave.matmul %{{.*}} {cleave.offsets = array<i64: 1280>}
// PLAN: cleave.softmax_cross_entropy_fused {{.*}} {cleave.offsets = array<i64: 1536, 1600>
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x16xf32>) {
  %w = cleave.get_param @w : tensor<8x16xf32>
  %logits = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %loss = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<4x16xf32>
}
