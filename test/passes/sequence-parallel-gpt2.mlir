// Tests of --cleave-sequence-parallel on the GPT-2 block of
// propagate-shardings-gpt2.mlir (embedding, one block, final norm and tied
// head), after --cleave-propagate-shardings=tensor=2 and
// --cleave-partition-tensor: Megatron-LM's sequence parallelism. The
// residual stream (embedding output, layer norms, bias and residual adds)
// holds the rank's 2 of the 4 tokens; g after each row-parallel product
// (and the vocab-parallel embedding) is a reduce-scatter along the
// sequence, f before each column-parallel product (c_attn, c_fc, the head)
// an all-gather, each on the sequence brought to dimension 0 by a
// transpose; the replicated inputs of the split region (norm weights and
// biases, the row-parallel biases) pass an f so that their gradients are
// summed over the tensor ranks, and the position embedding is gathered at
// the rank's rows.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-sequence-parallel | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-sequence-parallel | cleave-opt | FileCheck %s
// Under autodiff each collective's gradient is its conjugate: the
// all-gather's a reduce-scatter, the reduce-scatter's an all-gather; the
// norms' weight and bias gradients, from the rank's tokens only, are
// summed over the tensor axis by their f's tp_reduce.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-sequence-parallel --cleave-autodiff | FileCheck %s --check-prefix=GRAD
// Without a tensor axis of more than one rank nothing changes.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=1 --cleave-partition-tensor --cleave-sequence-parallel | FileCheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @forward
// The vocab-parallel embedding's partial sum, reduce-scattered on the
// sequence (dimension 1, transposed to 0 and back).
// CHECK: %[[E:.*]] = cleave.select {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[ET:.*]] = cleave.transpose %[[E]] {perm = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[ES:.*]] = cleave.sp_reduce_scatter %[[ET]] {axes = ["tensor"], dim = 0 : i64} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[X0:.*]] = cleave.transpose %[[ES]] {perm = array<i64: 1, 0, 2>} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
// The position embedding [4, 8]: its f, then rows 2r and 2r+1.
// CHECK: %[[P:.*]] = cleave.gather %{{.*}} {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
// CHECK: %[[PF:.*]] = cleave.tp_copy %[[P]] {axes = ["tensor"]} : tensor<4x8xf32>
// CHECK: %[[IOTA:.*]] = cleave.constant dense<[0, 1]> : tensor<2xi64>
// CHECK: %[[R:.*]] = cleave.axis_index {axis = "tensor"} : tensor<i64>
// CHECK: %[[TWO:.*]] = cleave.constant dense<2> : tensor<i64>
// CHECK: %[[FIRST:.*]] = cleave.mul %[[R]], %[[TWO]]
// CHECK: %[[ROWS:.*]] = cleave.add %[[IOTA]], %[[FIRST]]
// CHECK: %[[PR:.*]] = cleave.gather %[[PF]], %[[ROWS]] {axis = 0 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK: %[[X:.*]] = cleave.add %[[X0]], %[[PR]] : (tensor<2x2x8xf32>, tensor<2x8xf32>) -> tensor<2x2x8xf32>
// ln_1 on the rank's tokens, its weight and bias through f.
// CHECK: %[[G1:.*]] = cleave.tp_copy %{{.*}} {axes = ["tensor"]} : tensor<8xf32>
// CHECK: %[[B1:.*]] = cleave.tp_copy %{{.*}} {axes = ["tensor"]} : tensor<8xf32>
// CHECK: %[[H:.*]] = cleave.layer_norm %[[X]] scale %[[G1]] bias %[[B1]] {{.*}} -> tensor<2x2x8xf32>
// Into c_attn: the all-gather replaces f.
// CHECK: %[[HT:.*]] = cleave.transpose %[[H]] {perm = array<i64: 1, 0, 2>} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[HG:.*]] = cleave.sp_all_gather %[[HT]] {axes = ["tensor"], dim = 0 : i64} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[HW:.*]] = cleave.transpose %[[HG]] {perm = array<i64: 1, 0, 2>} : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: cleave.matmul %[[HW]], %{{.*}} {transpose_rhs} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
// The attention by heads on the whole sequence, unchanged.
// CHECK: cleave.attention {{.*}} -> tensor<2x1x4x4xf32>
// Out of c_proj: the reduce-scatter replaces g; the bias, through f, is
// added to the rank's tokens, then the residual.
// CHECK: %[[O:.*]] = cleave.matmul {{.*}} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[OT:.*]] = cleave.transpose %[[O]] {perm = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[OS:.*]] = cleave.sp_reduce_scatter %[[OT]] {axes = ["tensor"], dim = 0 : i64} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[OL:.*]] = cleave.transpose %[[OS]]
// CHECK: %[[BO:.*]] = cleave.tp_copy %{{.*}} {axes = ["tensor"]} : tensor<8xf32>
// CHECK: %[[OB:.*]] = cleave.add %[[BO]], %[[OL]] : (tensor<8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[X1:.*]] = cleave.add %[[X]], %[[OB]] : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// The MLP: gather before c_fc, reduce-scatter after c_proj.
// CHECK: cleave.layer_norm %[[X1]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: cleave.sp_all_gather {{.*}} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: cleave.matmul {{.*}} -> tensor<2x4x16xf32>
// CHECK: cleave.sp_reduce_scatter {{.*}} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[X2:.*]] = cleave.add {{.*}} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// ln_f on the rank's tokens, then gathered for the vocab-parallel head.
// CHECK: cleave.layer_norm %[[X2]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: cleave.sp_all_gather {{.*}} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: cleave.matmul {{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// The loss is Megatron's vocab-parallel cross-entropy on every token, as
// without sequence parallelism: no more all-gathers or reduce-scatters.
// CHECK-NOT: cleave.sp_
// CHECK: return

// GRAD-LABEL: func.func @forward_backward
// The head's gather: its gradient reduce-scattered (each rank's partial
// gradient of every token, summed, the rank's tokens kept).
// GRAD: cleave.sp_reduce_scatter {{.*}} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// GRAD: %{{.*}}, %[[DS:.*]], %[[DB:.*]] = cleave.layer_norm_grad {{.*}} -> (tensor<2x2x8xf32>, tensor<8xf32>, tensor<8xf32>)
// GRAD-DAG: cleave.tp_reduce %[[DB]] {axes = ["tensor"]} : tensor<8xf32>
// GRAD-DAG: cleave.tp_reduce %[[DS]] {axes = ["tensor"]} : tensor<8xf32>
// The MLP's reduce-scatter: its gradient all-gathered.
// GRAD: cleave.sp_all_gather {{.*}} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// GRAD: cleave.sp_reduce_scatter
// GRAD: cleave.sp_all_gather
// GRAD: cleave.sp_reduce_scatter
// The position embedding's rows: scattered into the whole table's, then
// summed over the ranks by its f.
// GRAD: %[[PG:.*]] = cleave.gather_grad {{.*}} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<4x8xf32>
// GRAD: cleave.tp_reduce %[[PG]] {axes = ["tensor"]} : tensor<4x8xf32>
// The embedding's reduce-scatter: its gradient all-gathered.
// GRAD: cleave.sp_all_gather {{.*}} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// GRAD: cleave.embedding_grad

// ONE-NOT: cleave.sp_
// ONE-NOT: cleave.tp_

cleave.parameter @wte.weight : tensor<16x8xf32>
cleave.parameter @wpe.weight : tensor<4x8xf32>
cleave.parameter @h.0.ln_1.weight : tensor<8xf32>
cleave.parameter @h.0.ln_1.bias : tensor<8xf32>
cleave.parameter @h.0.attn.c_attn.weight : tensor<24x8xf32>
cleave.parameter @h.0.attn.c_attn.bias : tensor<24xf32>
cleave.parameter @h.0.attn.c_proj.weight : tensor<8x8xf32>
cleave.parameter @h.0.attn.c_proj.bias : tensor<8xf32>
cleave.parameter @h.0.ln_2.weight : tensor<8xf32>
cleave.parameter @h.0.ln_2.bias : tensor<8xf32>
cleave.parameter @h.0.mlp.c_fc.weight : tensor<32x8xf32>
cleave.parameter @h.0.mlp.c_fc.bias : tensor<32xf32>
cleave.parameter @h.0.mlp.c_proj.weight : tensor<8x32xf32>
cleave.parameter @h.0.mlp.c_proj.bias : tensor<8xf32>
cleave.parameter @ln_f.weight : tensor<8xf32>
cleave.parameter @ln_f.bias : tensor<8xf32>

func.func @forward(%idx: tensor<2x4xi64>, %targets: tensor<2x4xi64>) -> tensor<f32> {
  %mask = cleave.constant dense<true> : tensor<4x4xi1>
  %pos = cleave.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %wte = cleave.get_param @wte.weight : tensor<16x8xf32>
  %tok = cleave.embedding %wte, %idx : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %wpe = cleave.get_param @wpe.weight : tensor<4x8xf32>
  %p = cleave.gather %wpe, %pos {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  %x = cleave.add %tok, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %g1 = cleave.get_param @h.0.ln_1.weight : tensor<8xf32>
  %b1 = cleave.get_param @h.0.ln_1.bias : tensor<8xf32>
  %h = cleave.layer_norm %x scale %g1 bias %b1 {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %wqkv = cleave.get_param @h.0.attn.c_attn.weight : tensor<24x8xf32>
  %qkv0 = cleave.matmul %h, %wqkv {transpose_rhs} : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %bqkv = cleave.get_param @h.0.attn.c_attn.bias : tensor<24xf32>
  %qkv = cleave.add %bqkv, %qkv0 : (tensor<24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %q0 = cleave.slice %qkv {limit = array<i64: 2, 4, 8>, start = array<i64: 0, 0, 0>, step = array<i64: 1, 1, 1>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %k0 = cleave.slice %qkv {limit = array<i64: 2, 4, 16>, start = array<i64: 0, 0, 8>, step = array<i64: 1, 1, 1>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %v0 = cleave.slice %qkv {limit = array<i64: 2, 4, 24>, start = array<i64: 0, 0, 16>, step = array<i64: 1, 1, 1>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %q1 = cleave.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = cleave.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k1 = cleave.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k = cleave.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %v1 = cleave.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v = cleave.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %keep = cleave.not %mask : tensor<4x4xi1>
  %a = cleave.attention %q, %k, %v mask %keep {scale = 5.000000e-01 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<4x4xi1>) -> tensor<2x2x4x4xf32>
  %a1 = cleave.transpose %a {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %a2 = cleave.reshape %a1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %wo = cleave.get_param @h.0.attn.c_proj.weight : tensor<8x8xf32>
  %o0 = cleave.matmul %a2, %wo {transpose_rhs} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %bo = cleave.get_param @h.0.attn.c_proj.bias : tensor<8xf32>
  %o = cleave.add %bo, %o0 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %x1 = cleave.add %x, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g2 = cleave.get_param @h.0.ln_2.weight : tensor<8xf32>
  %b2 = cleave.get_param @h.0.ln_2.bias : tensor<8xf32>
  %h2 = cleave.layer_norm %x1 scale %g2 bias %b2 {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %wfc = cleave.get_param @h.0.mlp.c_fc.weight : tensor<32x8xf32>
  %f0 = cleave.matmul %h2, %wfc {transpose_rhs} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %bfc = cleave.get_param @h.0.mlp.c_fc.bias : tensor<32xf32>
  %f1 = cleave.add %bfc, %f0 : (tensor<32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %f2 = cleave.gelu %f1 {approximate = "tanh"} : tensor<2x4x32xf32>
  %wp = cleave.get_param @h.0.mlp.c_proj.weight : tensor<8x32xf32>
  %m0 = cleave.matmul %f2, %wp {transpose_rhs} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  %bp = cleave.get_param @h.0.mlp.c_proj.bias : tensor<8xf32>
  %m = cleave.add %bp, %m0 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %x2 = cleave.add %x1, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %gf = cleave.get_param @ln_f.weight : tensor<8xf32>
  %bf = cleave.get_param @ln_f.bias : tensor<8xf32>
  %hf = cleave.layer_norm %x2 scale %gf bias %bf {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %wte2 = cleave.get_param @wte.weight : tensor<16x8xf32>
  %logits = cleave.matmul %hf, %wte2 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %l2 = cleave.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %t2 = cleave.reshape %targets : tensor<2x4xi64> -> tensor<8xi64>
  %loss = cleave.softmax_cross_entropy %l2, %t2 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
