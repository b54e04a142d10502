// cleave-remat after cleave-shard-parameters (ZeRO-3): a recomputed layer
// gathers its sharded parameter again in the backward instead of the
// forward saving the gathered whole (which would keep every layer's
// gathered weights from forward to backward, the memory ZeRO-3 exists to
// save), and the backward's own gather of it for the gradient reads that
// same value: one gather per layer in the backward, as FSDP and ZeRO-3 do
// with checkpointing. The forward saves only the layer inputs.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters=threshold=0 "--cleave-remat=strategy=each layers=/h.0/,/h.1/" | FileCheck %s

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> (tensor<f32>, tensor<2x8xf32> {cleave.saved}, tensor<2x8xf32> {cleave.saved})
// CHECK: return %{{.*}}, %{{.*}}, %arg0 : tensor<f32>, tensor<2x8xf32>, tensor<2x8xf32>
// CHECK-LABEL: func.func @forward_backward(
// CHECK-NOT: gather_param
// CHECK: %[[W2:.*]] = cleave.gather_param @w2
// CHECK-NEXT: cleave.matmul %arg0, %[[W2]] {cleave.recompute}
// CHECK-NOT: gather_param
// CHECK: cleave.matmul %{{.*}}, %[[W2]] {transpose_rhs}
// CHECK-NOT: gather_param
// CHECK: cleave.accumulate_grad @w2
// CHECK-NEXT: %[[W1:.*]] = cleave.gather_param @w1
// CHECK-NEXT: cleave.matmul %arg1, %[[W1]] {cleave.recompute}
// CHECK-NOT: gather_param
// CHECK: cleave.accumulate_grad @w1
// CHECK-NEXT: return
cleave.parameter @w1 {init = "normal:0.02"} : tensor<8x8xf32>
cleave.parameter @w2 {init = "normal:0.02"} : tensor<8x8xf32>

func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
  %w1 = cleave.get_param @w1 : tensor<8x8xf32> loc("w1")
  %h1 = cleave.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("/h.0/fc/MatMul")
  %a1 = cleave.tanh %h1 : tensor<2x8xf32> loc("/h.0/Tanh")
  %r1 = cleave.add %x, %a1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("/h.0/Add")
  %w2 = cleave.get_param @w2 : tensor<8x8xf32> loc("w2")
  %h2 = cleave.matmul %r1, %w2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("/h.1/fc/MatMul")
  %a2 = cleave.tanh %h2 : tensor<2x8xf32> loc("/h.1/Tanh")
  %r2 = cleave.add %r1, %a2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("/h.1/Add")
  %s = cleave.reduce_sum %r2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32> loc("/loss")
  return %s : tensor<f32>
}
