// cleave-split-token-reads (prescaled_batch false): on tensor=2 each rank
// reads 2 of a microbatch's 4 samples of the token ids and targets, and
// the group all-gathers them before their readers. The arguments become
// the rank's part with cleave.read_parts; autodiff leaves the integer
// gathers alone (no gradient). A microbatch of 3 samples is read whole,
// with a remark and a plan note; one rank on the tensor axis changes
// nothing.
// RUN: cleave-opt %s --split-input-file --cleave-split-token-reads --verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-split-token-reads --cleave-autodiff --verify-diagnostics | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi64> {cleave.read_parts = 2 : i64, cleave.role = "tokens"}, %[[TGT:.*]]: tensor<2x4xi64> {cleave.read_parts = 2 : i64, cleave.role = "targets"})
// CHECK: %[[AI:.*]] = cleave.all_gather %[[IDS]] {axes = ["tensor"], dim = 0 : i64} : tensor<2x4xi64> -> tensor<4x4xi64>
// CHECK-NEXT: cleave.embedding %{{.*}}, %[[AI]] : (tensor<16x8xf32>, tensor<4x4xi64>) -> tensor<4x4x8xf32>
// The targets' gather sits before their first reader, by the loss (in a
// pipeline's last stage, not the first).
// CHECK: cleave.matmul
// CHECK: %[[AT:.*]] = cleave.all_gather %[[TGT]] {axes = ["tensor"], dim = 0 : i64} : tensor<2x4xi64> -> tensor<4x4xi64>
// CHECK-NEXT: cleave.reshape %[[AT]] : tensor<4x4xi64> -> tensor<16xi64>
// The backward reads the gathered ids the forward saved: no collective.
// GRAD-LABEL: func.func @forward(
// GRAD-SAME: tensor<2x4xi64> {cleave.read_parts = 2 : i64, cleave.role = "tokens"}
// GRAD: cleave.all_gather
// GRAD-LABEL: func.func @forward_backward
// GRAD-SAME: %[[SAVED:[^:]*]]: tensor<4x4xi64> {cleave.saved_from
// GRAD-NOT: cleave.all_gather
// GRAD: cleave.embedding_grad {{.*}}%[[SAVED]]
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @wte : tensor<16x8xf32>
  func.func @forward(%ids: tensor<4x4xi64> {cleave.role = "tokens"}, %targets: tensor<4x4xi64> {cleave.role = "targets"}) -> tensor<f32> {
    %w = cleave.get_param @wte : tensor<16x8xf32>
    %x = cleave.embedding %w, %ids : (tensor<16x8xf32>, tensor<4x4xi64>) -> tensor<4x4x8xf32>
    %logits = cleave.matmul %x, %w {transpose_rhs} : (tensor<4x4x8xf32>, tensor<16x8xf32>) -> tensor<4x4x16xf32>
    %l = cleave.reshape %logits : tensor<4x4x16xf32> -> tensor<16x16xf32>
    %t = cleave.reshape %targets : tensor<4x4xi64> -> tensor<16xi64>
    %loss = cleave.softmax_cross_entropy %l, %t {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<16x16xf32>, tensor<16xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A microbatch of 3 samples on 2 ranks: read whole, said so.
// CHECK-LABEL: module attributes
// CHECK-SAME: cleave.spec_notes = [{key = "prescaled_batch", value = "false", why = "the microbatch of 3 samples does not divide over the 2 tensor-parallel ranks: every rank of a group reads the group's samples, as with true"}]
// CHECK: func.func @forward(%{{.*}}: tensor<3x4xi64> {cleave.role = "tokens"})
// CHECK-NOT: cleave.all_gather
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @wte : tensor<16x8xf32>
  // expected-remark @+1 {{prescaled_batch: false: the microbatch of 3 samples does not divide over the 2 tensor-parallel ranks, so each of them reads the whole microbatch of 'tokens' (as with prescaled_batch: true)}}
  func.func @forward(%ids: tensor<3x4xi64> {cleave.role = "tokens"}) -> tensor<f32> {
    %w = cleave.get_param @wte : tensor<16x8xf32>
    %x = cleave.embedding %w, %ids : (tensor<16x8xf32>, tensor<3x4xi64>) -> tensor<3x4x8xf32>
    %s = cleave.reduce_sum %x {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<3x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// One tensor rank: unchanged.
// CHECK-LABEL: module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=1]>}
// CHECK: func.func @forward(%{{.*}}: tensor<4x4xi64> {cleave.role = "tokens"})
// CHECK-NOT: cleave.all_gather
module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=1]>} {
  cleave.parameter @wte : tensor<16x8xf32>
  func.func @forward(%ids: tensor<4x4xi64> {cleave.role = "tokens"}) -> tensor<f32> {
    %w = cleave.get_param @wte : tensor<16x8xf32>
    %x = cleave.embedding %w, %ids : (tensor<16x8xf32>, tensor<4x4xi64>) -> tensor<4x4x8xf32>
    %s = cleave.reduce_sum %x {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<4x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
