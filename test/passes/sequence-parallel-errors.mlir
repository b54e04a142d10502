// What --cleave-sequence-parallel refuses, each naming the spec key: a
// sequence the tensor degree does not divide, and a function that returns
// an activation split on the sequence (the model's one output is its loss).
// RUN: cleave-opt %s --split-input-file --cleave-sequence-parallel --verify-diagnostics

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
// expected-error @+1 {{spec key 'sequence_parallel' splits the sequence of 5 tokens over the 2 ranks of 'tensor_parallel_degree', which do not divide it; give a sequence length that is a multiple of 2, or set 'sequence_parallel' to false}}
func.func @forward(%ids: tensor<2x5xi64>, %x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %g = cleave.tp_reduce %x {axes = ["tensor"]} : tensor<2x5x8xf32>
  return %g : tensor<2x5x8xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @forward(%ids: tensor<2x4xi64>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %g = cleave.tp_reduce %x {axes = ["tensor"]} : tensor<2x4x8xf32>
  %y = cleave.add %g, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{the function returns a sequence-parallel value; spec key 'sequence_parallel' needs the model's one output to be its loss}}
  return %y : tensor<2x4x8xf32>
}
}
