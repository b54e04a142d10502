// --cleave-pipeline-partition's places between layers are never inside one
// ONNX node's ops when they cross fewer bytes than every cut between nodes.
// Tensor parallelism lowers the vocab-parallel embedding (and the
// cross-entropy) to a chain whose index arithmetic (the rank's vocabulary
// offset, an i64 scalar) crosses 8 bytes, fewer than the residual stream;
// counted as before, that cut was the only place (stage 0 computing the
// offset alone) and 4 stages were refused. Below, the embedding's offset
// is such a chain, all located at /emb/Gather: the places are those of
// pipeline-partition-mixed-precision.mlir.
// RUN: cleave-opt %s "--cleave-pipeline-partition=stages=4" | FileCheck %s

cleave.parameter @emb {init = "normal:0.02"} : tensor<16x8xf32>
cleave.parameter @w1 {init = "normal:0.02"} : tensor<8x8xf32>
cleave.parameter @w2 {init = "normal:0.02"} : tensor<8x8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %e = cleave.get_param @emb : tensor<16x8xf32>
  %c1 = cleave.constant dense<1> : tensor<i64> loc("/emb/Gather")
  %c0 = cleave.constant dense<0> : tensor<i64> loc("/emb/Gather")
  %off = cleave.mul %c1, %c0 : (tensor<i64>, tensor<i64>) -> tensor<i64> loc("/emb/Gather")
  %ids = cleave.sub %x, %off : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64> loc("/emb/Gather")
  %h0 = cleave.embedding %e, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32> loc("/emb/Gather")
  %w1 = cleave.get_param @w1 : tensor<8x8xf32>
  %a1 = cleave.matmul %h0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/l1/MatMul")
  %g1 = cleave.gelu %a1 : tensor<2x4x8xf32> loc("/l1/Gelu")
  %h1 = cleave.add %h0, %g1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/l1/Add")
  %w2 = cleave.get_param @w2 : tensor<8x8xf32>
  %a2 = cleave.matmul %h1, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/l2/MatMul")
  %g2 = cleave.gelu %a2 : tensor<2x4x8xf32> loc("/l2/Gelu")
  %h2 = cleave.add %h1, %g2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/l2/Add")
  %e2 = cleave.get_param @emb : tensor<16x8xf32>
  %lg = cleave.matmul %h2, %e2 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> loc("/head/MatMul")
  %l2 = cleave.reshape %lg : tensor<2x4x16xf32> -> tensor<8x16xf32> loc("/head/Reshape")
  %t2 = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/head/Reshape_1")
  %loss = cleave.softmax_cross_entropy %l2, %t2 {reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}

// CHECK: module @stage0
// CHECK: cleave.first_node = "/emb/Gather", cleave.last_node = "/emb/Gather"
// CHECK: cleave.mul
// CHECK: cleave.sub
// CHECK: cleave.embedding
// CHECK: module @stage1
// CHECK: cleave.first_node = "/l1/MatMul", cleave.last_node = "/l1/Add"
// CHECK: module @stage2
// CHECK: cleave.first_node = "/l2/MatMul", cleave.last_node = "/l2/Add"
// CHECK: module @stage3
// CHECK: cleave.first_node = "/head/MatMul", cleave.last_node = "/loss"
