// Where a tensor-parallel split cannot go on, --cleave-propagate-shardings
// replicates and says so: a remark, and `cleave.sharding_stop` on the op
// with the reason (what the plan and report read). A split value meeting a
// dimension its op needs whole (a softmax's axis) or an op without a
// sharding rule is gathered there; a seed whose dimension is not divisible
// by the degree is refused and the weight replicated.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics --cleave-propagate-shardings=tensor=2 | FileCheck %s

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @p {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<4x8xf32>
  // CHECK-LABEL: func.func @softmax_axis
  func.func @softmax_axis() -> tensor<4x8xf32> {
    %p = cleave.get_param @p : tensor<4x8xf32>
    // CHECK: cleave.exp {{.*}}cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>
    %e = cleave.exp %p : tensor<4x8xf32>
    // CHECK: cleave.softmax
    // CHECK-SAME: cleave.sharding_stop = "operand 0 is gathered: dimension 1 must stay whole in ([i, j])->([i, j]) {i=4, j=8} need_replication={j}"
    // CHECK-NOT: cleave.sharding =
    // CHECK-SAME: tensor<4x8xf32>
    // expected-remark @+1 {{tensor-parallel split stops at cleave.softmax: operand 0 is gathered: dimension 1 must stay whole}}
    %s = cleave.softmax %e {axis = 1 : i64} : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// -----

// The rows stay split through the softmax over the columns.
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @p {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<4x8xf32>
  // CHECK-LABEL: func.func @softmax_rows
  func.func @softmax_rows() -> tensor<4x8xf32> {
    %p = cleave.get_param @p : tensor<4x8xf32>
    // CHECK: cleave.softmax
    // CHECK-NOT: cleave.sharding_stop
    // CHECK-SAME: cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>
    %s = cleave.softmax %p {axis = 1 : i64} : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @p {cleave.sharding = #cleave.sharding<[{"tensor"}]>} : tensor<8xf32>
  // CHECK-LABEL: func.func @no_rule
  func.func @no_rule() -> tensor<8xf32> {
    %p = cleave.get_param @p : tensor<8xf32>
    // CHECK: cleave.cumsum
    // CHECK-SAME: cleave.sharding_stop = "operand 0 is gathered: the op has no sharding rule"
    // expected-remark @+1 {{tensor-parallel split stops at cleave.cumsum: operand 0 is gathered: the op has no sharding rule}}
    %c = cleave.cumsum %p {axis = 0 : i64} : tensor<8xf32>
    // Its result is replicated: nothing reaches the negation.
    // CHECK: cleave.neg
    // CHECK-NOT: cleave.sharding
    // CHECK-SAME: tensor<8xf32>
    %n = cleave.neg %c : tensor<8xf32>
    return %n : tensor<8xf32>
  }
}

// -----

// A column-parallel product whose 3 output features do not divide over 2
// ranks stays replicated.
cleave.parameter @ln.weight : tensor<8xf32>
cleave.parameter @w : tensor<3x8xf32>
// CHECK-LABEL: func.func @indivisible
func.func @indivisible(%x: tensor<2x8xf32>) -> tensor<2x3xf32> {
  %g = cleave.get_param @ln.weight : tensor<8xf32>
  %h = cleave.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %w = cleave.get_param @w : tensor<3x8xf32>
  // CHECK: cleave.matmul
  // CHECK-SAME: cleave.sharding_stop = "column-parallel split refused: its dimension of 3 is not divisible by tensor=2; the weight is replicated"
  // expected-remark @+1 {{column-parallel split refused: its dimension of 3 is not divisible by tensor=2}}
  %y = cleave.matmul %h, %w {transpose_rhs} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// A norm's result that its users split is computed whole and sliced: no
// gather, so no stop (the padding_idx model of models/third_party.py has
// `x + fc(gelu(ln(x)))` with fc row-parallel and no column-parallel
// partner).
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @g : tensor<8xf32>
  cleave.parameter @p {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<4x8xf32>
  // CHECK-LABEL: func.func @sliced_result
  func.func @sliced_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %g = cleave.get_param @g : tensor<8xf32>
    // CHECK: cleave.rms_norm
    // CHECK-NOT: cleave.sharding_stop
    // CHECK-SAME: cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>
    %h = cleave.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %p = cleave.get_param @p : tensor<4x8xf32>
    %y = cleave.add %h, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
