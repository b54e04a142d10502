// Tests of --cleave-offload-activations after cleave-remat: each
// checkpoint a recomputed segment reads (the layers' inputs %x0, %x1, %x2)
// is copied to host memory right after the forward makes it and saved as
// the host copy; the backward fetches it back `horizon` segments before
// the backward of the segment that reads it starts (the segments run in
// reverse: layer 2's first), or at the backward's start for the last
// ones. What is saved but not recomputed from (the head's input, the loss
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
