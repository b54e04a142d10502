// Tests of --cleave-pipeline-partition and --cleave-pipeline-schedule: a
// small model with a tied embedding and head split into stage modules
// (cost-based, at named nodes, by memory), the errors, and the programs the
// emitter writes for each pipeline rank (receives, sends, groups, schedule).
// RUN: cleave-opt %s --cleave-input-roles "--cleave-pipeline-partition=stages=2 rates=%inputs/rates-flops.json" | FileCheck %s
// RUN: cleave-opt %s --cleave-input-roles "--cleave-pipeline-partition=stages=3 split-points=/l2/MatMul,/head/MatMul" | FileCheck %s --check-prefix=SPLIT
// RUN: cleave-opt %s --cleave-input-roles "--cleave-pipeline-partition=stages=2 optimize=memory memory-weight=1.0 rates=%inputs/rates-flops.json" | FileCheck %s --check-prefix=MEM
// RUN: not cleave-opt %s --cleave-pipeline-partition=stages=5 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not cleave-opt %s "--cleave-pipeline-partition=stages=2 split-points=/nope" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not cleave-opt %s "--cleave-pipeline-partition=stages=3 split-points=/head/MatMul,/l2/MatMul" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-pipeline-partition{stages=2 rates=%inputs/rates-flops.json},builtin.module(cleave-autodiff{microbatches=4},cleave-optimizer{grad-clip=1.0}),cleave-pipeline-schedule{ranks=2 microbatches=4 kind=simple},builtin.module(cleave-memory-plan))' | FileCheck %s --check-prefix=SCHED
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-pipeline-partition{stages=4},builtin.module(cleave-autodiff{microbatches=3}),cleave-pipeline-schedule{ranks=2 microbatches=3 kind=interleaved_virtual})' 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: rm -rf %t && cleave-opt %s --pass-pipeline='builtin.module(cleave-input-roles,cleave-place-ranks{pipeline=2},cleave-pipeline-partition{stages=2 rates=%inputs/rates-flops.json},builtin.module(cleave-autodiff{microbatches=2},cleave-optimizer{grad-clip=1.0}),cleave-pipeline-schedule{ranks=2 microbatches=2},builtin.module(cleave-memory-plan),cleave-stage-transfers,cleave-emit-program{output-dir=%t microbatches=2})' -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-0.pb | FileCheck %s --check-prefix=RANK0
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-1.pb | FileCheck %s --check-prefix=RANK1
// RUN: FileCheck %s --check-prefix=PLAN < %t/plan.json

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

// Counting FLOPs only (test/inputs/rates-flops.json), the head's product
// over the vocabulary (2048) about equals the two layers (2 x 1152): the cut
// goes before the head, and @emb is held by both stages.
// CHECK: module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64}
// CHECK-DAG: cleave.parameter @emb {cleave.tied_stages = [0, 1]
// CHECK-DAG: cleave.parameter @w1
// CHECK-DAG: cleave.parameter @w2
// CHECK: func.func @forward(%arg0: tensor<2x4xi64> {cleave.role = "tokens"}) -> (tensor<2x4x8xf32> {cleave.boundary = 0 : i64, cleave.differentiable}) attributes {cleave.first_node = "/emb/Gather", cleave.last_node = "/l2/Add"}
// CHECK: module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64}
// CHECK-NEXT: cleave.parameter @emb {cleave.tied_stages = [0, 1]
// CHECK-NEXT: func.func @forward(%arg0: tensor<2x4x8xf32> {cleave.boundary = 0 : i64, cleave.differentiable}, %arg1: tensor<2x4xi64> {cleave.role = "targets"}) -> tensor<f32> attributes {cleave.first_node = "/head/MatMul", cleave.last_node = "/loss"}
// CHECK-NOT: func.func

// SPLIT: module @stage0
// SPLIT: cleave.first_node = "/emb/Gather", cleave.last_node = "/l1/Add"
// SPLIT: module @stage1
// SPLIT-NOT: cleave.parameter @emb
// SPLIT: cleave.first_node = "/l2/MatMul", cleave.last_node = "/l2/Add"
// SPLIT: module @stage2
// SPLIT: cleave.parameter @emb {cleave.tied_stages = [0, 2]
// SPLIT: cleave.first_node = "/head/MatMul", cleave.last_node = "/loss"

// Memory alone balances the parameters: the first stage takes a layer too.
// MEM: cleave.first_node = "/emb/Gather", cleave.last_node = "/l1/Add"

// MANY: error: 5 pipeline stages (pipeline_parallel_degree x virtual_pipeline_degree) need 4 places to cut between layers, but the model has 3 (it has 4 pieces to place); use at most 4 stages
// NAME: error: partition_points: no ONNX node named '/nope' in the model (node names look like '/emb/Gather'
// ORDER: error: partition_points: '/l2/MatMul' does not come after the previous split point

// GPipe keeps all four microbatches in flight on both stages; each stage
// sums the tied gradient with the other and the clipping norm over the
// pipeline.
// SCHED: cleave.schedule = [array<i64: 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 2, 2, 0, 0, 3, 3, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 2, 2, 0, 1, 3, 3>, array<i64: 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 2, 2, 1, 0, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 3, 3>]
// SCHED: module @stage0
// SCHED-SAME: cleave.slots = 4
// SCHED: cleave.all_reduce_grads [@emb] {group = "pipeline", members = array<i64: 0, 1>, reduce = "sum"}
// SCHED: cleave.all_reduce %{{.*}} {{.*}}group = "pipeline"
// SCHED: module @stage1
// SCHED-SAME: cleave.slots = 4

// VIRTUAL: error: pipeline "interleaved_virtual" needs microbatches to be a multiple of pipeline_parallel_degree

// Rank 0 runs stage 0 (1F1B with 2 microbatches: both forwards, then both
// backwards, so two slots); its forward sends the activation, its backward
// receives the gradient.
// RANK0: pipeline_degree: 2
// RANK0: name: "pipeline"
// RANK0: name: "tied:0,1"
// RANK0: name: "stage 0 forward slot 0"
// RANK0: send_recv {
// RANK0-NEXT: send: true
// RANK0-NEXT: peer: 1
// RANK0: name: "stage 0 backward slot 0"
// RANK0-NEXT: kind: BACKWARD
// RANK0-NEXT: body {
// RANK0-NEXT: send_recv {
// RANK0-NEXT: peer: 1
// RANK0-NEXT: tensor:
// RANK0-NEXT: tag: 256
// RANK0: name: "stage 0 forward slot 1"
// Rank 1 receives the activation first and sends the gradient back.
// RANK1: rank: 1
// RANK1: name: "stage 1 forward"
// RANK1-NEXT: body {
// RANK1-NEXT: send_recv {
// RANK1-NEXT: tensor:
// RANK1-NEXT: }
// RANK1: name: "stage 1 backward"
// RANK1: send_recv {
// RANK1-NEXT: send: true
// RANK1-NEXT: tensor:
// RANK1-NEXT: tag: 256
// RANK1: role: TARGETS
// RANK1-NOT: role: TOKENS

// PLAN: "pipeline": 2
// PLAN: "kind": "interleaved"
// PLAN: "theoretical_bubble": 0.33
// PLAN: "first_node": "/emb/Gather"
// PLAN: "kind": "forward"
