// --cleave-pipeline-partition after --cleave-mixed-precision finds the same
// places between layers as in fp32. The cast of the last layer's output to
// bf16 for the head's product crosses half the bytes of the residual stream
// (fp32) between layers: counted in real bytes it was the only least place,
// and 4 stages were refused as having 1 place to cut.
// RUN: cleave-opt %s "--cleave-pipeline-partition=stages=4" | FileCheck %s --check-prefixes=CHECK,FP32
// RUN: cleave-opt %s --cleave-mixed-precision=dtype=bf16 "--cleave-pipeline-partition=stages=4" | FileCheck %s --check-prefixes=CHECK,LOW
// RUN: cleave-opt %s --cleave-mixed-precision=dtype=fp16 "--cleave-pipeline-partition=stages=4" | FileCheck %s --check-prefixes=CHECK,LOW

cleave.parameter @emb {init = "normal:0.02"} : tensor<16x8xf32>
cleave.parameter @w1 {init = "normal:0.02"} : tensor<8x8xf32>
cleave.parameter @w2 {init = "normal:0.02"} : tensor<8x8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %e = cleave.get_param @emb : tensor<16x8xf32>
  %h0 = cleave.embedding %e, %x : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32> loc("/emb/Gather")
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
// CHECK: module @stage1
// CHECK: cleave.first_node = "/l1/MatMul", cleave.last_node = "/l1/Add"
// CHECK: module @stage2
// The last cut lies after the cast (located at the product it feeds): the
// head's stage receives the 16-bit value, half the bytes.
// FP32: -> (tensor<2x4x8xf32> {cleave.boundary = 0 : i64, cleave.differentiable}) attributes {cleave.first_node = "/l2/MatMul", cleave.last_node = "/l2/Add"}
// LOW: -> (tensor<2x4x8x{{bf16|f16}}> {cleave.boundary = 0 : i64, cleave.differentiable}) attributes {cleave.first_node = "/l2/MatMul", cleave.last_node = "/head/MatMul"}
// CHECK: module @stage3
// CHECK: cleave.first_node = "/head/MatMul", cleave.last_node = "/loss"
