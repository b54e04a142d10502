// RUN: cleave-opt %s | cleave-opt --cleave-verify-imported | FileCheck %s
// CHECK: cleave.softmax_cross_entropy
module {
  cleave.parameter @"wte" : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
  func.func @forward(%idx: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
    %w = cleave.get_param @wte : tensor<16x8xf32>
    %e = cleave.embedding %w, %idx : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %n = cleave.layer_norm %e {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %wt = cleave.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
    %l = cleave.matmul %n, %wt : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %r = cleave.reshape %l : tensor<2x4x16xf32> -> tensor<8x16xf32>
    %tr = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64>
    %loss = cleave.softmax_cross_entropy %r, %tr {reduction = #cleave.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
