// Tests of --cleave-data-parallel: buckets of gradient all-reduces at the
// start of the optimizer, last parameters first; nothing for one rank;
// an error without an optimizer. And the emitted programs (the all-reduces
// overlapped by cleave-overlap-gradients): one per rank, each with its
// first sample and the collective over the data group.
// RUN: cleave-opt %s --cleave-autodiff --cleave-optimizer --cleave-data-parallel="degree=2 bucket-bytes=100" | FileCheck %s
// RUN: cleave-opt %s --cleave-autodiff --cleave-optimizer --cleave-data-parallel=degree=1 | FileCheck %s --check-prefix=ONE
// RUN: not cleave-opt %s --cleave-autodiff --cleave-data-parallel=degree=2 2>&1 | FileCheck %s --check-prefix=NOOPT
// RUN: rm -rf %t && cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff=microbatches=2 --cleave-optimizer --cleave-data-parallel=degree=2 --cleave-memory-plan --cleave-overlap-gradients --cleave-pipeline-schedule=microbatches=2 --cleave-emit-program="output-dir=%t microbatches=2 data-degree=2" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-1.pb | FileCheck %s --check-prefix=RANK1
// RUN: rm -rf %t.b && cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff=microbatches=2 --cleave-optimizer "--cleave-data-parallel=degree=2 bucket-bytes=1" --cleave-memory-plan --cleave-overlap-gradients --cleave-pipeline-schedule=microbatches=2 --cleave-emit-program="output-dir=%t.b microbatches=2 data-degree=2" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t.b/rank-0.pb | FileCheck %s --check-prefix=OVERLAP
// RUN: rm -rf %t.c && cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-data-parallel=degree=2 --cleave-memory-plan --cleave-overlap-gradients --cleave-pipeline-schedule=microbatches=1 --cleave-emit-program="output-dir=%t.c microbatches=1 data-degree=2" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t.c/rank-0.pb | FileCheck %s --check-prefix=ONEMB
// RUN: rm -rf %t.d && not cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-autodiff=microbatches=2 --cleave-optimizer --cleave-data-parallel=degree=2 --cleave-overlap-gradients --cleave-memory-plan --cleave-pipeline-schedule=microbatches=2 --cleave-emit-program="output-dir=%t.d microbatches=2 data-degree=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ORDER

cleave.parameter @w {init = "normal:0.02"} : tensor<4x8xf32>
cleave.parameter @b {init = "zeros"} : tensor<8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4x8xf32>
  %f = cleave.cast %x : tensor<2x4xi64> -> tensor<2x4xf32>
  %y = cleave.matmul %f, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %b = cleave.get_param @b : tensor<8xf32>
  %z = cleave.add %y, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s = cleave.reduce_mean %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// @b is 32 bytes, @w 128: with buckets of 100 bytes, @b and @w go together
// (the bucket closes once it reaches 100 bytes).
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: cleave.all_reduce_grads [@b, @w] {group = "data"}
// CHECK-NEXT: cleave.get_grad @w
// ONE-LABEL: func.func @optimizer
// ONE-NOT: all_reduce_grads
// NOOPT: error: cleave-data-parallel: no optimizer function to average gradients for; run cleave-optimizer first

// RANK1: rank: 1
// RANK1-NEXT: world_size: 2
// RANK1-NEXT: data_degree: 2
// RANK1: data_rank: 1
// RANK1: name: "data"
// RANK1-NEXT: ranks: 0
// RANK1-NEXT: ranks: 1
// RANK1: global_batch: 8
// RANK1-NEXT: microbatch_size: 2
// RANK1-NEXT: microbatches: 2
// RANK1-NEXT: seq_len: 4
// RANK1-NEXT: first_sample: 4
// The bucket's all-reduce is started in the last microbatch's backward,
// right after its last gradient is accumulated, and the optimizer waits for
// it.
// RANK1: kind: OPTIMIZER
// RANK1-NEXT: body {
// RANK1-NEXT: event {
// RANK1-NEXT: id: 1
// RANK1-NEXT: wait: true
// RANK1: name: "forward_backward (last microbatch)"
// RANK1: op: "accumulate_grad"
// RANK1: op: "accumulate_grad"
// RANK1-NEXT: inputs:
// RANK1-NEXT: outputs: [[LAST:[0-9]+]]
// RANK1: collective {
// RANK1-NEXT: inputs:
// RANK1-NEXT: inputs:
// RANK1-NEXT: outputs:
// RANK1-NEXT: outputs:
// RANK1-NEXT: reduce: MEAN
// RANK1-NEXT: event: 1
// RANK1: schedule {
// RANK1: schedule {
// RANK1: schedule {
// RANK1: schedule {
// RANK1-NEXT: function: 3
// RANK1-NEXT: microbatch: 1

// One bucket per parameter: @b's gradient is final first, and its
// all-reduce runs while the backward still computes @w's.
// OVERLAP: name: "forward_backward (last microbatch)"
// OVERLAP: op: "accumulate_grad"
// OVERLAP: collective {
// OVERLAP: event: 1
// OVERLAP: op: "matmul"
// OVERLAP: op: "accumulate_grad"
// OVERLAP: collective {
// OVERLAP: event: 2

// With one microbatch the step's only backward runs the copy that starts
// the all-reduce.
// ONEMB: name: "forward_backward (last microbatch)"
// ONEMB: op: "accumulate_grad"
// ONEMB: op: "accumulate_grad"
// ONEMB: collective {
// ONEMB: event: 1
// ONEMB: schedule {
// ONEMB-NEXT: }
// ONEMB-NEXT: schedule {
// ONEMB-NEXT: function: 3
// ONEMB-NEXT: }
// ONEMB-NEXT: schedule {
// ONEMB-NEXT: function: 2
// ONEMB-NEXT: microbatch: -1

// Overlapped before the memory plan, the copy is planned as a function of
// its own, in other storage than the backward it copies: refused.
// ORDER: error: the last-microbatch copy of a backward differs from it at 'tensor<f32>' (offset {{[0-9]+}}); run cleave-overlap-gradients after cleave-memory-plan
