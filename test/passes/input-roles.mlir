// Tests of --cleave-input-roles: the forward's first two integer
// [batch, seq] arguments become the token ids and targets; floats, bools
// and later integers are left alone, a role already given is kept, and
// targets of another shape than the token ids are refused.
// RUN: cleave-opt %s --split-input-file --cleave-input-roles --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<2x4xf32>,
// CHECK-SAME: %{{.*}}: tensor<2x4xi1>,
// CHECK-SAME: %{{.*}}: tensor<2x4xi64> {cleave.role = "tokens"},
// CHECK-SAME: %{{.*}}: tensor<2x4xi64> {cleave.role = "targets"},
// CHECK-SAME: %{{.*}}: tensor<2x4xi64>)
func.func @forward(%x: tensor<2x4xf32>, %mask: tensor<2x4xi1>, %ids: tensor<2x4xi64>,
                   %labels: tensor<2x4xi64>, %extra: tensor<2x4xi64>) {
  return
}

// -----

// A role given before is kept and counted: here the targets come first.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<3x5xi32> {cleave.role = "targets"},
// CHECK-SAME: %{{.*}}: tensor<3x5xi32> {cleave.role = "tokens"})
func.func @forward(%labels: tensor<3x5xi32> {cleave.role = "targets"},
                   %ids: tensor<3x5xi32>) {
  return
}

// -----

// expected-error @+1 {{the targets 'labels' have shape 'tensor<2x8xi64>', but the token ids are 'tensor<2x4xi64>'}}
func.func @forward(%ids: tensor<2x4xi64>, %labels: tensor<2x8xi64> {cleave.onnx_name = "labels"}) {
  return
}
