// Tests of --cleave-propagate-shardings on nn.MultiheadAttention as
// torch.onnx.export writes it (models/third_party.py's MHABlock, through
// the importer and cleave-fuse): the fused in_proj_weight [3*D, D] is
// sliced into q, k and v, the heads are merged into the batch
// ([seq, batch, D] -> [seq, batch*heads, D/heads]) and attention stays
// two products around a softmax. The row-parallel out_proj splits the
// heads, which propagate back through the products and the softmax
// (batch*heads as 2 blocks, one per sample, each split by heads) to
// in_proj_weight as 3 blocks; fc1/fc2 are column/row-parallel and the
// untied head and the embedding vocab-parallel.
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=2 | FileCheck %s
// RUN: cleave-opt %s --cleave-propagate-shardings=tensor=4 | FileCheck %s --check-prefix=T4

// CHECK-DAG: cleave.parameter @emb.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>}
// CHECK-DAG: cleave.parameter @pos.weight : tensor<8x32xf32>
// CHECK-DAG: cleave.parameter @attn.in_proj_weight {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<96x32xf32>
// CHECK-DAG: cleave.parameter @attn.in_proj_bias {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}]>} : tensor<96xf32>
// CHECK-DAG: cleave.parameter @attn.out_proj.weight {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<32x32xf32>
// CHECK-DAG: cleave.parameter @attn.out_proj.bias : tensor<32xf32>
// CHECK-DAG: cleave.parameter @fc1.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<128x32xf32>
// CHECK-DAG: cleave.parameter @fc2.weight {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<32x128xf32>
// CHECK-DAG: cleave.parameter @head.weight {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<64x32xf32>
// T4-DAG: cleave.parameter @attn.in_proj_weight {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<96x32xf32>

// CHECK-LABEL: func.func @forward
// CHECK: cleave.reshape {{.*}}cleave.sharding = #cleave.sharding<[{}, 2 blocks {"tensor"}, {}]>{{.*}} : tensor<8x2x32xf32> -> tensor<8x8x8xf32>
// CHECK: cleave.softmax {{.*}}cleave.sharding = #cleave.sharding<[2 blocks {"tensor"}, {}, {}]>
// CHECK: cleave.reshape {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>{{.*}} : tensor<8x8x8xf32> -> tensor<16x32xf32>
// CHECK: cleave.matmul {{.*}}partial = ["tensor"]{{.*}} -> tensor<16x32xf32>
// CHECK-NOT: cleave.sharding_stop

cleave.parameter @emb.weight : tensor<64x32xf32>
cleave.parameter @pos.weight : tensor<8x32xf32>
cleave.parameter @ln1.weight : tensor<32xf32>
cleave.parameter @ln1.bias : tensor<32xf32>
cleave.parameter @attn.in_proj_weight : tensor<96x32xf32>
cleave.parameter @attn.in_proj_bias : tensor<96xf32>
cleave.parameter @attn.out_proj.weight : tensor<32x32xf32>
cleave.parameter @attn.out_proj.bias : tensor<32xf32>
cleave.parameter @ln2.weight : tensor<32xf32>
cleave.parameter @ln2.bias : tensor<32xf32>
cleave.parameter @fc1.weight : tensor<128x32xf32>
cleave.parameter @fc1.bias : tensor<128xf32>
cleave.parameter @fc2.weight : tensor<32x128xf32>
cleave.parameter @fc2.bias : tensor<32xf32>
cleave.parameter @lnf.weight : tensor<32xf32>
cleave.parameter @lnf.bias : tensor<32xf32>
cleave.parameter @head.weight : tensor<64x32xf32>
func.func @forward(%arg0: tensor<2x8xi64>, %arg1: tensor<2x8xi64>) -> (tensor<f32>) {
  %0 = cleave.constant dense<0.0> : tensor<1x8x8xf32>
  %1 = cleave.constant dense<1.000000e+00> : tensor<f32>
  %2 = cleave.constant dense<2.82842708> : tensor<f32>
  %3 = cleave.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %4 = cleave.get_param @emb.weight : tensor<64x32xf32>
  %5 = cleave.embedding %4, %arg0 : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  %6 = cleave.get_param @pos.weight : tensor<8x32xf32>
  %7 = cleave.gather %6, %3 {axis = 0 : i64} : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<8x32xf32>
  %8 = cleave.add %5, %7 : (tensor<2x8x32xf32>, tensor<8x32xf32>) -> tensor<2x8x32xf32>
  %9 = cleave.get_param @ln1.weight : tensor<32xf32>
  %10 = cleave.get_param @ln1.bias : tensor<32xf32>
  %11 = cleave.layer_norm %8 scale %9 bias %10 {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %12 = cleave.transpose %11 {perm = array<i64: 1, 0, 2>} : tensor<2x8x32xf32> -> tensor<8x2x32xf32>
  %13 = cleave.get_param @attn.in_proj_weight : tensor<96x32xf32>
  %14 = cleave.matmul %12, %13 {transpose_rhs} : (tensor<8x2x32xf32>, tensor<96x32xf32>) -> tensor<8x2x96xf32>
  %15 = cleave.get_param @attn.in_proj_bias : tensor<96xf32>
  %16 = cleave.add %15, %14 : (tensor<96xf32>, tensor<8x2x96xf32>) -> tensor<8x2x96xf32>
  %17 = cleave.slice %16 {limit = array<i64: 8, 2, 32>, start = array<i64: 0, 0, 0>, step = array<i64: 1, 1, 1>} : tensor<8x2x96xf32> -> tensor<8x2x32xf32>
  %18 = cleave.slice %16 {limit = array<i64: 8, 2, 64>, start = array<i64: 0, 0, 32>, step = array<i64: 1, 1, 1>} : tensor<8x2x96xf32> -> tensor<8x2x32xf32>
  %19 = cleave.slice %16 {limit = array<i64: 8, 2, 96>, start = array<i64: 0, 0, 64>, step = array<i64: 1, 1, 1>} : tensor<8x2x96xf32> -> tensor<8x2x32xf32>
  %20 = cleave.reshape %17 : tensor<8x2x32xf32> -> tensor<8x8x8xf32>
  %21 = cleave.transpose %20 {perm = array<i64: 1, 0, 2>} : tensor<8x8x8xf32> -> tensor<8x8x8xf32>
  %22 = cleave.reshape %18 : tensor<8x2x32xf32> -> tensor<8x8x8xf32>
  %23 = cleave.reshape %19 : tensor<8x2x32xf32> -> tensor<8x8x8xf32>
  %24 = cleave.transpose %23 {perm = array<i64: 1, 0, 2>} : tensor<8x8x8xf32> -> tensor<8x8x8xf32>
  %25 = cleave.div %21, %2 : (tensor<8x8x8xf32>, tensor<f32>) -> tensor<8x8x8xf32>
  %26 = cleave.transpose %22 {perm = array<i64: 1, 2, 0>} : tensor<8x8x8xf32> -> tensor<8x8x8xf32>
  %27 = cleave.matmul %25, %26 : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %28 = cleave.mul %27, %1 : (tensor<8x8x8xf32>, tensor<f32>) -> tensor<8x8x8xf32>
  %29 = cleave.add %28, %0 : (tensor<8x8x8xf32>, tensor<1x8x8xf32>) -> tensor<8x8x8xf32>
  %30 = cleave.softmax %29 {axis = 2 : i64} : tensor<8x8x8xf32>
  %31 = cleave.matmul %30, %24 : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %32 = cleave.transpose %31 {perm = array<i64: 1, 0, 2>} : tensor<8x8x8xf32> -> tensor<8x8x8xf32>
  %33 = cleave.reshape %32 : tensor<8x8x8xf32> -> tensor<16x32xf32>
  %34 = cleave.get_param @attn.out_proj.weight : tensor<32x32xf32>
  %35 = cleave.matmul %33, %34 {transpose_rhs} : (tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
  %36 = cleave.get_param @attn.out_proj.bias : tensor<32xf32>
  %37 = cleave.add %35, %36 : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %38 = cleave.reshape %37 : tensor<16x32xf32> -> tensor<8x2x32xf32>
  %39 = cleave.transpose %38 {perm = array<i64: 1, 0, 2>} : tensor<8x2x32xf32> -> tensor<2x8x32xf32>
  %40 = cleave.add %8, %39 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %41 = cleave.get_param @ln2.weight : tensor<32xf32>
  %42 = cleave.get_param @ln2.bias : tensor<32xf32>
  %43 = cleave.layer_norm %40 scale %41 bias %42 {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %44 = cleave.get_param @fc1.weight : tensor<128x32xf32>
  %45 = cleave.matmul %43, %44 {transpose_rhs} : (tensor<2x8x32xf32>, tensor<128x32xf32>) -> tensor<2x8x128xf32>
  %46 = cleave.get_param @fc1.bias : tensor<128xf32>
  %47 = cleave.add %46, %45 : (tensor<128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %48 = cleave.gelu %47 {approximate = "tanh"} : tensor<2x8x128xf32>
  %49 = cleave.get_param @fc2.weight : tensor<32x128xf32>
  %50 = cleave.matmul %48, %49 {transpose_rhs} : (tensor<2x8x128xf32>, tensor<32x128xf32>) -> tensor<2x8x32xf32>
  %51 = cleave.get_param @fc2.bias : tensor<32xf32>
  %52 = cleave.add %51, %50 : (tensor<32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %53 = cleave.add %40, %52 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %54 = cleave.get_param @lnf.weight : tensor<32xf32>
  %55 = cleave.get_param @lnf.bias : tensor<32xf32>
  %56 = cleave.layer_norm %53 scale %54 bias %55 {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %57 = cleave.get_param @head.weight : tensor<64x32xf32>
  %58 = cleave.matmul %56, %57 {transpose_rhs} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  %59 = cleave.reshape %58 : tensor<2x8x64xf32> -> tensor<16x64xf32>
  %60 = cleave.reshape %arg1 : tensor<2x8xi64> -> tensor<16xi64>
  %61 = cleave.softmax_cross_entropy %59, %60 {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<16x64xf32>, tensor<16xi64>) -> tensor<f32>
  return %61 : tensor<f32>
}
