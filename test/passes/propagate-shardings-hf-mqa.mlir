// Propagation on two shapes of Hugging Face exports (issue 13, tensor 2):
// multi-query attention (4 query heads, 1 key/value head: fewer than the
// degree) whose rotary embedding is written as the exporter wrote it,
// k * cos + rotate_half(k) * sin (slices, a neg, a concat, muls, an add)
// rather than one cleave.rotary; and learned positions looked up by an
// embedding of computed ids (OPT's CumSum of the attention mask; here a
// constant).
//
// The key/value projections are found back from the attention along every
// path (the rotary's add has k on both operands): not column-split, they
// stay whole with a remark, and the attention splits its query heads. (A
// split of wk's output features would split the head dimension of k,
// which meets the query heads' split in conflicts.) The position table is
// not seeded vocab-parallel: its result would need an all-reduce of its
// own; the token table still is.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 2>&1 | FileCheck %s

// CHECK-DAG: remark: tensor-parallel split stops at cleave.matmul: column-parallel split not made: it projects key/value heads fewer than tensor=2 (grouped-query attention); each rank holds them whole
// CHECK-DAG: remark: tensor-parallel split stops at cleave.embedding: vocab-parallel split not made: its ids are computed (positions), not the model's input; the table is replicated
// CHECK-DAG: cleave.parameter @tok.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<32x16xf32>
// CHECK-DAG: cleave.parameter @pos.weight : tensor<8x16xf32>
// CHECK-DAG: cleave.parameter @wq.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<16x16xf32>
// CHECK-DAG: cleave.parameter @wk.weight : tensor<4x16xf32>
// CHECK-DAG: cleave.parameter @wv.weight : tensor<4x16xf32>
// CHECK-DAG: cleave.parameter @wo.weight {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<16x16xf32>
// CHECK-LABEL: func.func @forward
// CHECK: cleave.attention {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}, {}, {}]>

cleave.parameter @tok.weight : tensor<32x16xf32>
cleave.parameter @pos.weight : tensor<8x16xf32>
cleave.parameter @norm.weight : tensor<16xf32>
cleave.parameter @wq.weight : tensor<16x16xf32>
cleave.parameter @wk.weight : tensor<4x16xf32>
cleave.parameter @wv.weight : tensor<4x16xf32>
cleave.parameter @wo.weight : tensor<16x16xf32>
cleave.parameter @final.weight : tensor<16xf32>
cleave.parameter @output.weight : tensor<32x16xf32>

func.func @forward(%idx: tensor<2x4xi64>, %targets: tensor<2x4xi64>) -> tensor<f32> {
  %positions = cleave.constant dense<[[2, 3, 4, 5], [2, 3, 4, 5]]> : tensor<2x4xi64>
  %cos = cleave.constant dense<1.0> : tensor<1x1x4x4xf32>
  %sin = cleave.constant dense<0.5> : tensor<1x1x4x4xf32>
  %rope = cleave.constant dense<1.0> : tensor<4x4xf32>
  %emb = cleave.get_param @tok.weight : tensor<32x16xf32>
  %t = cleave.embedding %emb, %idx : (tensor<32x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %pe = cleave.get_param @pos.weight : tensor<8x16xf32>
  %p = cleave.embedding %pe, %positions : (tensor<8x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %x = cleave.add %t, %p : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %gn = cleave.get_param @norm.weight : tensor<16xf32>
  %h = cleave.rms_norm %x, %gn {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wq = cleave.get_param @wq.weight : tensor<16x16xf32>
  %q0 = cleave.matmul %h, %wq {transpose_rhs} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q1 = cleave.reshape %q0 : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %q2 = cleave.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %q = cleave.rotary %q2, %rope, %rope : (tensor<2x4x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4x4xf32>
  %wk = cleave.get_param @wk.weight : tensor<4x16xf32>
  %k0 = cleave.matmul %h, %wk {transpose_rhs} : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x4xf32>
  %k1 = cleave.reshape %k0 : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
  %k2 = cleave.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x1x4xf32> -> tensor<2x1x4x4xf32>
  // k * cos + rotate_half(k) * sin
  %kc = cleave.mul %k2, %cos : (tensor<2x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %lo = cleave.slice %k2 {limit = array<i64: 2, 1, 4, 2>, start = array<i64: 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1>} : tensor<2x1x4x4xf32> -> tensor<2x1x4x2xf32>
  %hi = cleave.slice %k2 {limit = array<i64: 2, 1, 4, 4>, start = array<i64: 0, 0, 0, 2>, step = array<i64: 1, 1, 1, 1>} : tensor<2x1x4x4xf32> -> tensor<2x1x4x2xf32>
  %nhi = cleave.neg %hi : tensor<2x1x4x2xf32>
  %rot = cleave.concat %nhi, %lo {axis = 3 : i64} : (tensor<2x1x4x2xf32>, tensor<2x1x4x2xf32>) -> tensor<2x1x4x4xf32>
  %ks = cleave.mul %rot, %sin : (tensor<2x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %kr = cleave.add %kc, %ks : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %k3 = cleave.reshape %kr : tensor<2x1x4x4xf32> -> tensor<2x1x1x4x4xf32>
  %k4 = cleave.broadcast_to %k3 : tensor<2x1x1x4x4xf32> -> tensor<2x1x4x4x4xf32>
  %k = cleave.reshape %k4 : tensor<2x1x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %wv = cleave.get_param @wv.weight : tensor<4x16xf32>
  %v0 = cleave.matmul %h, %wv {transpose_rhs} : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x4xf32>
  %v1 = cleave.reshape %v0 : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
  %v2 = cleave.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x1x4xf32> -> tensor<2x1x4x4xf32>
  %v3 = cleave.reshape %v2 : tensor<2x1x4x4xf32> -> tensor<2x1x1x4x4xf32>
  %v4 = cleave.broadcast_to %v3 : tensor<2x1x1x4x4xf32> -> tensor<2x1x4x4x4xf32>
  %v = cleave.reshape %v4 : tensor<2x1x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %a = cleave.attention %q, %k, %v {causal, scale = 5.000000e-01 : f32} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %a1 = cleave.transpose %a {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %a2 = cleave.reshape %a1 : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %wo = cleave.get_param @wo.weight : tensor<16x16xf32>
  %o = cleave.matmul %a2, %wo {transpose_rhs} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %x1 = cleave.add %x, %o : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %gl = cleave.get_param @final.weight : tensor<16xf32>
  %hl = cleave.rms_norm %x1, %gl {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wout = cleave.get_param @output.weight : tensor<32x16xf32>
  %logits = cleave.matmul %hl, %wout {transpose_rhs} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %l2 = cleave.reshape %logits : tensor<2x4x32xf32> -> tensor<8x32xf32>
  %t2 = cleave.reshape %targets : tensor<2x4xi64> -> tensor<8xi64>
  %loss = cleave.softmax_cross_entropy %l2, %t2 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
