// The pipeline partition runs before autodiff and remat, so it estimates
// what activation checkpointing will recompute: under `selective`
// (recompute-attention=true) the attention core of a layer (the scores'
// product, their scale and the softmax) is costed forward twice, and here
// that moves the cut.
// RUN: cleave-opt %s --cleave-input-roles "--cleave-pipeline-partition=stages=2 rates=%inputs/rates-flops.json" | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --cleave-input-roles "--cleave-pipeline-partition=stages=2 rates=%inputs/rates-flops.json recompute-attention=true" | FileCheck %s --check-prefix=SELECTIVE

cleave.parameter @emb {init = "normal:0.02"} : tensor<10x8xf32>
cleave.parameter @w2 {init = "normal:0.02"} : tensor<8x8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %e = cleave.get_param @emb : tensor<10x8xf32>
  %h0 = cleave.embedding %e, %x : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32> loc("/emb/Gather")
  %s = cleave.matmul %h0, %h0 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32> loc("/l1/attn/MatMul")
  %c = cleave.constant dense<0.5> : tensor<f32> loc("/l1/attn/scale")
  %m = cleave.mul %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32> loc("/l1/attn/Mul")
  %p = cleave.softmax %m {axis = 2 : i64} : tensor<2x4x4xf32> loc("/l1/attn/Softmax")
  %o = cleave.matmul %p, %h0 : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/l1/attn/MatMul_1")
  %h1 = cleave.add %h0, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/l1/Add")
  %w2 = cleave.get_param @w2 : tensor<8x8xf32>
  %a2 = cleave.matmul %h1, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/l2/MatMul")
  %g2 = cleave.gelu %a2 : tensor<2x4x8xf32> loc("/l2/Gelu")
  %h2 = cleave.add %h1, %g2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/l2/Add")
  %e2 = cleave.get_param @emb : tensor<10x8xf32>
  %lg = cleave.matmul %h2, %e2 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32> loc("/head/MatMul")
  %l2 = cleave.reshape %lg : tensor<2x4x10xf32> -> tensor<8x10xf32> loc("/head/Reshape")
  %t2 = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/head/Reshape_1")
  %loss = cleave.softmax_cross_entropy %l2, %t2 {reduction = #cleave.reduction<mean>} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}

// Counting FLOPs only (test/inputs/rates-flops.json), each op forward and
// backward (x 3): the embedding 64, layer 1 1184 (its core: the scores'
// product 512, scale 32, softmax 32), layer 2 1152, the head 1369 FLOPs.
// Without recomputation the slowest stage is least with the cut before the
// head: (64 + 1184 + 1152) x 3 = 7200 against the head's 4107 (cut before
// layer 2: 1152 x 3 + 4107 = 7563).
// NONE: module @stage0
// NONE: cleave.first_node = "/emb/Gather", cleave.last_node = "/l2/Add"
// NONE: module @stage1
// NONE: cleave.first_node = "/head/MatMul", cleave.last_node = "/loss"

// With the core's 576 FLOPs run twice the first stage would take
// 7200 + 576 = 7776; the cut before layer 2 gives 3744 + 576 = 4320 and
// 7563: the cut moves.
// SELECTIVE: module @stage0
// SELECTIVE: cleave.first_node = "/emb/Gather", cleave.last_node = "/l1/Add"
// SELECTIVE: module @stage1
// SELECTIVE: cleave.first_node = "/l2/MatMul", cleave.last_node = "/loss"
