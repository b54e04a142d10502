// Tests of a pipeline stage that holds only integer work (here the
// reshapes of the token ids and targets): autodiff gives it no backward,
// so --cleave-pipeline-schedule schedules only its forwards (one slot,
// freed by each forward), the next stage sends it no gradient
// (--cleave-stage-transfers) and the emitter writes every rank's program.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=2 split-points=/emb/Gather},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer),cleave-pipeline-schedule{ranks=2 microbatches=2},builtin.module(cleave-memory-plan),cleave-stage-transfers)' | FileCheck %s
// With four stages on two ranks (interleaved_virtual), rank 0 holds the
// forward-only stage 0 and stage 2, which has a backward.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=4 split-points=/emb/Gather,/head/MatMul,/loss},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer),cleave-pipeline-schedule{ranks=2 microbatches=2 kind=interleaved_virtual})' | FileCheck %s --check-prefix=VIRTUAL
// The emitter writes both ranks' programs; rank 0 runs stage 0's forwards.
// RUN: rm -rf %t && cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=2 split-points=/emb/Gather},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer),cleave-pipeline-schedule{ranks=2 microbatches=2},builtin.module(cleave-memory-plan),cleave-stage-transfers,cleave-emit-program{output-dir=%t microbatches=2})' -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-0.pb | FileCheck %s --check-prefix=RANK0
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-1.pb | FileCheck %s --check-prefix=RANK1

cleave.parameter @emb {init = "normal:0.02"} : tensor<16x8xf32>
cleave.parameter @w1 {init = "normal:0.02"} : tensor<8x8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %xr = cleave.reshape %x : tensor<2x4xi64> -> tensor<8xi64> loc("/in/Reshape")
  %tr = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/in/Reshape_1")
  %e = cleave.get_param @emb : tensor<16x8xf32>
  %h0 = cleave.embedding %e, %xr : (tensor<16x8xf32>, tensor<8xi64>) -> tensor<8x8xf32> loc("/emb/Gather")
  %w1 = cleave.get_param @w1 : tensor<8x8xf32>
  %a1 = cleave.matmul %h0, %w1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> loc("/l1/MatMul")
  %g1 = cleave.gelu %a1 : tensor<8x8xf32> loc("/l1/Gelu")
  %h1 = cleave.add %h0, %g1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> loc("/l1/Add")
  %e2 = cleave.get_param @emb : tensor<16x8xf32>
  %lg = cleave.matmul %h1, %e2 {transpose_rhs} : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32> loc("/head/MatMul")
  %loss = cleave.softmax_cross_entropy %lg, %tr {reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}

// Rank 0 runs stage 0's forward for both microbatches in one slot; rank 1
// runs 1F1B with its backwards. Stage 0 has no backward time.
// CHECK: cleave.schedule = [array<i64: 0, 0, 0, 0, 0, 0, 1, 0>, array<i64: 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0>]
// CHECK: module @stage0 attributes {cleave.backward_seconds = 0.000000e+00 : f64,
// CHECK-SAME: cleave.slots = 1 : i64
// CHECK: func.func @forward(
// CHECK: cleave.send %{{.*}} {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<8xi64>
// CHECK-NEXT: cleave.send %{{.*}} {axis = "pipeline", peer = 1 : i64, tag = 1 : i64} : tensor<8xi64>
// CHECK-NEXT: return
// CHECK-NOT: func.func
// CHECK: module @stage1
// CHECK: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 0 : i64, tag = 0 : i64} : tensor<8xi64>
// CHECK-NEXT: cleave.recv {axis = "pipeline", cleave.offsets = array<i64: {{[0-9]+}}>, peer = 0 : i64, tag = 1 : i64} : tensor<8xi64>
// Stage 1's backward sends no gradient: its boundary arguments are integers.
// CHECK: func.func @forward_backward
// CHECK-NOT: cleave.send
// CHECK: func.func @optimizer

// Rank 0 runs stage 0's forwards and stage 2's forwards and backwards;
// only stage 0 is forward-only (one slot).
// VIRTUAL: cleave.schedule = [array<i64: 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 2, 0, 1, 1, 2, 1, 0, 0, 2, 1, 1, 1>, array<i64: 1, 0, 0, 0, 1, 0, 1, 1, 3, 0, 0, 0, 3, 1, 0, 0, 3, 0, 1, 0, 3, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1>]
// VIRTUAL: module @stage0 attributes {{{.*}}cleave.slots = 1 : i64
// VIRTUAL: module @stage1 attributes {{{.*}}cleave.slots = 2 : i64
// VIRTUAL: module @stage2 attributes {{{.*}}cleave.slots = 2 : i64

// RANK0: name: "stage 0 forward"
// RANK0-NOT: BACKWARD
// RANK0: schedule {
// RANK0-NEXT: }
// RANK0-NEXT: schedule {
// RANK0-NEXT: microbatch: 1
// RANK0-NEXT: }
// RANK0-NEXT: inputs {
// RANK1: name: "stage 1 backward"
// RANK1-NOT: send: true
// RANK1: name: "stage 1 optimizer"
