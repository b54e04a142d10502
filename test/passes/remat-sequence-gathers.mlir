// Sequence parallelism without activation checkpointing: cleave-remat
// (strategy none, as cleave-compile runs it when sequence_parallel is set
// and activation_checkpointing is not) gathers the inputs of the
// column-parallel products again in the backward, as Megatron-LM does,
// so the forward saves the rank's part of the sequence ([2, 2, 8]) rather
// than the gathered whole ([2, 4, 8]) for the weights' gradients. The
// GPT-2 block of sequence-parallel-gpt2.mlir with tensor=2: c_attn, c_fc
// and the head each read a gather chain (transpose, sp_all_gather,
// transpose), each cloned before its first backward reader. Every tensor
// rank runs the same backward, so the recomputed gathers meet their peers.
// The gathers whose gradient is the rank's part (split_grad: readers
// outside the tensor-parallel regions) are not recomputed.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-sequence-parallel --cleave-autodiff --cleave-remat=strategy=none | FileCheck %s
// Without sequence parallelism strategy none changes nothing.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor --cleave-autodiff --cleave-remat=strategy=none | FileCheck %s --check-prefix=NONE

// CHECK-NOT: tensor<2x4x8xf32> {cleave.saved}
// CHECK-LABEL: func.func @forward_backward
// CHECK-COUNT-3: cleave.sp_all_gather %{{.*}} {axes = ["tensor"], cleave.recompute, dim = 0 : i64} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: return

// NONE-NOT: cleave.recompute

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
