// Tests of --cleave-verify-partitioned on what cleave-pipeline-partition
// makes: a two-stage split with a tied embedding passes unchanged (also
// with a mesh, which every stage inherits), and so does a module that was
// not partitioned. The broken contracts are in verify-partitioned-invalid.mlir.
// RUN: cleave-opt %s "--cleave-pipeline-partition=stages=2 rates=%inputs/rates-flops.json" --cleave-verify-partitioned | FileCheck %s
// RUN: cleave-opt %s --cleave-verify-partitioned | FileCheck %s --check-prefix=ONE

module attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2]>} {
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
}

// CHECK: module @stage0 attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2]>, cleave.stage = 0 : i64, cleave.stages = 2 : i64}
// CHECK: cleave.parameter @emb {cleave.tied_stages = [0, 1]
// CHECK: -> (tensor<2x4x8xf32> {cleave.boundary = 0 : i64, cleave.differentiable})
// CHECK: module @stage1 attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2]>, cleave.stage = 1 : i64, cleave.stages = 2 : i64}
// CHECK: cleave.parameter @emb {cleave.tied_stages = [0, 1]
// CHECK: func.func @forward(%arg0: tensor<2x4x8xf32> {cleave.boundary = 0 : i64, cleave.differentiable}

// ONE: func.func @forward
// ONE-NOT: module @stage
