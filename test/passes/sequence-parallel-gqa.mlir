// Sequence parallelism with grouped-query attention on more tensor ranks
// than key/value heads: the Llama block of propagate-shardings-llama.mlir
// (4 query heads, 2 key/value heads) with tensor=4. The attention norm's
// output enters wq under an f over "tensor" and wk, wv under an f over the
// sub-axis "tensor":(1)2 (ranks 0 and 1 hold key/value head 0, ranks 2
// and 3 head 1). The second cannot become a plain all-gather: ranks 0 and
// 1 compute the same gradient of the key/value projections' input, which
// a reduce-scatter over all four ranks would count twice. (Hugging Face
// Llama, Mistral, Qwen2 and Gemma with 2 key/value heads at tensor 4 with
// sequence_parallel trained with wrong gradients that way before.) The
// norm's output is gathered once, with the rank's part of the sequence as
// its gradient (split_grad); the f over (1)2 follows for wk and wv, and
// after it an f over the minor sub-axis (2)2 for wq: the query path's
// gradient is summed over (2)2 then (1)2, i.e. over the whole axis, the
// key/value path's over (1)2 only. (Before, the norm's output was gathered
// twice, once per f: two whole [batch, seq, d] buffers and collectives.)
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 --cleave-partition-tensor --cleave-sequence-parallel | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 --cleave-partition-tensor --cleave-sequence-parallel --cleave-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.rms_norm {{.*}} -> tensor<2x1x16xf32>
// CHECK: %[[HT:.*]] = cleave.transpose %[[H]] {perm = array<i64: 1, 0, 2>} : tensor<2x1x16xf32> -> tensor<1x2x16xf32>
// CHECK: %[[G:.*]] = cleave.sp_all_gather %[[HT]] {axes = ["tensor"], dim = 0 : i64, split_grad} : tensor<1x2x16xf32> -> tensor<4x2x16xf32>
// CHECK: %[[GH:.*]] = cleave.transpose %[[G]]
// CHECK: %[[KVF:.*]] = cleave.tp_copy %[[GH]] {axes = ["tensor:(1)2"]} : tensor<2x4x16xf32>
// CHECK: %[[QF:.*]] = cleave.tp_copy %[[KVF]] {axes = ["tensor:(2)2"]} : tensor<2x4x16xf32>
// CHECK-NOT: cleave.sp_all_gather
// CHECK: cleave.matmul %[[QF]], {{.*}} : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x4xf32>
// CHECK: cleave.matmul %[[KVF]], {{.*}} : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x4xf32>
// CHECK: cleave.matmul %[[KVF]], {{.*}} : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x4xf32>

// The backward of the attention norm's output: the query projection's
// gradient summed over (2)2, added to the key/value projections', the sum
// over (1)2, then the rank's rows of it (a gather at axis_index); no
// reduce-scatter of it.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[Q:.*]] = cleave.tp_reduce %{{.*}} {axes = ["tensor:(2)2"]} : tensor<2x4x16xf32>
// GRAD: %[[QKV:.*]] = cleave.add %{{.*}}, %[[Q]] : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// GRAD: %[[S:.*]] = cleave.tp_reduce %[[QKV]] {axes = ["tensor:(1)2"]} : tensor<2x4x16xf32>
// GRAD-NOT: cleave.sp_reduce_scatter
// GRAD: %[[ST:.*]] = cleave.transpose %[[S]] {perm = array<i64: 1, 0, 2>} : tensor<2x4x16xf32> -> tensor<4x2x16xf32>
// GRAD: cleave.axis_index {axis = "tensor"}
// GRAD: %[[PART:.*]] = cleave.gather %[[ST]], {{.*}} {axis = 0 : i64} : (tensor<4x2x16xf32>, tensor<1xi64>) -> tensor<1x2x16xf32>
// GRAD: %[[PT:.*]] = cleave.transpose %[[PART]]
// GRAD: cleave.rms_norm_grad %[[PT]]

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
