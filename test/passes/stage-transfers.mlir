// Tests of --cleave-stage-transfers: a two-stage pipeline's boundaries
// become cleave.recv at the top of a function and cleave.send before its
// return, with the peer's pipeline coordinate and the tag pairing them;
// the saved results the backward reads are renumbered past the sent ones.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{data=2 pipeline=2},cleave-pipeline-partition{stages=2 split-points=/l2/MatMul},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer),cleave-pipeline-schedule{ranks=2 microbatches=2},builtin.module(cleave-memory-plan),cleave-stage-transfers)' | FileCheck %s
// With four stages on two ranks (interleaved), stage 1 (rank 1) receives
// from rank 0 and sends to rank 0 again (stage 2).
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=4 split-points=/l1/MatMul,/l2/MatMul,/head/MatMul},builtin.module(cleave-autodiff{microbatches=2}),cleave-pipeline-schedule{ranks=2 microbatches=2 kind=interleaved_virtual},builtin.module(cleave-memory-plan),cleave-stage-transfers)' | FileCheck %s --check-prefix=VIRTUAL
// Without a mesh the peers cannot be named.
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-partition{stages=2 split-points=/l2/MatMul},builtin.module(cleave-autodiff{microbatches=2}),cleave-pipeline-schedule{ranks=2 microbatches=2},builtin.module(cleave-memory-plan),cleave-stage-transfers)' 2>&1 | FileCheck %s --check-prefix=NOMESH
// A parameter tied across two stages of the same pipeline rank cannot sum
// its gradient over ranks: refused when the optimizer is built.
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=1},cleave-pipeline-partition{stages=3 split-points=/l2/MatMul,/head/MatMul},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer))' 2>&1 | FileCheck %s --check-prefix=SAMERANK

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

// Stage 0 sends its activation to pipeline rank 1 (tag 0) and drops it
// from its results; its backward receives the gradient (tag 256) and reads
// its saved values from the renumbered results.
// CHECK: module @stage0
// CHECK: func.func @forward(%{{.*}}: tensor<2x4xi64> {{{.*}}cleave.role = "tokens"}) -> (tensor<2x4x8xf32> {cleave.saved}, tensor<2x4x8xf32> {cleave.saved}, tensor<2x4xi64> {cleave.saved})
// CHECK: cleave.send %{{.*}} {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: return
// CHECK: func.func @forward_backward({{.*}}cleave.saved_from = 0 : i64{{.*}}cleave.saved_from = 1 : i64{{.*}}cleave.saved_from = 2 : i64}) attributes
// CHECK-NEXT: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 1 : i64, tag = 256 : i64} : tensor<2x4x8xf32>
// CHECK: cleave.all_reduce_grads [@emb] {group = "pipeline", members = array<i64: 0, 1>, reduce = "sum"}
// Stage 1 receives the activation first and sends its gradient back.
// CHECK: module @stage1
// CHECK: func.func @forward(%{{.*}}: tensor<2x4xi64> {{{.*}}cleave.role = "targets"})
// CHECK-NEXT: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 0 : i64, tag = 0 : i64}
// CHECK: func.func @forward_backward
// CHECK: cleave.send %{{.*}} {axis = "pipeline", peer = 0 : i64, tag = 256 : i64}
// CHECK-NEXT: return

// VIRTUAL: module @stage1
// VIRTUAL: func.func @forward() ->
// VIRTUAL-NEXT: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 0 : i64, tag = 0 : i64}
// VIRTUAL: cleave.send %{{.*}} {axis = "pipeline", peer = 0 : i64, tag = 512 : i64}
// VIRTUAL: func.func @forward_backward
// VIRTUAL-NEXT: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 0 : i64, tag = 768 : i64}
// VIRTUAL: cleave.send %{{.*}} {axis = "pipeline", peer = 0 : i64, tag = 256 : i64}
// VIRTUAL: module @stage2
// VIRTUAL: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 1 : i64, tag = 512 : i64}

// NOMESH: error: cleave-stage-transfers needs a cleave.mesh with a "pipeline" axis; run cleave-place-ranks first
// SAMERANK: error: parameter @emb is held by stages 0 and 2, which run on the same pipeline rank 0; choose other partition points or another virtual_pipeline_degree
