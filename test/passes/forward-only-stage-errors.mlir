// A stage without a backward must come before every stage with one: here
// stage 0 sends a float activation, so its backward waits for a gradient,
// but stage 1 turns that activation into integers and has no backward to
// send one. --cleave-pipeline-schedule refuses it, naming both stages.
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=3},cleave-pipeline-partition{stages=3 split-points=/mid/Cast,/emb2/Gather},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer),cleave-pipeline-schedule{ranks=3 microbatches=2})' 2>&1 | FileCheck %s
// CHECK: error: stage 1 has no backward (no gradient flows through it to the loss) but stage 0 before it has one, which would wait for a gradient stage 1 never sends; choose other partition points so that the stages without gradients come first

cleave.parameter @emb {init = "normal:0.02"} : tensor<16x8xf32>
cleave.parameter @emb2 {init = "normal:0.02"} : tensor<16x16xf32>

func.func @forward(%x: tensor<8xi64>, %t: tensor<64xi64>) -> tensor<f32> {
  %e = cleave.get_param @emb : tensor<16x8xf32>
  %h0 = cleave.embedding %e, %x : (tensor<16x8xf32>, tensor<8xi64>) -> tensor<8x8xf32> loc("/emb/Gather")
  %c = cleave.cast %h0 : tensor<8x8xf32> -> tensor<8x8xi64> loc("/mid/Cast")
  %e2 = cleave.get_param @emb2 : tensor<16x16xf32>
  %h1 = cleave.embedding %e2, %c : (tensor<16x16xf32>, tensor<8x8xi64>) -> tensor<8x8x16xf32> loc("/emb2/Gather")
  %lg = cleave.reshape %h1 : tensor<8x8x16xf32> -> tensor<64x16xf32> loc("/head/Reshape")
  %loss = cleave.softmax_cross_entropy %lg, %t {reduction = #cleave.reduction<mean>} : (tensor<64x16xf32>, tensor<64xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}
