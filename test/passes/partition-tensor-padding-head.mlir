// BERT's shape of the vocabulary end, as Hugging Face exports it: the word
// embedding has a padding_idx (nn.Embedding's row that the lookup gives no
// gradient; also OPT's and Gemma's), and the head is tied to it behind a
// prediction-head transform (a product of the last norm's output, gelu, a
// layer norm) -- issue 13's Hugging Face families under tensor 2.
//
// Propagation: the transform's product reads a norm's output, so the
// column-parallel seed would split its output features, which its layer
// norm must then gather again (an all-gather the partition does not make):
// the seed is tried and taken back, the weight stays whole with a remark,
// and the head (also a product of a norm's output) is still split over
// the vocabulary, with the tied table.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 2>&1 | FileCheck %s --check-prefix=PROP
//
// Partition: the vocab-parallel embedding with padding_idx 9 (local row
// 9 mod 8 = 1 of rank 1's 8 rows). The program is the same on both ranks,
// and local row 1 of rank 0 is token 1, which needs its gradient, so the
// ids equal to 9 take a second lookup with padding_idx 1 and every other
// id a lookup without one.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor 2>/dev/null | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 --cleave-partition-tensor 2>/dev/null | cleave-opt | FileCheck %s

// PROP: remark: tensor-parallel split stops at cleave.matmul: column-parallel split not made: its output would be gathered again at cleave.layer_norm (operand 0 is gathered: dimension 2 must stay whole in {{.*}}); the weight is replicated
// PROP-DAG: cleave.parameter @word.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<16x8xf32>
// PROP-DAG: cleave.parameter @transform.weight : tensor<8x8xf32>
// PROP-DAG: cleave.parameter @decoder.bias {cleave.sharding = #cleave.sharding<[{"tensor"}]>} : tensor<16xf32>
// PROP-LABEL: func.func @forward
// PROP: cleave.embedding {{.*}}cleave.sharding = #cleave.sharding<[{}, {}, {}], partial = ["tensor"]>, padding_idx = 9 : i64}
// PROP: cleave.matmul {{.*}}cleave.sharding_stop = "column-parallel split not made
// PROP-NOT: cleave.sharding =
// PROP-SAME: -> tensor<2x4x8xf32>
// PROP: cleave.gelu
// PROP-NOT: cleave.sharding
// PROP-SAME: tensor<2x4x8xf32>
// PROP: cleave.layer_norm
// PROP-NOT: cleave.sharding
// PROP-SAME: -> tensor<2x4x8xf32>
// PROP: cleave.matmul {{.*}}cleave.sharding = #cleave.sharding<[{}, {}, {"tensor"}]>{{.*}} -> tensor<2x4x16xf32>

// CHECK-DAG: cleave.parameter @word.weight {cleave.full_type = tensor<16x8xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<8x8xf32>
// CHECK-DAG: cleave.parameter @transform.weight : tensor<8x8xf32>
// CHECK-LABEL: func.func @forward
// CHECK: %[[LOCAL:.*]] = cleave.sub %arg0
// CHECK: %[[IN:.*]] = cleave.and
// CHECK: %[[SAFE:.*]] = cleave.select %[[IN]], %[[LOCAL]]
// CHECK: %[[E:.*]] = cleave.embedding %[[TABLE:.*]], %[[SAFE]] : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK: %[[EP:.*]] = cleave.embedding %[[TABLE]], %[[SAFE]] {padding_idx = 1 : i64} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK: %[[NINE:.*]] = cleave.constant dense<9> : tensor<i64>
// CHECK: %[[ISPAD:.*]] = cleave.equal %arg0, %[[NINE]]
// CHECK: %[[ISPAD1:.*]] = cleave.reshape %[[ISPAD]] : tensor<2x4xi1> -> tensor<2x4x1xi1>
// CHECK: %[[PICK:.*]] = cleave.select %[[ISPAD1]], %[[EP]], %[[E]]
// CHECK: %[[MASK:.*]] = cleave.reshape %[[IN]] : tensor<2x4xi1> -> tensor<2x4x1xi1>
// CHECK: %[[Z:.*]] = cleave.select %[[MASK]], %[[PICK]]
// CHECK: cleave.tp_reduce %[[Z]] {axes = ["tensor"]} : tensor<2x4x8xf32>
// The transform runs whole on each rank: no f before it.
// CHECK: %[[H:.*]] = cleave.layer_norm
// CHECK-NEXT: cleave.get_param @transform.weight
// CHECK-NEXT: cleave.matmul %[[H]], {{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[HT:.*]] = cleave.layer_norm
// CHECK: %[[F:.*]] = cleave.tp_copy %[[HT]] {axes = ["tensor"]}
// CHECK: cleave.matmul %[[F]], {{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>

cleave.parameter @word.weight : tensor<16x8xf32>
cleave.parameter @ln.weight : tensor<8xf32>
cleave.parameter @ln.bias : tensor<8xf32>
cleave.parameter @transform.weight : tensor<8x8xf32>
cleave.parameter @transform.ln.weight : tensor<8xf32>
cleave.parameter @transform.ln.bias : tensor<8xf32>
cleave.parameter @decoder.bias : tensor<16xf32>

func.func @forward(%idx: tensor<2x4xi64>, %targets: tensor<2x4xi64>) -> tensor<f32> {
  %w = cleave.get_param @word.weight : tensor<16x8xf32>
  %x = cleave.embedding %w, %idx {padding_idx = 9 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %g = cleave.get_param @ln.weight : tensor<8xf32>
  %b = cleave.get_param @ln.bias : tensor<8xf32>
  %h = cleave.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %wt = cleave.get_param @transform.weight : tensor<8x8xf32>
  %t0 = cleave.matmul %h, %wt {transpose_rhs} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %t1 = cleave.gelu %t0 {approximate = "none"} : tensor<2x4x8xf32>
  %gt = cleave.get_param @transform.ln.weight : tensor<8xf32>
  %bt = cleave.get_param @transform.ln.bias : tensor<8xf32>
  %ht = cleave.layer_norm %t1 scale %gt bias %bt {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %w2 = cleave.get_param @word.weight : tensor<16x8xf32>
  %l0 = cleave.matmul %ht, %w2 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %db = cleave.get_param @decoder.bias : tensor<16xf32>
  %l1 = cleave.add %db, %l0 : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %l2 = cleave.reshape %l1 : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %t2 = cleave.reshape %targets : tensor<2x4xi64> -> tensor<8xi64>
  %loss = cleave.softmax_cross_entropy %l2, %t2 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
