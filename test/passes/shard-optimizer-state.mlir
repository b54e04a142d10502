// Tests of --cleave-shard-optimizer-state (ZeRO-1) on 3 data ranks: the
// trained parameters get cleave.state_axis; the optimizer reduce-scatters
// the gradients first, reads 1-D chunks (whole 64-byte units: see below),
// sums the chunks' squares over "data", updates the chunks and all-gathers
// them; with several microbatches the reduce-scatters start in the
// backward. The memory plan pads the parameter and gradient buffers and
// gives the state one chunk; the emitter writes views of the padded buffers
// and of this rank's chunk, the rank's StateRange and the collectives in
// place. Errors: no mesh axis, after cleave-data-parallel, an alignment
// finer than the chunks'.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=3 --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=bucket-bytes=1000" --cleave-memory-plan | FileCheck %s
// RUN: rm -rf %t && cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=3 --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=bucket-bytes=1" --cleave-memory-plan --cleave-pipeline-schedule=microbatches=1 "--cleave-emit-program=output-dir=%t microbatches=1 data-degree=3" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-2.pb | FileCheck %s --check-prefix=RANK2
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-1.pb | FileCheck %s --check-prefix=RANK1
// RUN: not cleave-opt %s --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-memory-plan=alignment=128 2>&1 | FileCheck %s --check-prefix=ALIGN
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=3 --cleave-autodiff=microbatches=2 --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=bucket-bytes=1" --cleave-memory-plan --cleave-overlap-gradients | FileCheck %s --check-prefix=OVERLAP
// RUN: rm -rf %t.o && cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=3 --cleave-autodiff=microbatches=2 --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=bucket-bytes=1" --cleave-memory-plan --cleave-overlap-gradients --cleave-pipeline-schedule=microbatches=2 "--cleave-emit-program=output-dir=%t.o microbatches=2 data-degree=3" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t.o/rank-0.pb | FileCheck %s --check-prefix=OVERLAP-PB
// RUN: not cleave-opt %s --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not cleave-opt %s --cleave-place-ranks=data=2 --cleave-autodiff --cleave-optimizer --cleave-data-parallel=degree=2 --cleave-shard-optimizer-state 2>&1 | FileCheck %s --check-prefix=TWICE

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

// Chunks are whole 64-byte units: @w's 32 elements over 3 ranks give
// chunks of 11, rounded to 16 (padded: 48 floats, 192 bytes); @b's 8 give
// 3, rounded to 16. Rank 1 holds w's elements 16..31 and none of b's (its
// chunk starts at 16, past b's 8); rank 2 is padding only for both.
// CHECK: cleave.parameter @w {cleave.grad_offset = 384 : i64, cleave.offset = 0 : i64, cleave.state_axis = "data"
// CHECK: cleave.parameter @b {cleave.grad_offset = 576 : i64, cleave.offset = 192 : i64, cleave.state_axis = "data"
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: cleave.reduce_scatter_grads [@b, @w] {group = "data"}
// CHECK-NEXT: %[[W:.*]] = cleave.get_grad_shard @w : tensor<16xf32>
// CHECK-NEXT: %[[B:.*]] = cleave.get_grad_shard @b : tensor<16xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.sum_squares %[[W]], %[[B]]
// CHECK-NEXT: %[[N:.*]] = cleave.all_reduce %[[S]] {{{.*}}group = "data"} : tensor<f32>
// CHECK-NEXT: cleave.adamw @w, %[[W]], %arg0 norm %[[N]] : tensor<f32> {cleave.state_offsets = array<i64: 768, 832>, {{.*}}} : tensor<16xf32>, tensor<i64>
// CHECK-NEXT: cleave.adamw @b, %[[B]], %arg0 norm %[[N]] : tensor<f32> {cleave.state_offsets = array<i64: 896, 960>, {{.*}}} : tensor<16xf32>, tensor<i64>
// CHECK-NEXT: cleave.all_gather_params [@b, @w] {group = "data"}
// CHECK-NEXT: return

// With buckets of 1 byte, one collective per parameter; @w's chunk of
// rank 2 starts 2 x 16 x 4 = 128 bytes into its buffers (at 0 and 384).
// RANK2: shape: 48
// RANK2-NEXT: dtype: F32
// RANK2-NEXT: category: VIEW
// RANK2-NEXT: name: "w (padded)"
// RANK2: offset: 128
// RANK2-NEXT: shape: 16
// RANK2-NEXT: dtype: F32
// RANK2-NEXT: category: VIEW
// RANK2-NEXT: name: "w (chunk)"
// RANK2: offset: 512
// RANK2-NEXT: shape: 16
// RANK2-NEXT: dtype: F32
// RANK2-NEXT: category: VIEW
// RANK2-NEXT: name: "w.grad (chunk)"
// RANK2: offset: 896
// RANK2-NEXT: shape: 16
// RANK2-NEXT: dtype: F32
// RANK2-NEXT: category: OPTIMIZER_STATE
// RANK2-NEXT: name: "b.exp_avg"
// RANK2: kind: OPTIMIZER
// RANK2: kind: REDUCE_SCATTER
// RANK2: reduce: MEAN
// RANK2: kind: REDUCE_SCATTER
// RANK2: op: "sum_squares"
// RANK2: op: "adamw"
// RANK2: op: "adamw"
// RANK2: kind: ALL_GATHER
// RANK2: kind: ALL_GATHER
// (A size of 0 is left out of the text form.)
// RANK2: name: "w"
// RANK2: state_range {
// RANK2-NEXT: start: 32
// RANK2-NEXT: }
// RANK2: name: "b"
// RANK2: state_range {
// RANK2-NEXT: start: 8
// RANK2-NEXT: }
// RANK1: name: "w"
// RANK1: state_range {
// RANK1-NEXT: start: 16
// RANK1-NEXT: size: 16
// RANK1: name: "b"
// RANK1: state_range {
// RANK1-NEXT: start: 8
// RANK1-NEXT: }

// cleave-overlap-gradients starts each bucket's reduce-scatter in the last
// microbatch's backward once its gradient is complete; the optimizer waits.
// OVERLAP-LABEL: func.func @forward_backward_last_microbatch
// OVERLAP: cleave.accumulate_grad @b
// OVERLAP-NEXT: cleave.reduce_scatter_grads_start [@b] event 1 {group = "data"}
// OVERLAP: cleave.accumulate_grad @w
// OVERLAP-NEXT: cleave.reduce_scatter_grads_start [@w] event 2 {group = "data"}
// OVERLAP-LABEL: func.func @optimizer
// OVERLAP-NEXT: cleave.wait_grads event 1
// OVERLAP-NEXT: cleave.wait_grads event 2
// OVERLAP-NEXT: cleave.get_grad_shard @w
// OVERLAP-PB: name: "forward_backward (last microbatch)"
// OVERLAP-PB: op: "accumulate_grad"
// OVERLAP-PB: kind: REDUCE_SCATTER
// OVERLAP-PB-NEXT: inputs:
// OVERLAP-PB-NEXT: outputs:
// OVERLAP-PB-NEXT: reduce: MEAN
// OVERLAP-PB-NEXT: event: 1

// ALIGN: error: cleave-memory-plan: alignment 128 is more than the 64 bytes the chunks of split optimizer state (cleave.state_axis) are aligned to
// NOMESH: error: cleave-shard-optimizer-state: the module's mesh has no axis "data" to split optimizer state over; run cleave-place-ranks first
// TWICE: error: cleave-shard-optimizer-state: the gradients are already all-reduced over "data"; run this pass instead of cleave-data-parallel, not after it
