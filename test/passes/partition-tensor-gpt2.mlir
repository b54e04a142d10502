// Tests of --cleave-partition-tensor on the GPT-2 block of
// propagate-shardings-gpt2.mlir, propagated with tensor=2, first with the
// vocabulary kept replicated (vocab=false): Megatron-LM's local program.
// f (tp_copy) before each column-parallel region (c_attn, c_fc), g
// (tp_reduce) after each row-parallel product (attn c_proj, mlp c_proj),
// before its bias; local shapes; the q/k/v slices of the blocked c_attn
// rescaled to the rank's heads; split parameters with their full type.
// RUN: cleave-opt %s --cleave-propagate-shardings="tensor=2 vocab=false" --cleave-partition-tensor | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings="tensor=2 vocab=false" --cleave-partition-tensor | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor | FileCheck %s --check-prefix=VOCAB
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=1 --cleave-partition-tensor | FileCheck %s --check-prefix=ONE

// CHECK-DAG: cleave.parameter @wte.weight : tensor<16x8xf32>
// CHECK-DAG: cleave.parameter @h.0.attn.c_attn.weight {cleave.full_type = tensor<24x8xf32>, cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<12x8xf32>
// CHECK-DAG: cleave.parameter @h.0.attn.c_attn.bias {cleave.full_type = tensor<24xf32>, cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}]>} : tensor<12xf32>
// CHECK-DAG: cleave.parameter @h.0.attn.c_proj.weight {cleave.full_type = tensor<8x8xf32>, cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<8x4xf32>
// CHECK-DAG: cleave.parameter @h.0.attn.c_proj.bias : tensor<8xf32>
// CHECK-DAG: cleave.parameter @h.0.mlp.c_fc.weight {cleave.full_type = tensor<32x8xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<16x8xf32>
// CHECK-DAG: cleave.parameter @h.0.mlp.c_fc.bias {cleave.full_type = tensor<32xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}]>} : tensor<16xf32>
// CHECK-DAG: cleave.parameter @h.0.mlp.c_proj.weight {cleave.full_type = tensor<8x32xf32>, cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<8x16xf32>

// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.layer_norm
// CHECK: %[[F:.*]] = cleave.tp_copy %[[H]] {axes = ["tensor"]} : tensor<2x4x8xf32>
// CHECK: cleave.matmul %[[F]], %{{.*}} {transpose_rhs} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
// CHECK: cleave.add {{.*}} -> tensor<2x4x12xf32>
// The rank's head of q, of k and of v: [0,4), [4,8), [8,12) of its 12.
// CHECK: cleave.slice {{.*}} {limit = array<i64: 2, 4, 4>, start = array<i64: 0, 0, 0>, step = array<i64: 1, 1, 1>} : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: cleave.slice {{.*}} {limit = array<i64: 2, 4, 8>, start = array<i64: 0, 0, 4>, step = array<i64: 1, 1, 1>} : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: cleave.slice {{.*}} {limit = array<i64: 2, 4, 12>, start = array<i64: 0, 0, 8>, step = array<i64: 1, 1, 1>} : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: cleave.reshape {{.*}} : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
// CHECK: cleave.attention {{.*}} -> tensor<2x1x4x4xf32>
// CHECK: %[[O:.*]] = cleave.matmul {{.*}} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = cleave.tp_reduce %[[O]] {axes = ["tensor"]} : tensor<2x4x8xf32>
// CHECK: cleave.add %{{.*}}, %[[G]]
// CHECK: %[[H2:.*]] = cleave.layer_norm
// CHECK: %[[F2:.*]] = cleave.tp_copy %[[H2]]
// CHECK: cleave.matmul %[[F2]], {{.*}} -> tensor<2x4x16xf32>
// CHECK: cleave.gelu {{.*}} : tensor<2x4x16xf32>
// CHECK: %[[M:.*]] = cleave.matmul {{.*}} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[G2:.*]] = cleave.tp_reduce %[[M]]
// CHECK: cleave.add %{{.*}}, %[[G2]]
// The head stays whole: no more f or g, no shardings left on values.
// CHECK-NOT: cleave.tp_
// CHECK-NOT: cleave.sharding =
// CHECK: return

// With the vocabulary split (the tied wte, 8 of its 16 rows per rank):
// the embedding looks up the rank's rows, ids off its range masked to 0,
// and its partial result is completed by g before the position add; the
// head is column-parallel after an f; the cross-entropy is Megatron's:
// the max over the group (cleave.all_reduce max), the sum of exp and the
// target's logit completed by g.
// VOCAB: cleave.parameter @wte.weight {cleave.full_type = tensor<16x8xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<8x8xf32>
// VOCAB-LABEL: func.func @forward
// VOCAB: %[[R:.*]] = cleave.axis_index {axis = "tensor"} : tensor<i64>
// VOCAB: %[[N:.*]] = cleave.constant dense<8> : tensor<i64>
// VOCAB: %[[LO:.*]] = cleave.mul %[[R]], %[[N]]
// VOCAB: %[[LOCAL:.*]] = cleave.sub %arg0, %[[LO]]
// VOCAB: %[[IN:.*]] = cleave.and
// VOCAB: %[[SAFE:.*]] = cleave.select %[[IN]], %[[LOCAL]]
// VOCAB: %[[E:.*]] = cleave.embedding %{{.*}}, %[[SAFE]] : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// VOCAB: %[[MASK:.*]] = cleave.reshape %[[IN]] : tensor<2x4xi1> -> tensor<2x4x1xi1>
// VOCAB: %[[Z:.*]] = cleave.select %[[MASK]], %[[E]]
// VOCAB: %[[TOK:.*]] = cleave.tp_reduce %[[Z]] {axes = ["tensor"]} : tensor<2x4x8xf32>
// VOCAB: cleave.add %[[TOK]]
// VOCAB: cleave.gelu
// VOCAB: %[[HF:.*]] = cleave.layer_norm
// VOCAB: %[[F:.*]] = cleave.tp_copy %[[HF]]
// VOCAB: cleave.matmul %[[F]], {{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// VOCAB: %[[L:.*]] = cleave.reshape {{.*}} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// VOCAB: %[[M:.*]] = cleave.reduce_max %[[L]]
// VOCAB: %[[MAX:.*]] = cleave.all_reduce %[[M]] {group = "tensor", reduce = "max"} : tensor<8x1xf32>
// VOCAB: %[[SH:.*]] = cleave.sub %[[L]], %[[MAX]]
// VOCAB: cleave.exp %[[SH]]
// VOCAB: %[[S:.*]] = cleave.reduce_sum
// VOCAB: cleave.tp_reduce %[[S]] {axes = ["tensor"]} : tensor<8x1xf32>
// VOCAB: cleave.axis_index
// VOCAB: cleave.gather_elements %[[SH]]
// VOCAB: %[[PICK:.*]] = cleave.select
// VOCAB: cleave.tp_reduce %[[PICK]] {axes = ["tensor"]} : tensor<8x1xf32>
// VOCAB: cleave.log
// VOCAB: cleave.div {{.*}} -> tensor<f32>
// VOCAB-NOT: cleave.softmax_cross_entropy
// VOCAB: return

// ONE-NOT: cleave.tp_
// ONE-NOT: cleave.full_type

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
  // The embedding's partial sum is completed before the add: replicated.
  %x = cleave.add %tok, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %g1 = cleave.get_param @h.0.ln_1.weight : tensor<8xf32>
  %b1 = cleave.get_param @h.0.ln_1.bias : tensor<8xf32>
  %h = cleave.layer_norm %x scale %g1 bias %b1 {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %wqkv = cleave.get_param @h.0.attn.c_attn.weight : tensor<24x8xf32>
  %qkv0 = cleave.matmul %h, %wqkv {transpose_rhs} : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %bqkv = cleave.get_param @h.0.attn.c_attn.bias : tensor<24xf32>
  %qkv = cleave.add %bqkv, %qkv0 : (tensor<24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  // q, k and v are each split by heads.
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
  // Row-parallel: each rank's product is a partial sum.
  %o0 = cleave.matmul %a2, %wo {transpose_rhs} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %bo = cleave.get_param @h.0.attn.c_proj.bias : tensor<8xf32>
  // The bias is added once, after the partial sum is completed.
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
  // The tied head: column-parallel over the vocabulary.
  %wte2 = cleave.get_param @wte.weight : tensor<16x8xf32>
  %logits = cleave.matmul %hf, %wte2 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %l2 = cleave.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %t2 = cleave.reshape %targets : tensor<2x4xi64> -> tensor<8xi64>
  // The vocab-parallel cross-entropy's loss is whole.
  %loss = cleave.softmax_cross_entropy %l2, %t2 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
