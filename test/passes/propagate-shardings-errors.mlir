// Errors of --cleave-propagate-shardings: two different splits of one
// dimension meeting at an op name its ONNX node; a degree that disagrees
// with the module's mesh, or a mesh without a tensor axis.
// RUN: not cleave-opt %s --split-input-file --cleave-propagate-shardings=tensor=2 -o /dev/null 2>&1 | FileCheck %s

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @a {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<4x8xf32>
  cleave.parameter @b {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<4x8xf32>
  func.func @forward() -> tensor<4x8xf32> {
    %a = cleave.get_param @a : tensor<4x8xf32>
    %b = cleave.get_param @b : tensor<4x8xf32>
    %c = cleave.neg %b : tensor<4x8xf32>
    // CHECK: error: loc("mix"): conflicting tensor-parallel splits meet at cleave.add 'mix': dimension 0 of operand 0 is split over "tensor" and dimension 1 of operand 1 over "tensor", the same ranks for another factor (([i, j], [i, j])->([i, j]) {i=4, j=8}); give the parameters that seed them compatible cleave.sharding, or none
    %s = cleave.add %a, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("mix")
    return %s : tensor<4x8xf32>
  }
}

// -----

// A dimension split in halves meets one split within 2 blocks.
module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
  cleave.parameter @a {cleave.sharding = #cleave.sharding<[{"tensor"}]>} : tensor<8xf32>
  cleave.parameter @b {cleave.sharding = #cleave.sharding<[2 blocks {"tensor"}]>} : tensor<8xf32>
  func.func @forward() -> tensor<8xf32> {
    %a = cleave.get_param @a : tensor<8xf32>
    %b = cleave.get_param @b : tensor<8xf32>
    // CHECK: error: loc("blocks"): conflicting tensor-parallel splits meet at cleave.mul 'blocks': dimension 0 of operand 0 is split over "tensor" and dimension 0 of operand 1 over 2 blocks of "tensor" for the same factor
    %s = cleave.mul %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> loc("blocks")
    return %s : tensor<8xf32>
  }
}

// -----

// CHECK: error: cleave-propagate-shardings: tensor=2 but the mesh #cleave.mesh<["data"=2, "tensor"=4]> has "tensor"=4; leave the option out to use the mesh's
module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
}

// -----

// CHECK: error: cleave-propagate-shardings: the mesh #cleave.mesh<["data"=2]> has no "tensor" axis to split over
module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
}
