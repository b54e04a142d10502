// Tests of --cleave-emit-program: the planned module becomes rank-0.pb (read
// back here with protoc --decode), params.bin and plan.json.
// RUN: rm -rf %t && cleave-opt %s --cleave-input-roles --cleave-memory-plan --cleave-pipeline-schedule=microbatches=2 --cleave-emit-program="output-dir=%t microbatches=2" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-0.pb | FileCheck %s
// RUN: od -A d -t f4 %t/params.bin | FileCheck %s --check-prefix=PARAMS
// RUN: FileCheck %s --check-prefix=PLAN < %t/plan.json
// RUN: not cleave-opt %s --cleave-pipeline-schedule=microbatches=1 --cleave-emit-program=output-dir=%t 2>&1 | FileCheck %s --check-prefix=UNPLANNED
// RUN: not cleave-opt %s --cleave-memory-plan --cleave-pipeline-schedule=microbatches=1 --cleave-emit-program 2>&1 | FileCheck %s --check-prefix=NODIR
// A global batch the microbatches do not make is refused before anything
// is written.
// RUN: rm -rf %t.batch && not cleave-opt %s --cleave-input-roles --cleave-memory-plan --cleave-pipeline-schedule=microbatches=2 --cleave-emit-program="output-dir=%t.batch microbatches=2 global-batch=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not ls %t.batch
// The emitter translates the schedule cleave-pipeline-schedule writes; for
// a module that is not split it is each microbatch's forward, then its
// backward, on one pipeline rank.
// RUN: not cleave-opt %s --cleave-memory-plan --cleave-emit-program=output-dir=%t.nosched 2>&1 | FileCheck %s --check-prefix=NOSCHED
// NOSCHED: error: the module has no schedule; run cleave-pipeline-schedule first
// RUN: cleave-opt %s --cleave-pipeline-schedule=microbatches=2 | FileCheck %s --check-prefix=ONESTAGE
// ONESTAGE: module attributes {cleave.schedule = [array<i64: 0, 0, 0, 0, 0, 0, 1, 0>]}
// RUN: not cleave-opt %s "--cleave-pipeline-schedule=microbatches=2 ranks=2" 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: error: cleave-pipeline-schedule: the module has no stage modules, but ranks = 2; run cleave-pipeline-partition first
// BATCH: error: global batch 3 is not 1 data-parallel rank(s) x 2 microbatches of 3 samples

cleave.parameter @w : tensor<2x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
cleave.parameter @emb {init = "normal:0.02"} : tensor<8x2xf32>
cleave.parameter @g : tensor<2xf32> = dense<[0.5, 0.25]> : tensor<2xf32>

func.func @forward(%idx: tensor<3x4xi64> {cleave.onnx_name = "idx"},
                   %targets: tensor<3x4xi64> {cleave.onnx_name = "targets"})
    -> (tensor<f32> {cleave.onnx_name = "loss"}) {
  %emb = cleave.get_param @emb : tensor<8x2xf32> loc("/emb/Gather")
  %x = cleave.embedding %emb, %idx : (tensor<8x2xf32>, tensor<3x4xi64>) -> tensor<3x4x2xf32> loc("/emb/Gather")
  %w = cleave.get_param @w : tensor<2x2xf32> loc("/head/MatMul")
  %y = cleave.matmul %x, %w : (tensor<3x4x2xf32>, tensor<2x2xf32>) -> tensor<3x4x2xf32> loc("/head/MatMul")
  %g = cleave.get_param @g : tensor<2xf32> loc("/ln")
  %n = cleave.layer_norm %y scale %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<3x4x2xf32>, tensor<2xf32>) -> tensor<3x4x2xf32> loc("/ln")
  %l = cleave.reshape %n : tensor<3x4x2xf32> -> tensor<12x2xf32> loc("/flat")
  %t = cleave.reshape %targets : tensor<3x4xi64> -> tensor<12xi64> loc("/flat_t")
  %loss = cleave.softmax_cross_entropy %l, %t {reduction = #cleave.reduction<mean>} : (tensor<12x2xf32>, tensor<12xi64>) -> tensor<f32> loc("/loss")
  return %loss : tensor<f32>
}

// CHECK: magic: "cleave-program"
// CHECK: version: VERSION_CURRENT
// CHECK: batch {
// CHECK-NEXT:   global_batch: 6
// CHECK-NEXT:   microbatch_size: 3
// CHECK-NEXT:   microbatches: 2
// CHECK-NEXT:   seq_len: 4
// The embedding reads the generated table (tensor 1) and the ids (tensor 3).
// CHECK:      op: "embedding"
// CHECK-NEXT: inputs: 1
// CHECK-NEXT: inputs: 3
// CHECK-NEXT: outputs: 5
// CHECK-NEXT: location: "/emb/Gather"
// CHECK:      op: "matmul"
// The embedding's result is freed right after its last use.
// CHECK:      free {
// CHECK-NEXT:   tensor: 5
// An absent optional operand (layer_norm's bias) is -1.
// CHECK:      op: "layer_norm"
// CHECK-NEXT: inputs: 6
// CHECK-NEXT: inputs: 2
// CHECK-NEXT: inputs: -1
// CHECK:      key: "epsilon"
// CHECK:      op: "softmax_cross_entropy"
// CHECK:      key: "reduction"
// CHECK-NEXT: value {
// CHECK-NEXT:   s: "mean"
// Two microbatches of @forward.
// CHECK:      schedule {
// CHECK-NEXT: }
// CHECK-NEXT: schedule {
// CHECK-NEXT:   microbatch: 1
// CHECK:      name: "w"
// CHECK:      file {
// CHECK-NEXT:   path: "params.bin"
// CHECK-NEXT:   size_bytes: 16
// CHECK:      name: "emb"
// CHECK:      generator: "normal:0.02"
// CHECK:      name: "g"
// CHECK:      offset: 16
// CHECK-NEXT: size_bytes: 8
// CHECK:      inputs {
// CHECK-NEXT:   name: "idx"
// CHECK-NEXT:   tensor: 3
// CHECK-NEXT: }
// CHECK:      role: TARGETS
// CHECK:      outputs {
// CHECK-NEXT:   name: "loss"
// CHECK-NEXT:   tensor: 10
// CHECK-NEXT:   role: LOSS
// CHECK:      memory {
// CHECK-NEXT:   peak_bytes: 768

// PARAMS: 0000000 1 2 3 4
// PARAMS: 0000016 0.5 0.25

// PLAN: "microbatch_size": 3
// PLAN: "peak_bytes": 768

// UNPLANNED: error: the module has no memory plan; run cleave-memory-plan first
// NODIR: error: cleave-emit-program needs output-dir=FOLDER
