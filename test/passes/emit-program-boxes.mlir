// Tests of --cleave-emit-program on parameters that cleave-partition-tensor
// left with their local type, cleave.full_type and the full tensor's
// sharding: each rank's Parameter gets its boxes of the full tensor
// (passes/RankBoxes.h), several of them (Parameter.pieces, program version
// 2) for a blocked sharding. The mesh's "data" axis stands in for "tensor"
// here: the emitter writes one program per data rank today.
// RUN: rm -rf %t && cleave-opt %s --cleave-input-roles --cleave-memory-plan --cleave-pipeline-schedule=microbatches=1 --cleave-emit-program="output-dir=%t microbatches=1" -o /dev/null
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-0.pb | FileCheck %s --check-prefixes=CHECK,RANK0
// RUN: protoc --decode=cleave.program.Program -I %src_root/runtime %src_root/runtime/program.proto < %t/rank-1.pb | FileCheck %s --check-prefixes=CHECK,RANK1
// params.bin holds the full tensor (8 floats of w, 4 of g).
// RUN: od -A d -t f4 %t/params.bin | FileCheck %s --check-prefix=PARAMS
// Trained (autodiff, AdamW), the two ranks run under mpirun: each reads its
// boxes of params.bin; --steps 0 saves the initial state, which
// --save-params gathers back whole (w is params.bin's [1 .. 8]) and a
// checkpoint lists by boxes (version 3) and exports byte for byte the same.
// RUN: rm -rf %t.train && cleave-opt %s --cleave-input-roles --cleave-autodiff --cleave-optimizer --cleave-memory-plan --cleave-pipeline-schedule=microbatches=1 --cleave-emit-program="output-dir=%t.train microbatches=1" -o /dev/null
// RUN: %torch_python -c "import numpy; (numpy.arange(200) %% 2).astype(numpy.uint16).tofile('%t.train/tokens.bin')"
// RUN: timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root cleave-run %t.train --data %t.train/tokens.bin --steps 0 --threads 1 --checkpoint-dir %t.train/ck --save-params %t.train/params.safetensors > /dev/null
// RUN: %torch_python -c "import json, struct, numpy; b = open('%t.train/params.safetensors', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; w = json.loads(b[8:8 + n])['w']; s, e = w['data_offsets']; print('w', w['shape'], numpy.frombuffer(b[8 + n + s:8 + n + e], numpy.float32).tolist())" | FileCheck %s --check-prefix=SAVED
// SAVED: w [4, 2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
// RUN: cleave-checkpoint inspect %t.train/ck | FileCheck %s --check-prefix=INSPECT
// INSPECT: format version 3
// INSPECT: w{{ +}}parameter{{ +}}F32{{ +}}[4, 2]{{ +}}32{{ +}}0 [0:1, 0:2] [2:3, 0:2] along 0, 1 [1:2, 0:2] [3:4, 0:2] along 0
// RUN: cleave-checkpoint export %t.train/ck -o %t.train/export.safetensors
// RUN: cmp %t.train/export.safetensors %t.train/params.safetensors
// A local type that is not the sharding's slice of the full type is an
// error naming the parameter:
// RUN: sed 's/tensor<8x2xf32>/tensor<4x2xf32>/g' %s > %t.bad.mlir
// RUN: not cleave-opt %t.bad.mlir --cleave-input-roles --cleave-memory-plan --cleave-pipeline-schedule=microbatches=1 --cleave-emit-program="output-dir=%t.bad microbatches=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: parameter 'emb': its type 'tensor<4x2xf32>' is not the slice of 'tensor<16x2xf32>' that sharding #cleave.sharding<[{"data"}, {}]> gives a rank ('tensor<8x2xf32>')

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
// A fused weight of 2 blocks of rows, each split over the ranks.
cleave.parameter @w {cleave.full_type = tensor<4x2xf32>, cleave.sharding = #cleave.sharding<[2 blocks {"data"}, {} ]>} : tensor<2x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
// A plain split: one box.
cleave.parameter @emb {cleave.full_type = tensor<16x2xf32>, cleave.sharding = #cleave.sharding<[{"data"}, {} ]>, init = "normal:0.02"} : tensor<8x2xf32>
// Replicated, as before.
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
}

// CHECK: version: VERSION_PIECES
// CHECK:      parameters {
// CHECK-NEXT:   name: "w"
// CHECK-NEXT:   full_shape: 4
// CHECK-NEXT:   full_shape: 2
// RANK0-NEXT:   slice_start: 0
// RANK1-NEXT:   slice_start: 1
// CHECK-NEXT:   slice_start: 0
// CHECK-NEXT:   slice_size: 2
// CHECK-NEXT:   slice_size: 2
// CHECK-NEXT:   file {
// CHECK:        pieces {
// RANK0-NEXT:     start: 0
// RANK1-NEXT:     start: 1
// CHECK-NEXT:     start: 0
// CHECK-NEXT:     size: 1
// CHECK-NEXT:     size: 2
// CHECK-NEXT:   }
// CHECK-NEXT:   pieces {
// RANK0-NEXT:     start: 2
// RANK1-NEXT:     start: 3
// CHECK-NEXT:     start: 0
// CHECK-NEXT:     size: 1
// CHECK-NEXT:     size: 2
// CHECK-NEXT:   }
// (Along axis 0: pieces_axis is left out, proto3's default.)
// CHECK-NEXT: }
// CHECK:      parameters {
// CHECK-NEXT:   name: "emb"
// CHECK-NEXT:   tensor: 1
// CHECK-NEXT:   full_shape: 16
// CHECK-NEXT:   full_shape: 2
// RANK0-NEXT:   slice_start: 0
// RANK1-NEXT:   slice_start: 8
// CHECK-NEXT:   slice_start: 0
// CHECK-NEXT:   slice_size: 8
// CHECK-NEXT:   slice_size: 2
// CHECK-NEXT:   generator: "normal:0.02"
// CHECK-NOT:    pieces
// CHECK:      parameters {
// CHECK-NEXT:   name: "g"
// CHECK-NEXT:   tensor: 2
// CHECK-NEXT:   full_shape: 2
// CHECK-NEXT:   slice_start: 0
// CHECK-NEXT:   slice_size: 2
// CHECK-NOT:    pieces

// PARAMS: 0000000 1 2 3 4
// PARAMS: 0000016 5 6 7 8
// PARAMS: 0000032 0.5 0.25
