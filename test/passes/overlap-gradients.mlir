// Tests of --cleave-overlap-gradients: each data-parallel bucket starts in
// the last microbatch's copy of the backward, right after the accumulation
// that completes its gradients, and the optimizer waits for it; a bucket
// the backward does not complete, and one over another group, stay as they
// are; one data-parallel rank (no bucket over "data") changes nothing; each
// stage module of a pipeline numbers its own events. A second run changes
// nothing more, and the printed IR parses again.
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-overlap-gradients,builtin.module(cleave-overlap-gradients))' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-overlap-gradients,builtin.module(cleave-overlap-gradients))' | cleave-opt --split-input-file --pass-pipeline='builtin.module(cleave-overlap-gradients,builtin.module(cleave-overlap-gradients))' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-overlap-gradients --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT

cleave.parameter @a : tensor<4x8xf32>
cleave.parameter @b : tensor<8xf32>
cleave.parameter @c : tensor<8xf32>
cleave.parameter @d : tensor<8xf32>

// @a is read twice (a tied embedding and head): its gradient is complete at
// its second accumulation only.
func.func @backward(%da: tensor<4x8xf32>, %db: tensor<8xf32>, %dc: tensor<8xf32>)
    attributes {cleave.kind = "backward"} {
  cleave.accumulate_grad @a, %da : tensor<4x8xf32>
  %0 = cleave.exp %db : tensor<8xf32>
  cleave.accumulate_grad @b, %0 : tensor<8xf32>
  cleave.accumulate_grad @c, %dc : tensor<8xf32>
  %1 = cleave.exp %da : tensor<4x8xf32>
  cleave.accumulate_grad @a, %1 : tensor<4x8xf32>
  return
}

// @d's gradient is not accumulated by the backward: its bucket stays at the
// optimizer. The bucket over "tied:0,3" is not data parallelism's.
func.func @optimizer() attributes {cleave.kind = "optimizer"} {
  cleave.all_reduce_grads [@c] {group = "data"}
  cleave.all_reduce_grads [@a, @b] {group = "data"}
  cleave.all_reduce_grads [@d] {group = "data"}
  cleave.all_reduce_grads [@c] {group = "tied:0,3", reduce = "sum"}
  return
}

// The backward itself is unchanged; it names its copy.
// CHECK-LABEL: func.func @backward(
// CHECK-SAME: cleave.last_microbatch = @backward_last_microbatch
// CHECK-NOT: all_reduce_grads_start
// CHECK: return
// CHECK-LABEL: func.func @backward_last_microbatch(
// CHECK-SAME: cleave.kind = "backward", cleave.last_microbatch_of = @backward
// CHECK-NEXT: cleave.accumulate_grad @a
// CHECK-NEXT: cleave.exp
// CHECK-NEXT: cleave.accumulate_grad @b
// CHECK-NEXT: cleave.accumulate_grad @c
// CHECK-NEXT: cleave.all_reduce_grads_start [@c] event 1 {group = "data"}
// CHECK-NEXT: cleave.exp
// CHECK-NEXT: cleave.accumulate_grad @a
// CHECK-NEXT: cleave.all_reduce_grads_start [@a, @b] event 2 {group = "data"}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer(
// CHECK-NEXT: cleave.wait_grads event 1
// CHECK-NEXT: cleave.wait_grads event 2
// CHECK-NEXT: cleave.all_reduce_grads [@d] {group = "data"}
// CHECK-NEXT: cleave.all_reduce_grads [@c] {group = "tied:0,3", reduce = "sum"}
// CHECK-NEXT: return

// PRINT: IR Dump After OverlapGradients (cleave-overlap-gradients)
// PRINT: func.func @backward_last_microbatch(
// PRINT: cleave.all_reduce_grads_start [@c] event 1 {group = "data"}
// PRINT: cleave.all_reduce_grads_start [@a, @b] event 2 {group = "data"}
// PRINT: func.func @optimizer(
// PRINT-NEXT: cleave.wait_grads event 1
// PRINT-NEXT: cleave.wait_grads event 2

// -----

// One data-parallel rank: no bucket over "data", no copy.
cleave.parameter @a : tensor<8xf32>
func.func @backward(%da: tensor<8xf32>) attributes {cleave.kind = "backward"} {
  cleave.accumulate_grad @a, %da : tensor<8xf32>
  return
}
func.func @optimizer() attributes {cleave.kind = "optimizer"} {
  return
}

// CHECK-LABEL: func.func @backward(
// CHECK-NOT: cleave.last_microbatch
// CHECK-NOT: _last_microbatch
// CHECK-NOT: wait_grads
// CHECK: func.func @optimizer(

// -----

// A pipeline: each stage module has its own backward copy and events.
module @stage0 attributes {cleave.stage = 0 : i64} {
  cleave.parameter @a : tensor<8xf32>
  func.func @backward(%da: tensor<8xf32>) attributes {cleave.kind = "backward"} {
    cleave.accumulate_grad @a, %da : tensor<8xf32>
    return
  }
  func.func @optimizer() attributes {cleave.kind = "optimizer"} {
    cleave.all_reduce_grads [@a] {group = "data"}
    return
  }
}
module @stage1 attributes {cleave.stage = 1 : i64} {
  cleave.parameter @b : tensor<8xf32>
  func.func @backward(%db: tensor<8xf32>) attributes {cleave.kind = "backward"} {
    cleave.accumulate_grad @b, %db : tensor<8xf32>
    return
  }
  func.func @optimizer() attributes {cleave.kind = "optimizer"} {
    cleave.all_reduce_grads [@b] {group = "data"}
    return
  }
}

// CHECK-LABEL: module @stage0
// CHECK: func.func @backward_last_microbatch(
// CHECK-NEXT: cleave.accumulate_grad @a
// CHECK-NEXT: cleave.all_reduce_grads_start [@a] event 1 {group = "data"}
// CHECK: func.func @optimizer(
// CHECK-NEXT: cleave.wait_grads event 1
// CHECK-LABEL: module @stage1
// CHECK: func.func @backward_last_microbatch(
// CHECK-NEXT: cleave.accumulate_grad @b
// CHECK-NEXT: cleave.all_reduce_grads_start [@b] event 1 {group = "data"}
// CHECK: func.func @optimizer(
// CHECK-NEXT: cleave.wait_grads event 1
