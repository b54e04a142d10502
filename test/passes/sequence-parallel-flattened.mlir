// Sequence parallelism on products of flattened activations: the GPT-2
// block of sequence-parallel-gpt2.mlir written as Hugging Face's Conv1D
// exports it (`x.view(-1, d)`, addmm with a [in, out] weight, `view(batch,
// seq, out)`), with tensor=2. The flattened `[batch*seq, d]` rows are
// batch-major, so the rank's tokens are, in each sample, its seq/T rows:
// the flatten joins the region (`[2, 2, 8] -> [4, 8]`), the f before
// c_attn and c_fc gathers it viewed as `[batch, seq/T, d]`, and the g after
// each row-parallel product (c_proj) becomes a reduce-scatter of the
// flattened partial sum viewed as `[batch, seq, d]`; the bias add and the
// view back run on the rank's tokens. No all-reduce of an activation is
// left, forward or backward (before, the c_proj sums were all-reduced,
// sliced, and their gradients all-reduced again).
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-sequence-parallel | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-sequence-parallel --cleave-autodiff | FileCheck %s --check-prefix=NOAR

// CHECK-LABEL: func.func @forward
// ln_1 on the rank's tokens; the view(-1, d) joins the region.
// CHECK: %[[H:.*]] = cleave.layer_norm {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[HV:.*]] = cleave.reshape %[[H]] : tensor<2x2x8xf32> -> tensor<4x8xf32>
// Into c_attn: the flattened rows gathered as [batch, seq/T, d].
// CHECK: %[[HB:.*]] = cleave.reshape %[[HV]] : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[HT:.*]] = cleave.transpose %[[HB]] {perm = array<i64: 1, 0, 2>} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[HG:.*]] = cleave.sp_all_gather %[[HT]] {axes = ["tensor"], dim = 0 : i64} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[HW:.*]] = cleave.transpose %[[HG]] {perm = array<i64: 1, 0, 2>} : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[HF:.*]] = cleave.reshape %[[HW]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: cleave.matmul %[[HF]], %{{.*}} : (tensor<8x8xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>
// Out of c_proj: the flattened partial sum, reduce-scattered on the
// sequence of its [batch, seq, d] view; the bias (through f) added to the
// rank's rows, the view back, the residual.
// CHECK: %[[O:.*]] = cleave.matmul {{.*}} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[OB:.*]] = cleave.reshape %[[O]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[OT:.*]] = cleave.transpose %[[OB]] {perm = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[OS:.*]] = cleave.sp_reduce_scatter %[[OT]] {axes = ["tensor"], dim = 0 : i64} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[OL:.*]] = cleave.transpose %[[OS]] {perm = array<i64: 1, 0, 2>} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[OR:.*]] = cleave.reshape %[[OL]] : tensor<2x2x8xf32> -> tensor<4x8xf32>
// CHECK: %[[BO:.*]] = cleave.tp_copy %{{.*}} {axes = ["tensor"]} : tensor<8xf32>
// CHECK: %[[OA:.*]] = cleave.add %[[BO]], %[[OR]] : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[O3:.*]] = cleave.reshape %[[OA]] : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[X1:.*]] = cleave.add %{{.*}}, %[[O3]] : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// The MLP the same way: c_fc's input gathered, c_proj's sum scattered.
// CHECK: cleave.layer_norm %[[X1]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: cleave.sp_all_gather {{.*}} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: cleave.matmul {{.*}} : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK: cleave.matmul {{.*}} : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK: cleave.sp_reduce_scatter {{.*}} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: cleave.add {{.*}} : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

// Forward and backward: no all-reduce of a whole activation, flattened
// or not (the norms' and biases' [8] gradients and the position table's
// are the only sums).
// NOAR-LABEL: func.func @forward_backward
// NOAR-NOT: cleave.tp_reduce {{.*}} tensor<8x8xf32>
// NOAR-NOT: cleave.tp_reduce {{.*}} tensor<2x4x8xf32>
// NOAR: return

cleave.parameter @wte.weight : tensor<16x8xf32>
cleave.parameter @wpe.weight : tensor<4x8xf32>
cleave.parameter @h.0.ln_1.weight : tensor<8xf32>
cleave.parameter @h.0.ln_1.bias : tensor<8xf32>
cleave.parameter @h.0.attn.c_attn.weight : tensor<8x24xf32>
cleave.parameter @h.0.attn.c_attn.bias : tensor<24xf32>
cleave.parameter @h.0.attn.c_proj.weight : tensor<8x8xf32>
cleave.parameter @h.0.attn.c_proj.bias : tensor<8xf32>
cleave.parameter @h.0.ln_2.weight : tensor<8xf32>
cleave.parameter @h.0.ln_2.bias : tensor<8xf32>
cleave.parameter @h.0.mlp.c_fc.weight : tensor<8x32xf32>
cleave.parameter @h.0.mlp.c_fc.bias : tensor<32xf32>
cleave.parameter @h.0.mlp.c_proj.weight : tensor<32x8xf32>
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
  %hv = cleave.reshape %h : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %wqkv = cleave.get_param @h.0.attn.c_attn.weight : tensor<8x24xf32>
  %qkv0 = cleave.matmul %hv, %wqkv : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
  %bqkv = cleave.get_param @h.0.attn.c_attn.bias : tensor<24xf32>
  %qkv1 = cleave.add %bqkv, %qkv0 : (tensor<24xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
  %qkv = cleave.reshape %qkv1 : tensor<8x24xf32> -> tensor<2x4x24xf32>
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
  %av = cleave.reshape %a2 : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %wo = cleave.get_param @h.0.attn.c_proj.weight : tensor<8x8xf32>
  %o0 = cleave.matmul %av, %wo : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %bo = cleave.get_param @h.0.attn.c_proj.bias : tensor<8xf32>
  %o1 = cleave.add %bo, %o0 : (tensor<8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %o = cleave.reshape %o1 : tensor<8x8xf32> -> tensor<2x4x8xf32>
  %x1 = cleave.add %x, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g2 = cleave.get_param @h.0.ln_2.weight : tensor<8xf32>
  %b2 = cleave.get_param @h.0.ln_2.bias : tensor<8xf32>
  %h2 = cleave.layer_norm %x1 scale %g2 bias %b2 {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h2v = cleave.reshape %h2 : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %wfc = cleave.get_param @h.0.mlp.c_fc.weight : tensor<8x32xf32>
  %f0 = cleave.matmul %h2v, %wfc : (tensor<8x8xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %bfc = cleave.get_param @h.0.mlp.c_fc.bias : tensor<32xf32>
  %f1 = cleave.add %bfc, %f0 : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %f1s = cleave.reshape %f1 : tensor<8x32xf32> -> tensor<2x4x32xf32>
  %f2 = cleave.gelu %f1s {approximate = "tanh"} : tensor<2x4x32xf32>
  %f2v = cleave.reshape %f2 : tensor<2x4x32xf32> -> tensor<8x32xf32>
  %wp = cleave.get_param @h.0.mlp.c_proj.weight : tensor<32x8xf32>
  %m0 = cleave.matmul %f2v, %wp : (tensor<8x32xf32>, tensor<32x8xf32>) -> tensor<8x8xf32>
  %bp = cleave.get_param @h.0.mlp.c_proj.bias : tensor<8xf32>
  %m1 = cleave.add %bp, %m0 : (tensor<8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = cleave.reshape %m1 : tensor<8x8xf32> -> tensor<2x4x8xf32>
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
