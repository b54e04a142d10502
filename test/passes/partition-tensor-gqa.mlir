// --cleave-partition-tensor on a Llama block with more tensor ranks (4)
// than key/value heads (2) (the IR of propagate-shardings-llama.mlir):
// wk and wv hold the rank's key/value head ("tensor":(1)2, replicated over
// the minor sub-axis), and f (tp_copy) is put on an input over the tensor
// digits the result splits and the input does not: the norm's output
// entering wq over "tensor", entering wk and wv over "tensor:(1)2" (the
// ranks holding the other head), the key/value heads entering GQA's
// repeat over "tensor:(2)2" (the ranks sharing the head).
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 --cleave-partition-tensor | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 --cleave-partition-tensor | cleave-opt | FileCheck %s

// CHECK-DAG: cleave.parameter @wq.weight {cleave.full_type = tensor<16x16xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<4x16xf32>
// CHECK-DAG: cleave.parameter @wk.weight {cleave.full_type = tensor<8x16xf32>, cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<4x16xf32>
// CHECK-DAG: cleave.parameter @wv.weight {cleave.full_type = tensor<8x16xf32>, cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<4x16xf32>
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.rms_norm
// CHECK-DAG: %[[HKV:.*]] = cleave.tp_copy %[[H]] {axes = ["tensor:(1)2"]} : tensor<2x4x16xf32>
// CHECK-DAG: %[[HQ:.*]] = cleave.tp_copy %[[H]] {axes = ["tensor"]} : tensor<2x4x16xf32>
// CHECK: cleave.matmul %[[HQ]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: cleave.matmul %[[HKV]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[K:.*]] = cleave.tp_copy %{{.*}} {axes = ["tensor:(2)2"]} : tensor<2x1x1x4x4xf32>
// CHECK: cleave.broadcast_to %[[K]] : tensor<2x1x1x4x4xf32> -> tensor<2x1x1x4x4xf32>
// CHECK: %[[V:.*]] = cleave.tp_copy %{{.*}} {axes = ["tensor:(2)2"]} : tensor<2x1x1x4x4xf32>
// CHECK: cleave.broadcast_to %[[V]]
// CHECK: cleave.attention



cleave.parameter @tok_embeddings.weight : tensor<32x16xf32>
cleave.parameter @attention_norm.weight : tensor<16xf32>
cleave.parameter @wq.weight : tensor<16x16xf32>
cleave.parameter @wk.weight : tensor<8x16xf32>
cleave.parameter @wv.weight : tensor<8x16xf32>
cleave.parameter @wo.weight : tensor<16x16xf32>
cleave.parameter @ffn_norm.weight : tensor<16xf32>
cleave.parameter @w1.weight : tensor<32x16xf32>
cleave.parameter @w3.weight : tensor<32x16xf32>
cleave.parameter @w2.weight : tensor<16x32xf32>
cleave.parameter @norm.weight : tensor<16xf32>
cleave.parameter @output.weight : tensor<32x16xf32>

func.func @forward(%idx: tensor<2x4xi64>, %targets: tensor<2x4xi64>) -> tensor<f32> {
  %rope = cleave.constant dense<1.0> : tensor<4x4xf32>
  %emb = cleave.get_param @tok_embeddings.weight : tensor<32x16xf32>
  %x = cleave.embedding %emb, %idx : (tensor<32x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %gn = cleave.get_param @attention_norm.weight : tensor<16xf32>
  %h = cleave.rms_norm %x, %gn {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wq = cleave.get_param @wq.weight : tensor<16x16xf32>
  %q0 = cleave.matmul %h, %wq {transpose_rhs} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q1 = cleave.reshape %q0 : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %q2 = cleave.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %wk = cleave.get_param @wk.weight : tensor<8x16xf32>
  %k0 = cleave.matmul %h, %wk {transpose_rhs} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %k1 = cleave.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k2 = cleave.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %wv = cleave.get_param @wv.weight : tensor<8x16xf32>
  %v0 = cleave.matmul %h, %wv {transpose_rhs} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %v1 = cleave.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v2 = cleave.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %q = cleave.rotary %q2, %rope, %rope : (tensor<2x4x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4x4xf32>
  %kr = cleave.rotary %k2, %rope, %rope : (tensor<2x2x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %k3 = cleave.reshape %kr : tensor<2x2x4x4xf32> -> tensor<2x2x1x4x4xf32>
  %k4 = cleave.broadcast_to %k3 : tensor<2x2x1x4x4xf32> -> tensor<2x2x2x4x4xf32>
  %k = cleave.reshape %k4 : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
  %v3 = cleave.reshape %v2 : tensor<2x2x4x4xf32> -> tensor<2x2x1x4x4xf32>
  %v4 = cleave.broadcast_to %v3 : tensor<2x2x1x4x4xf32> -> tensor<2x2x2x4x4xf32>
  %v = cleave.reshape %v4 : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
  %a = cleave.attention %q, %k, %v {causal, scale = 5.000000e-01 : f32} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %a1 = cleave.transpose %a {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %a2 = cleave.reshape %a1 : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %wo = cleave.get_param @wo.weight : tensor<16x16xf32>
  %o = cleave.matmul %a2, %wo {transpose_rhs} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %x1 = cleave.add %x, %o : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %gf = cleave.get_param @ffn_norm.weight : tensor<16xf32>
  %h2 = cleave.rms_norm %x1, %gf {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %w1 = cleave.get_param @w1.weight : tensor<32x16xf32>
  %g0 = cleave.matmul %h2, %w1 {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %g = cleave.silu %g0 : tensor<2x4x32xf32>
  %w3 = cleave.get_param @w3.weight : tensor<32x16xf32>
  %u = cleave.matmul %h2, %w3 {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %gu = cleave.mul %g, %u : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %w2 = cleave.get_param @w2.weight : tensor<16x32xf32>
  %d = cleave.matmul %gu, %w2 {transpose_rhs} : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
  %x2 = cleave.add %x1, %d : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %gl = cleave.get_param @norm.weight : tensor<16xf32>
  %hl = cleave.rms_norm %x2, %gl {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wout = cleave.get_param @output.weight : tensor<32x16xf32>
  %logits = cleave.matmul %hl, %wout {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %l2 = cleave.reshape %logits : tensor<2x4x32xf32> -> tensor<8x32xf32>
  %t2 = cleave.reshape %targets : tensor<2x4xi64> -> tensor<8xi64>
  %loss = cleave.softmax_cross_entropy %l2, %t2 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
