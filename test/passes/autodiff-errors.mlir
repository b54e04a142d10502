// What --cleave-autodiff refuses, each with an error naming the op.
// RUN: not cleave-opt %s --cleave-autodiff 2>&1 | FileCheck %s --check-prefix=NORULE
// RUN: not cleave-opt %s --cleave-autodiff=microbatches=0 2>&1 | FileCheck %s --check-prefix=MB

cleave.parameter @w : tensor<4xf32>

// A gradient op in a forward function has no rule of its own (no second
// derivatives): the error names it and its ONNX node.
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4xf32>
  %d = cleave.silu_grad %w, %x : tensor<4xf32> loc("/twice")
  %s = cleave.reduce_sum %d {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// NORULE: error: loc("/twice"): 'cleave.silu_grad' op has no gradient rule, but the loss depends on a parameter through it
// MB: error: cleave-autodiff: microbatches must be at least 1
