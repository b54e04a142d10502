// Tests of --cleave-offload-activations after cleave-remat: each
// checkpoint a recomputed segment reads (the layers' inputs %x0, %x1, %x2)
// is copied to host memory right after the forward makes it and saved as
// the host copy; the backward fetches it back `horizon` segments before
// the backward of the segment that reads it starts (the segments run in
// reverse: layer 2's first), or when the first segment's backward starts
// for the last ones. What is saved but not recomputed from (the head's input, the loss
// gradient, the ids) stays on the device.
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=each --cleave-offload-activations=horizon=1 | FileCheck %s --check-prefixes=CHECK,H1
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=each --cleave-offload-activations=horizon=2 | FileCheck %s --check-prefixes=CHECK,H2
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=each --cleave-offload-activations=horizon=1 --cleave-memory-plan | FileCheck %s --check-prefix=PLAN
// RUN: not cleave-opt %s --cleave-offload-activations=horizon=0 2>&1 | FileCheck %s --check-prefix=ZERO

cleave.parameter @wte : tensor<16x8xf32>
cleave.parameter @w0 : tensor<8x8xf32>
cleave.parameter @w1 : tensor<8x8xf32>
cleave.parameter @w2 : tensor<8x8xf32>

func.func @forward(%idx: tensor<2x4xi64>, %t: tensor<2x4xi64>)
      -> (tensor<f32> {cleave.onnx_name = "loss"}) {
    %wte = cleave.get_param @wte : tensor<16x8xf32> loc("/wte")
    %x0 = cleave.embedding %wte, %idx : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32> loc("/wte/Gather")
    %w0 = cleave.get_param @w0 : tensor<8x8xf32> loc("w0")
    %a0 = cleave.matmul %x0, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/h.0/fc/MatMul")
    %b0 = cleave.tanh %a0 : tensor<2x4x8xf32> loc("/h.0/act/Tanh")
    %c0 = cleave.mul %b0, %b0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/h.0/Mul")
    %x1 = cleave.add %x0, %c0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/h.0/Add")
    %w1 = cleave.get_param @w1 : tensor<8x8xf32> loc("w1")
    %a1 = cleave.matmul %x1, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/h.1/fc/MatMul")
    %b1 = cleave.tanh %a1 : tensor<2x4x8xf32> loc("/h.1/act/Tanh")
    %c1 = cleave.mul %b1, %b1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/h.1/Mul")
    %x2 = cleave.add %x1, %c1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/h.1/Add")
    %w2 = cleave.get_param @w2 : tensor<8x8xf32> loc("w2")
    %a2 = cleave.matmul %x2, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/h.2/fc/MatMul")
    %b2 = cleave.tanh %a2 : tensor<2x4x8xf32> loc("/h.2/act/Tanh")
    %c2 = cleave.mul %b2, %b2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/h.2/Mul")
    %x3 = cleave.add %x2, %c2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/h.2/Add")
    %head = cleave.get_param @wte : tensor<16x8xf32> loc("/head")
    %logits = cleave.matmul %x3, %head {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> loc("/head/MatMul")
    %l2 = cleave.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32> loc("/flat")
    %t2 = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/flat_t")
    %loss = cleave.softmax_cross_entropy %l2, %t2 {reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
    return %loss : tensor<f32>
}

// The forward: a host copy after each layer's input is made (the
// embedding, the outputs of layers 0 and 1), saved instead of it; the last
// layer's output (the head's input) stays on the device.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: tensor<2x4x8xf32> {cleave.saved}, tensor<2x4x8xf32> {cleave.memory_space = #cleave.memory_space<host>, cleave.saved}, tensor<2x4x8xf32> {cleave.memory_space = #cleave.memory_space<host>, cleave.saved}, tensor<2x4x8xf32> {cleave.memory_space = #cleave.memory_space<host>, cleave.saved}, tensor<2x4xi64> {cleave.saved})
// CHECK: %[[X0:.*]] = cleave.embedding
// CHECK-NEXT: %[[H0:.*]] = cleave.offload %[[X0]] {cleave.memory_space = #cleave.memory_space<host>} : tensor<2x4x8xf32>
// CHECK: %[[X1:.*]] = cleave.add %[[X0]],
// CHECK-NEXT: %[[H1:.*]] = cleave.offload %[[X1]] {cleave.memory_space = #cleave.memory_space<host>}
// CHECK: %[[X2:.*]] = cleave.add %[[X1]],
// CHECK-NEXT: %[[H2:.*]] = cleave.offload %[[X2]] {cleave.memory_space = #cleave.memory_space<host>}
// CHECK: %[[X3:.*]] = cleave.add %[[X2]],
// CHECK-NOT: cleave.offload
// CHECK: return %loss, %dinput, %[[X3]], %[[H2]], %[[H1]], %[[H0]], %arg0 :

// The backward reads the host copies through fetches, none during the
// head's backward (its temporaries are the step's peak): with horizon 1
// layer 2's and layer 1's inputs come back when layer 2's backward (the
// first segment's) starts, layer 0's when layer 1's starts; with horizon 2
// all three when layer 2's starts.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %arg2: tensor<2x4x8xf32> {cleave.memory_space = #cleave.memory_space<host>, cleave.saved_from = 3 : i64}, %arg3: tensor<2x4x8xf32> {cleave.memory_space = #cleave.memory_space<host>, cleave.saved_from = 4 : i64}, %arg4: tensor<2x4x8xf32> {cleave.memory_space = #cleave.memory_space<host>, cleave.saved_from = 5 : i64}
// CHECK-NOT: cleave.fetch
// CHECK: cleave.accumulate_grad @wte
// H1: %[[D2:.*]] = cleave.fetch %arg2 : tensor<2x4x8xf32>
// H1-NEXT: %[[D1:.*]] = cleave.fetch %arg3 : tensor<2x4x8xf32>
// H1-NEXT: cleave.matmul %[[D2]], %{{.*}} {cleave.recompute}
// H1: cleave.accumulate_grad @w2
// H1: %[[D0:.*]] = cleave.fetch %arg4 : tensor<2x4x8xf32>
// H1-NEXT: cleave.matmul %[[D1]], %{{.*}} {cleave.recompute}
// H1: cleave.matmul %[[D0]], %{{.*}} {cleave.recompute}
// H2: %[[D2:.*]] = cleave.fetch %arg2 : tensor<2x4x8xf32>
// H2-NEXT: %[[D1:.*]] = cleave.fetch %arg3 : tensor<2x4x8xf32>
// H2-NEXT: %[[D0:.*]] = cleave.fetch %arg4 : tensor<2x4x8xf32>
// H2-NEXT: cleave.matmul %[[D2]], %{{.*}} {cleave.recompute}
// H2: cleave.matmul %[[D1]], %{{.*}} {cleave.recompute}
// H2: cleave.matmul %[[D0]], %{{.*}} {cleave.recompute}

// The memory plan gives the three host values a host arena: 3 x 256 bytes.
// PLAN: host_activations = 768 : i64, host_arena_bytes = 768 : i64

// ZERO: error: cleave-offload-activations: horizon must be at least 1 (activation_loading_horizon), got 0
