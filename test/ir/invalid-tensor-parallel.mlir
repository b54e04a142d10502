// Every verifier message of the tensor-parallel ops: their axes exist in
// the enclosing mesh, f and g name a group, axis_index is a scalar i64.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

func.func @no_mesh() -> tensor<i64> {
  // expected-error @+1 {{'cleave.axis_index' op needs a cleave.mesh on an enclosing module to resolve its mesh axes}}
  %r = cleave.axis_index {axis = "tensor"} : tensor<i64>
  return %r : tensor<i64>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @no_axis() -> tensor<i64> {
  // expected-error @+1 {{'cleave.axis_index' op axis "tensor" is not an axis of the mesh}}
  %r = cleave.axis_index {axis = "tensor"} : tensor<i64>
  return %r : tensor<i64>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @not_scalar() -> tensor<2xi64> {
  // expected-error @+1 {{'cleave.axis_index' op result #0 must be 0D tensor of 64-bit signless integer values}}
  %r = cleave.axis_index {axis = "tensor"} : tensor<2xi64>
  return %r : tensor<2xi64>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @empty_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cleave.tp_copy' op needs the mesh axes of its group (axes = ["tensor"])}}
  %y = cleave.tp_copy %x {axes = []} : tensor<4xf32>
  return %y : tensor<4xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cleave.tp_reduce' op}}
  %y = cleave.tp_reduce %x {axes = ["model"]} : tensor<4xf32>
  return %y : tensor<4xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @not_float(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'cleave.tp_reduce' op operand #0 must be statically shaped tensor of floating-point values}}
  %y = cleave.tp_reduce %x {axes = ["tensor"]} : tensor<4xi64>
  return %y : tensor<4xi64>
}
}
