// Every verifier message of sequence parallelism's collectives: a group of
// mesh axes that exist, the sequence dimension resized by the group's
// size, split_grad over one axis.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @no_group(%x: tensor<2x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'cleave.sp_all_gather' op needs the mesh axes of its group (axes = ["tensor"])}}
  %g = cleave.sp_all_gather %x {axes = [], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
  return %g : tensor<4x4xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @no_axis(%x: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'cleave.sp_reduce_scatter' op mesh axis "tensor" is not in the mesh}}
  %s = cleave.sp_reduce_scatter %x {axes = ["tensor"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @not_gathered(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'cleave.sp_all_gather' op result 'tensor<2x8xf32>' must have size 4 in dimension 0}}
  %g = cleave.sp_all_gather %x {axes = ["tensor"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @indivisible(%x: tensor<3x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'cleave.sp_reduce_scatter' op dimension 0 of 'tensor<3x4xf32>' (size 3) is not divisible by the 2 ranks of the group}}
  %s = cleave.sp_reduce_scatter %x {axes = ["tensor"], dim = 0 : i64} : tensor<3x4xf32> -> tensor<1x4xf32>
  return %s : tensor<1x4xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
func.func @bad_dim(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'cleave.sp_all_gather' op dim 2 is not a dimension of 'tensor<2x4xf32>'}}
  %g = cleave.sp_all_gather %x {axes = ["tensor"], dim = 2 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=2]>} {
func.func @split_grad_two_axes(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'cleave.sp_all_gather' op with split_grad gathers over one mesh axis, got ["data", "tensor"]}}
  %g = cleave.sp_all_gather %x {axes = ["data", "tensor"], dim = 0 : i64, split_grad} : tensor<2x4xf32> -> tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}
}
