// Tests of --cleave-propagate-shardings on a Llama block as the importer
// and cleave-fuse write it: RMSNorm, rotary, grouped-query attention (4
// query heads, 2 key/value heads, repeated by a reshape, broadcast_to and
// reshape), SwiGLU, an untied head. wo and w2 are row-parallel, attention
// is split by heads, w1 and w3 (gate and up) are column-parallel, the
// embedding and the head vocab-parallel. With tensor=2 each rank holds one
// key/value head; with tensor=4 the key/value projections are split over
// the major half of the axis ("tensor":(1)2): ranks 0 and 1 hold head 0,
// ranks 2 and 3 head 1, each the head its query head reads (the minor
// half "tensor":(2)2 splits the repeat).
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 | FileCheck %s --check-prefixes=CHECK,T2
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 | FileCheck %s --check-prefixes=CHECK,T4
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 | cleave-opt | FileCheck %s --check-prefixes=CHECK,T4

// T2: module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>}
// T4: module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>}
// CHECK-DAG: cleave.parameter @tok_embeddings.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x16xf32>
// CHECK-DAG: cleave.parameter @attention_norm.weight : tensor<16xf32>
// CHECK-DAG: cleave.parameter @wq.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<16x16xf32>
// T2-DAG: cleave.parameter @wk.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<8x16xf32>
// T2-DAG: cleave.parameter @wv.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<8x16xf32>
// T4-DAG: cleave.parameter @wk.weight {cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<8x16xf32>
// T4-DAG: cleave.parameter @wv.weight {cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<8x16xf32>
// CHECK-DAG: cleave.parameter @wo.weight {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<16x16xf32>
// CHECK-DAG: cleave.parameter @w1.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x16xf32>
// CHECK-DAG: cleave.parameter @w3.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x16xf32>
// CHECK-DAG: cleave.parameter @w2.weight {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<16x32xf32>
// CHECK-DAG: cleave.parameter @output.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x16xf32>

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

// CHECK-LABEL: func.func @forward
func.func @forward(%idx: tensor<2x4xi64>, %targets: tensor<2x4xi64>) -> tensor<f32> {
  %rope = cleave.constant dense<1.0> : tensor<4x4xf32>
  %emb = cleave.get_param @tok_embeddings.weight : tensor<32x16xf32>
  // CHECK: cleave.embedding {{.*}}partial = ["tensor"]
  %x = cleave.embedding %emb, %idx : (tensor<32x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %gn = cleave.get_param @attention_norm.weight : tensor<16xf32>
  %h = cleave.rms_norm %x, %gn {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wq = cleave.get_param @wq.weight : tensor<16x16xf32>
  %q0 = cleave.matmul %h, %wq {transpose_rhs} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q1 = cleave.reshape %q0 : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %q2 = cleave.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %wk = cleave.get_param @wk.weight : tensor<8x16xf32>
  // T2: cleave.matmul {{.*}}cleave.sharding = #cleave.sharding<[{}, {}, {"tensor"}]>{{.*}} -> tensor<2x4x8xf32>
  // T4: cleave.matmul {{.*}}cleave.sharding = #cleave.sharding<[{}, {}, {"tensor":(1)2}]>{{.*}} -> tensor<2x4x8xf32>
  %k0 = cleave.matmul %h, %wk {transpose_rhs} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %k1 = cleave.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k2 = cleave.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %wv = cleave.get_param @wv.weight : tensor<8x16xf32>
  %v0 = cleave.matmul %h, %wv {transpose_rhs} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %v1 = cleave.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v2 = cleave.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  // CHECK: cleave.rotary {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}, {}, {}]>{{.*}} -> tensor<2x4x4x4xf32>
  %q = cleave.rotary %q2, %rope, %rope : (tensor<2x4x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4x4xf32>
  // T2: cleave.rotary {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}, {}, {}]>{{.*}} -> tensor<2x2x4x4xf32>
  // T4: cleave.rotary {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor":(1)2}, {}, {}]>{{.*}} -> tensor<2x2x4x4xf32>
  %kr = cleave.rotary %k2, %rope, %rope : (tensor<2x2x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %k3 = cleave.reshape %kr : tensor<2x2x4x4xf32> -> tensor<2x2x1x4x4xf32>
  // T2: cleave.broadcast_to {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}, {}, {}, {}]>
  // T4: cleave.broadcast_to {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor":(1)2}, {"tensor":(2)2}, {}, {}]>
  %k4 = cleave.broadcast_to %k3 : tensor<2x2x1x4x4xf32> -> tensor<2x2x2x4x4xf32>
  // CHECK: cleave.reshape {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}, {}, {}]>{{.*}} -> tensor<2x4x4x4xf32>
  %k = cleave.reshape %k4 : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
  %v3 = cleave.reshape %v2 : tensor<2x2x4x4xf32> -> tensor<2x2x1x4x4xf32>
  %v4 = cleave.broadcast_to %v3 : tensor<2x2x1x4x4xf32> -> tensor<2x2x2x4x4xf32>
  %v = cleave.reshape %v4 : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
  // CHECK: cleave.attention {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}, {}, {}]>
  %a = cleave.attention %q, %k, %v {causal, scale = 5.000000e-01 : f32} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %a1 = cleave.transpose %a {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %a2 = cleave.reshape %a1 : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %wo = cleave.get_param @wo.weight : tensor<16x16xf32>
  // CHECK: cleave.matmul {{.*}}partial = ["tensor"]
  %o = cleave.matmul %a2, %wo {transpose_rhs} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %x1 = cleave.add %x, %o : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %gf = cleave.get_param @ffn_norm.weight : tensor<16xf32>
  %h2 = cleave.rms_norm %x1, %gf {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %w1 = cleave.get_param @w1.weight : tensor<32x16xf32>
  %g0 = cleave.matmul %h2, %w1 {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  // CHECK: cleave.silu {{.*}}cleave.sharding = #cleave.sharding<[{}, {}, {"tensor"}]>
  %g = cleave.silu %g0 : tensor<2x4x32xf32>
  %w3 = cleave.get_param @w3.weight : tensor<32x16xf32>
  %u = cleave.matmul %h2, %w3 {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  // CHECK: cleave.mul {{.*}}cleave.sharding = #cleave.sharding<[{}, {}, {"tensor"}]>
  %gu = cleave.mul %g, %u : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %w2 = cleave.get_param @w2.weight : tensor<16x32xf32>
  // CHECK: cleave.matmul {{.*}}partial = ["tensor"]
  %d = cleave.matmul %gu, %w2 {transpose_rhs} : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
  %x2 = cleave.add %x1, %d : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %gl = cleave.get_param @norm.weight : tensor<16xf32>
  %hl = cleave.rms_norm %x2, %gl {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wout = cleave.get_param @output.weight : tensor<32x16xf32>
  %logits = cleave.matmul %hl, %wout {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %l2 = cleave.reshape %logits : tensor<2x4x32xf32> -> tensor<8x32xf32>
  %t2 = cleave.reshape %targets : tensor<2x4xi64> -> tensor<8xi64>
  // CHECK-NOT: cleave.sharding_stop
  %loss = cleave.softmax_cross_entropy %l2, %t2 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
