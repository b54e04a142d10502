// Tests of --cleave-shard-optimizer-state=master-copies (ZeRO-1 under
// bf16): a trained parameter that every function reads only through a cast
// to bf16 (@w, a product's weight) gets cleave.working_type = bf16, its
// reads become bf16 cleave.get_params and the casts go; one also read in
// fp32 (@e: an embedding lookup and a product) or added in fp32 (@b) keeps
// its fp32 value whole. The optimizer updates @w's master chunk and does
// not gather it; @refresh_params casts the chunk into the working copy and
// gathers that. The memory plan gives @w a bf16 buffer (its chunks whole
// 64-byte units of bf16: 32 elements), an fp32 master chunk after the
// parameters, and an fp32 gradient. The emitter makes the master chunk the
// Parameter's tensor (with flat_range, as a sharded parameter's), the bf16
// copy its working_tensor, and runs the REFRESH function first in the step.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-mixed-precision=dtype=bf16 --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=bucket-bytes=1 master-copies=1" --cleave-memory-plan | FileCheck %s
// RUN: rm -rf %t && cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-mixed-precision=dtype=bf16 --cleave-autodiff --cleave-optimizer=grad-clip=1.0 "--cleave-shard-optimizer-state=bucket-bytes=1 master-copies=1" --cleave-memory-plan --cleave-pipeline-schedule=microbatches=1 "--cleave-emit-program=output-dir=%t microbatches=1 data-degree=2" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-0.pb | FileCheck %s --check-prefix=RANK0
// Without the option nothing gets a working copy.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=2 --cleave-mixed-precision=dtype=bf16 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state | FileCheck %s --check-prefix=OFF

cleave.parameter @w {init = "normal:0.02"} : tensor<4x8xf32>
cleave.parameter @b {init = "zeros"} : tensor<8xf32>
cleave.parameter @e {init = "normal:0.02"} : tensor<8x4xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %e = cleave.get_param @e : tensor<8x4xf32>
  %h = cleave.gather %e, %x {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
  %w = cleave.get_param @w : tensor<4x8xf32>
  %y = cleave.matmul %h, %w : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %b = cleave.get_param @b : tensor<8xf32>
  %z = cleave.add %y, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %u = cleave.matmul %z, %e : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %s = cleave.reduce_mean %u {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// @w: a bf16 buffer of 64 elements (128 bytes) at 0, its master chunk of
// 32 floats (128 bytes) after the three parameters, its gradient fp32 and
// padded to 64 floats (256 bytes).
// CHECK: cleave.parameter @w {cleave.grad_offset = 512 : i64, cleave.master_offset = 384 : i64, cleave.offset = 0 : i64, cleave.state_axis = "data", cleave.working_type = bf16, init = "normal:0.02"} : tensor<4x8xf32>
// CHECK: cleave.parameter @b {cleave.grad_offset = 768 : i64, cleave.offset = 128 : i64, cleave.state_axis = "data", init = "zeros"} : tensor<8xf32>
// CHECK: cleave.parameter @e {cleave.grad_offset = 896 : i64, cleave.offset = 256 : i64, cleave.state_axis = "data", init = "normal:0.02"} : tensor<8x4xf32>
// CHECK-LABEL: func.func @forward
// CHECK: cleave.get_param @e : tensor<8x4xf32>
// CHECK: %[[W:.*]] = cleave.get_param @w : tensor<4x8xbf16>
// CHECK-NOT: cleave.cast %[[W]]
// CHECK: cleave.matmul %{{.*}}, %[[W]] {{.*}}: (tensor<2x4x4xbf16>, tensor<4x8xbf16>)
// CHECK: cleave.get_param @b : tensor<8xf32>
// CHECK-LABEL: func.func @forward_backward
// Gradients stay fp32.
// CHECK: cleave.accumulate_grad @w, %{{.*}} : tensor<4x8xf32>
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[GW:.*]] = cleave.get_grad_shard @w : tensor<32xf32>
// CHECK: cleave.adamw @w, %[[GW]], %arg0 norm %{{.*}} : tensor<f32> {{.*}} : tensor<32xf32>, tensor<i64>
// CHECK-NOT: cleave.all_gather_params [@w]
// CHECK: cleave.all_gather_params [@e] {group = "data"}
// CHECK-NEXT: cleave.all_gather_params [@b] {group = "data"}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @refresh_params() attributes {cleave.kind = "refresh"
// CHECK-NEXT: cleave.cast_master_chunk @w
// CHECK-NEXT: cleave.all_gather_params [@w] {group = "data"}
// CHECK-NEXT: return

// RANK0: tensors {
// RANK0-NEXT: shape: 4
// RANK0-NEXT: shape: 8
// RANK0-NEXT: dtype: BF16
// RANK0-NEXT: category: PARAMETERS
// RANK0-NEXT: name: "w (working copy)"
// RANK0: tensors {
// RANK0-NEXT: offset: 384
// RANK0-NEXT: shape: 32
// RANK0-NEXT: dtype: F32
// RANK0-NEXT: category: PARAMETERS
// RANK0-NEXT: name: "w"
// RANK0: shape: 64
// RANK0-NEXT: dtype: BF16
// RANK0-NEXT: category: VIEW
// RANK0-NEXT: name: "w (padded)"
// RANK0: shape: 32
// RANK0-NEXT: dtype: BF16
// RANK0-NEXT: category: VIEW
// RANK0-NEXT: name: "w (chunk)"
// The update writes the master chunk (tensor 1).
// RANK0: op: "adamw"
// RANK0: outputs: 1
// RANK0: name: "refresh_params"
// RANK0-NEXT: kind: REFRESH
// RANK0-NEXT: body {
// RANK0-NEXT: kernel {
// RANK0-NEXT: op: "cast"
// RANK0-NEXT: inputs: 1
// RANK0-NEXT: outputs: 4
// RANK0: collective {
// RANK0-NEXT: kind: ALL_GATHER
// RANK0-NEXT: inputs: 4
// RANK0-NEXT: outputs: 3
// RANK0: schedule {
// RANK0-NEXT: function: 3
// RANK0-NEXT: microbatch: -1
// RANK0: parameters {
// RANK0-NEXT: name: "w"
// RANK0-NEXT: tensor: 1
// RANK0: flat_range {
// RANK0-NEXT: size: 32
// RANK0-NEXT: }
// RANK0-NEXT: working_tensor: 0

// OFF-NOT: cleave.working_type
// OFF-NOT: refresh
