// Tests of --cleave-remat: activation checkpointing after autodiff. A layer
// segment stops saving its interior values and the backward recomputes
// them from the segment's input just before their first use; the last
// layer's output stays saved for the head. Layers are found from the graph
// (numbered modules /h.0/, /h.1/ between the residual stream's places) or
// named by prefix (remat-selective.mlir: the attention core).
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=each | FileCheck %s --check-prefix=EACH
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=group_2 | FileCheck %s --check-prefix=GROUP
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=contiguous | FileCheck %s --check-prefix=GROUP
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad "--cleave-remat=strategy=each layers=/h.1/" | FileCheck %s --check-prefix=PREFIX
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=none | FileCheck %s --check-prefix=NONE

cleave.parameter @wte : tensor<16x8xf32>
cleave.parameter @w0 : tensor<8x8xf32>
cleave.parameter @w1 : tensor<8x8xf32>

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
    %head = cleave.get_param @wte : tensor<16x8xf32> loc("/head")
    %logits = cleave.matmul %x2, %head {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> loc("/head/MatMul")
    %l2 = cleave.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32> loc("/flat")
    %t2 = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/flat_t")
    %loss = cleave.softmax_cross_entropy %l2, %t2 {reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
    return %loss : tensor<f32>
}
// Each layer: the forward saves the logits' gradient, the last layer's
// output (%11, for the head), the first layer's output (the second's
// input), the embedding (the first's input) and the ids; the tanh outputs
// are no longer saved.
// EACH-LABEL: func.func @forward(
// EACH: return %loss, %dinput, %11, %6, %1, %arg0 :
// EACH-LABEL: func.func @forward_backward(
// EACH-SAME: %arg0: tensor<8x16xf32> {cleave.saved_from = 1 : i64}, %arg1: tensor<2x4x8xf32> {cleave.saved_from = 2 : i64}, %arg2: tensor<2x4x8xf32> {cleave.saved_from = 3 : i64}, %arg3: tensor<2x4x8xf32> {cleave.saved_from = 4 : i64}, %arg4: tensor<2x4xi64> {cleave.saved_from = 5 : i64})
// The head's gradient first, then layer 1 recomputed from its input just
// before the gradient that reads its tanh.
// EACH: cleave.accumulate_grad @wte
// EACH: %[[W1:.*]] = cleave.get_param @w1
// EACH-NEXT: %[[A1:.*]] = cleave.matmul %arg2, %[[W1]] {cleave.recompute}
// EACH-NEXT: %[[B1:.*]] = cleave.tanh %[[A1]] {cleave.recompute}
// EACH-NEXT: cleave.mul %{{.*}}, %[[B1]] :
// EACH: cleave.accumulate_grad @w1
// EACH: %[[W0:.*]] = cleave.get_param @w0
// EACH-NEXT: %[[A0:.*]] = cleave.matmul %arg3, %[[W0]] {cleave.recompute}
// EACH-NEXT: %[[B0:.*]] = cleave.tanh %[[A0]] {cleave.recompute}
// EACH-NEXT: cleave.mul %{{.*}}, %[[B0]] :
// EACH: cleave.accumulate_grad @w0

// Both layers as one segment (group_2; contiguous too: one stage): the
// second layer's input is recomputed along with it, and only the first
// layer's input (the embedding) and the head's are kept.
// GROUP-LABEL: func.func @forward(
// GROUP: return %loss, %dinput, %11, %1, %arg0 :
// GROUP-LABEL: func.func @forward_backward(
// GROUP: cleave.accumulate_grad @wte
// GROUP: cleave.matmul %arg2, %{{.*}} {cleave.recompute}
// GROUP-NEXT: cleave.tanh %{{.*}} {cleave.recompute}
// GROUP-NEXT: cleave.mul %{{.*}} {cleave.recompute}
// GROUP-NEXT: cleave.add %arg2, %{{.*}} {cleave.recompute}
// GROUP: cleave.matmul %{{.*}} {cleave.recompute}
// GROUP-NEXT: cleave.tanh %{{.*}} {cleave.recompute}
// GROUP-NOT: recompute
// GROUP: return

// Only the layer named by prefix is recomputed: layer 0's tanh stays saved.
// PREFIX-LABEL: func.func @forward(
// PREFIX: return %loss, %dinput, %11, %6, %4, %1, %arg0 :
// PREFIX-LABEL: func.func @forward_backward(
// PREFIX: cleave.matmul %arg2, %{{.*}} {cleave.recompute}
// PREFIX-NEXT: cleave.tanh %{{.*}} {cleave.recompute}
// PREFIX-NOT: recompute
// PREFIX: return

// NONE-LABEL: func.func @forward(
// NONE: return %loss, %dinput, %11, %9, %6, %4, %1, %arg0 :
// NONE-NOT: recompute
