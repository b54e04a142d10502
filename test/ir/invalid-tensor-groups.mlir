// The groups of f and g (cleave.tp_copy, cleave.tp_reduce): whole mesh
// axes, or one sub-axis "axis:(pre-size)size" inside its axis
// (ir/TensorGroups.h). A valid sub-axis round-trips; each malformed one
// is an error naming it.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
  func.func @ok(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = cleave.tp_copy %x {axes = ["tensor:(1)2"]} : tensor<2x4xf32>
    %b = cleave.tp_reduce %a {axes = ["tensor:(2)2"]} : tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
  func.func @outside(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{sub-axis "tensor:(2)4" is not inside the axis's 4 ranks}}
    %a = cleave.tp_copy %x {axes = ["tensor:(2)4"]} : tensor<2x4xf32>
    return %a : tensor<2x4xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
  func.func @malformed(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{group "tensor:(2)" is neither a mesh axis nor a sub-axis "axis:(pre-size)size"}}
    %a = cleave.tp_reduce %x {axes = ["tensor:(2)"]} : tensor<2x4xf32>
    return %a : tensor<2x4xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
  func.func @unknown(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{mesh axis "data" is not in the mesh}}
    %a = cleave.tp_copy %x {axes = ["data:(1)2"]} : tensor<2x4xf32>
    return %a : tensor<2x4xf32>
  }
}
