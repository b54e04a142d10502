// Tests of --cleave-merge-chunk-optimizers: four stages on two pipeline
// ranks (stage k on rank k mod 2). Each rank gets one optimizer, in its
// first stage: both chunks' sums of squares, added, one all-reduce over the
// pipeline, then both chunks' updates reading it; the second chunk's
// optimizer is gone. Without clipping the bodies are concatenated.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=4 split-points=/l1/MatMul,/l2/MatMul,/head/MatMul},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer{grad-clip=1.0}),cleave-merge-chunk-optimizers)' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=4 split-points=/l1/MatMul,/l2/MatMul,/head/MatMul},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer),cleave-merge-chunk-optimizers)' | FileCheck %s --check-prefix=NOCLIP
// One stage per rank: nothing to merge.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-place-ranks{pipeline=4},cleave-pipeline-partition{stages=4 split-points=/l1/MatMul,/l2/MatMul,/head/MatMul},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer{grad-clip=1.0}),cleave-merge-chunk-optimizers)' | FileCheck %s --check-prefix=ONE
// The whole pipeline emits one optimizer step per rank.
// RUN: rm -rf %t && cleave-opt %s --cleave-program-pipeline='output-dir=%t pipeline-degree=2 virtual-stages=2 schedule=interleaved_virtual microbatches=2 grad-clip=1.0 split-points=/l1/MatMul,/l2/MatMul,/head/MatMul' -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-0.pb | FileCheck %s --check-prefix=RANK0

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
// CHECK: func.func @optimizer(%[[STEP:.*]]: tensor<i64>
// CHECK: cleave.all_reduce_grads [@emb] {group = "pipeline", members = array<i64: 0, 1>, reduce = "sum"}
// CHECK: %[[N0:.*]] = cleave.sum_squares
// CHECK: %[[N2:.*]] = cleave.sum_squares
// CHECK: %[[N:.*]] = cleave.add %[[N0]], %[[N2]]
// CHECK: %[[TOTAL:.*]] = cleave.all_reduce %[[N]] {group = "pipeline"}
// CHECK: cleave.adamw @emb, %{{.*}}, %[[STEP]] norm %[[TOTAL]]
// CHECK: cleave.adamw @w2, %{{.*}}, %[[STEP]] norm %[[TOTAL]]
// CHECK-NEXT: return
// Rank 1 (stages 1 and 3): stage 3's tied sum comes before the norm.
// CHECK: module @stage1
// CHECK: func.func @optimizer
// CHECK: cleave.all_reduce_grads [@emb] {group = "pipeline", members = array<i64: 0, 1>, reduce = "sum"}
// CHECK: %[[T1:.*]] = cleave.all_reduce %{{.*}} {group = "pipeline"}
// CHECK: cleave.adamw @w1, %{{.*}} norm %[[T1]]
// CHECK: cleave.adamw @emb, %{{.*}} norm %[[T1]]
// CHECK: module @stage2
// CHECK-NOT: func.func @optimizer
// CHECK: module @stage3
// CHECK-NOT: func.func @optimizer

// NOCLIP: module @stage0
// NOCLIP: func.func @optimizer
// NOCLIP-NOT: cleave.all_reduce %
// NOCLIP: cleave.adamw @emb
// NOCLIP: cleave.adamw @w2
// NOCLIP: module @stage2
// NOCLIP-NOT: func.func @optimizer

// ONE-COUNT-4: func.func @optimizer

// RANK0: name: "stage 0 optimizer"
// RANK0-NEXT: kind: OPTIMIZER
// RANK0-NOT: kind: OPTIMIZER
// RANK0: schedule {
