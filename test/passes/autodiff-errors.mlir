// What --cleave-autodiff refuses, each with an error naming the op.
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff 2>&1 | FileCheck %s --check-prefixes=NORULE,MASK
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff=microbatches=0 2>&1 | FileCheck %s --check-prefix=MB

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

// -----

cleave.parameter @mask : tensor<4x4xf32>

// Attention has no gradient rule for its mask: a mask read from a trained
// parameter (here a float mask buffer the export made an initializer,
// without cleave.frozen) is refused, not left untrained.
func.func @forward(%q: tensor<1x1x4x2xf32>) -> tensor<f32> {
  %m = cleave.get_param @mask : tensor<4x4xf32>
  %a = cleave.attention %q, %q, %q mask %m {scale = 0.5 : f32}
      : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<4x4xf32>) -> tensor<1x1x4x2xf32> loc("/attn")
  %s = cleave.reduce_sum %a {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x1x4x2xf32> -> tensor<f32>
  return %s : tensor<f32>
}
// MASK: error: loc("/attn"): 'cleave.attention' op has no gradient rule for its mask, but the mask depends on a trained parameter; if that parameter is a buffer (a fixed mask), list it in the spec's frozen_parameters
